/*
 * Tasks: threads scheduled by the domain core. Slots are made on demand, also for tasks not
 * spawned yet, so a message for a task that starts later waits in its mailbox.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

_Thread_local struct cor_task *cor__task_mine; /* internal.h: cor__task_self inline */

/* The slot for `index`, made if missing; g.lock held. */
static struct cor_task *slot_locked(unsigned index)
{
    struct cor_task *t = g.tasks[index];
    if (!t && (t = calloc(1, sizeof *t))) {
        t->index = index;
        pthread_mutex_init(&t->lock, NULL);
        pthread_cond_init(&t->cond, NULL);
        __atomic_store_n(&g.tasks[index], t, __ATOMIC_RELEASE);
    }
    return t;
}

struct cor_task *cor__task_get(unsigned index)
{
    if (!g.tasks || index >= (unsigned)g.max_tasks) return NULL;
    struct cor_task *t = __atomic_load_n(&g.tasks[index], __ATOMIC_ACQUIRE);
    if (t) return t;
    COR_LOCK(&g.lock);
    t = slot_locked(index);
    COR_UNLOCK(&g.lock);
    return t;
}

/* Takes the next free index for a new task; g.lock held throughout, so concurrent spawns
 * get distinct indices and name indices. */
static struct cor_task *claim(const char *name)
{
    while (g.ntasks < (unsigned)g.max_tasks) {
        unsigned i = g.ntasks++;
        struct cor_task *t = slot_locked(i);
        if (!t) return NULL;
        if (t->used) continue;
        unsigned same = 0;
        for (unsigned k = 0; k < i; k++)
            if (g.tasks[k] && g.tasks[k]->used && !strcmp(g.tasks[k]->name, name)) same++;
        t->used = true;
        snprintf(t->name, sizeof t->name, "%s", name);
        t->name_index = same;
        return t;
    }
    return NULL;
}

/* Threads CoR did not start (the main thread before cor_init, a user's pthread) become tasks
 * the first time they call the API, so every call has a task to own its requests. */
struct cor_task *cor__task_adopt_thread(void)
{
    if (cor__task_mine) return cor__task_mine;
    if (!g.tasks) return NULL;
    COR_LOCK(&g.lock);
    struct cor_task *t = claim("thread");
    COR_UNLOCK(&g.lock);
    cor__task_mine = t;
    return t;
}

/* The calling thread's task if it has one; never adopts (core threads have none). */
struct cor_task *cor__task_current(void)
{
    return cor__task_mine;
}

void cor__task_adopt_main(void)
{
    COR_LOCK(&g.lock);
    cor__task_mine = claim("main");
    COR_UNLOCK(&g.lock);
}

void cor__task_forget_self(void)
{
    cor__task_mine = NULL;
}

static void *task_main(void *arg)
{
    struct cor_task *t = arg;
    cor__task_mine = t;
    cor__thread_name("t:%s", t->name);
    t->exit_status = t->fn(t->arg);
    atomic_store(&t->finished, true);
    return NULL;
}

COR_API int cor_task_spawn(const char *name, cor_task_fn fn, void *arg, cor_idp_t *task)
{
    int err = cor__check_init();
    if (err) return err;
    if (!fn || (name && strlen(name) >= COR_NAME_MAX)) return COR_EINVAL;
    COR_LOCK(&g.lock);
    struct cor_task *t = claim(name ? name : "task");
    COR_UNLOCK(&g.lock);
    if (!t) return COR_ELIMIT;
    t->fn = fn;
    t->arg = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    /* Under g.lock, so a join from any task sees the thread id once the task exists. */
    COR_LOCK(&g.lock);
    int rc = pthread_create(&t->thread, &attr, task_main, t);
    if (rc == 0)
        t->has_thread = true;
    else
        t->used = false;
    COR_UNLOCK(&g.lock);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        cor__log("pthread_create for task %s: %s", name ? name : "task", strerror(rc));
        return COR_ENOMEM;
    }
    if (task) *task = cor__task_idp(g.rank, t->index);
    return COR_OK;
}

COR_API int cor_task_reserve(const char *name, cor_idp_t *task)
{
    int err = cor__check_init();
    if (err) return err;
    if (!task || (name && strlen(name) >= COR_NAME_MAX)) return COR_EINVAL;
    COR_LOCK(&g.lock);
    struct cor_task *t = claim(name ? name : "mailbox");
    if (t) t->reserved = true;
    COR_UNLOCK(&g.lock);
    if (!t) return COR_ELIMIT;
    *task = cor__task_idp(g.rank, t->index);
    return COR_OK;
}

struct cor_task *cor__task_reserved(cor_idp_t idp)
{
    if (cor_idp_kind(idp) != COR_KIND_TASK || cor_idp_macro(idp) != g.macro ||
        cor_idp_domain(idp) != (unsigned)g.rank)
        return NULL;
    struct cor_task *t = cor__task_get(cor_idp_index(idp));
    return t && t->reserved ? t : NULL;
}

/* Hooked tasks with an arrival noted by this thread. A hook may poll the routes and so run
 * this list again from within: entries are taken off before their hook runs. */
#define HOOKED_MAX 8
static _Atomic int nhooked;
static _Thread_local struct cor_task *arrived[HOOKED_MAX];
static _Thread_local int narrived;

COR_API int cor_task_on_arrival(cor_idp_t task, void (*fn)(void *arg, int flags), void *arg)
{
    int err = cor__check_init();
    if (err) return err;
    struct cor_task *t = cor__task_reserved(task);
    if (!t) return COR_EINVAL;
    COR_LOCK(&g.lock);
    bool had = atomic_load(&t->on_arrival) != NULL;
    if (fn && !had && atomic_load(&nhooked) == HOOKED_MAX) {
        COR_UNLOCK(&g.lock);
        return COR_ELIMIT; /* each thread's list of arrivals holds every hooked task */
    }
    atomic_fetch_add(&nhooked, (fn != NULL) - had);
    t->on_arrival_arg = arg; /* published by the store below */
    atomic_store_explicit(&t->on_arrival, fn, memory_order_release);
    COR_UNLOCK(&g.lock);
    return COR_OK;
}

void cor__arrival_note(struct cor_task *t)
{
    if (!atomic_load_explicit(&t->on_arrival, memory_order_relaxed)) return;
    for (int i = 0; i < narrived; i++)
        if (arrived[i] == t) return;
    if (narrived < HOOKED_MAX) arrived[narrived++] = t;
}

void cor__arrivals_run(void)
{
    while (narrived > 0) {
        struct cor_task *t = arrived[--narrived];
        void (*fn)(void *, int) = atomic_load_explicit(&t->on_arrival, memory_order_acquire);
        if (fn) fn(t->on_arrival_arg, cor__listener_thread ? COR_ARRIVAL_LISTENER : 0);
    }
}

COR_API int cor_task_join(cor_idp_t task, int *exit_status)
{
    int err = cor__check_init();
    if (err) return err;
    if (cor_idp_kind(task) != COR_KIND_TASK || cor_idp_domain(task) != (unsigned)g.rank ||
        cor_idp_macro(task) != g.macro)
        return COR_EINVAL;
    struct cor_task *t = cor__task_get(cor_idp_index(task));
    if (!t) return COR_ENOTFOUND;
    if (t == cor__task_self()) return COR_EINVAL;
    COR_LOCK(&g.lock);
    int err2 = !t->used || !t->has_thread ? COR_ENOTFOUND : t->joined ? COR_ESTATE : COR_OK;
    pthread_t th = t->thread;
    if (!err2) t->joined = true;
    COR_UNLOCK(&g.lock);
    if (err2) return err2;
    pthread_join(th, NULL);
    if (exit_status) *exit_status = t->exit_status;
    return COR_OK;
}

/* Joins tasks nobody joined (cor_finalize). */
void cor__task_join_all(void)
{
    for (int i = 0; i < g.max_tasks; i++) {
        struct cor_task *me = cor__task_self();
        COR_LOCK(&g.lock);
        struct cor_task *t = g.tasks[i];
        bool mine = t && t->has_thread && !t->joined && t != me;
        pthread_t th = t ? t->thread : (pthread_t)0;
        if (mine) t->joined = true;
        COR_UNLOCK(&g.lock);
        if (mine) pthread_join(th, NULL);
    }
}

COR_API cor_idp_t cor_task_self(void)
{
    if (cor__check_init()) return COR_IDP_NULL;
    struct cor_task *t = cor__task_self();
    return t ? cor__task_idp(g.rank, t->index) : COR_IDP_NULL;
}

cor_idp_t cor__task_idp(unsigned rank, unsigned index)
{
    return cor_idp_make(g.macro, COR_KIND_TASK, rank, index);
}

COR_API cor_idp_t cor_task_idp(int domain_rank, unsigned index)
{
    if (cor__check_init() || domain_rank < 0 || domain_rank >= g.size || index > COR_MAX_INDEX)
        return COR_IDP_NULL;
    return cor__task_idp((unsigned)domain_rank, index);
}

COR_API int cor_task_name(cor_idp_t task, cor_name_t *name)
{
    int err = cor__check_init();
    if (err) return err;
    if (!name || cor_idp_kind(task) != COR_KIND_TASK || cor_idp_macro(task) != g.macro)
        return COR_EINVAL;
    if (cor_idp_domain(task) != (unsigned)g.rank) return COR_EINVAL;
    struct cor_task *t = cor__task_get(cor_idp_index(task));
    COR_LOCK(&g.lock);
    bool used = t && t->used;
    if (used) {
        memcpy(name->name, t->name, sizeof name->name);
        name->index = t->name_index;
        name->ascendant = cor_domain_self();
    }
    COR_UNLOCK(&g.lock);
    return used ? COR_OK : COR_ENOTFOUND;
}

/* Local half of cor_task_lookup; also answers other domains' service calls. */
int cor__task_find(const char *name, unsigned index, unsigned *out)
{
    int err = COR_ENOTFOUND;
    COR_LOCK(&g.lock);
    for (int i = 0; i < g.max_tasks && g.tasks; i++) {
        struct cor_task *t = g.tasks[i];
        if (t && t->used && t->name_index == index && !strcmp(t->name, name)) {
            *out = t->index;
            err = COR_OK;
            break;
        }
    }
    COR_UNLOCK(&g.lock);
    return err;
}
