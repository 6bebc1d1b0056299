/* alarm.c - GM alarms: a per-port list sorted by deadline; callbacks run in
 * gm_unknown() on GM_ALARM_EVENT. */
#include "gm_internal.h"

#include <string.h>

GMX_EXPORT void gm_initialize_alarm(gm_alarm_t *a)
{
    if (a) memset(a, 0, sizeof *a);
}

static void unlink_alarm(gm_alarm_t *a)
{
    struct gm_port *p = a->port;
    if (!p) return;
    for (gm_alarm_t **link = &p->alarms; *link; link = &(*link)->next) {
        if (*link == a) {
            *link = a->next;
            break;
        }
    }
    a->next = NULL;
}

GMX_EXPORT void gm_set_alarm(struct gm_port *p, gm_alarm_t *a, gm_u64_t usecs,
                             void (*callback)(void *), void *context)
{
    if (!p || !a) return;
    if (a->state == GM_ALARM_SET) unlink_alarm(a);
    if (usecs > UINT64_MAX / 2000) usecs = UINT64_MAX / 2000;
    a->port = p;
    a->callback = callback;
    a->context = context;
    a->deadline = gmx_now_ns() + usecs * 1000;
    a->state = GM_ALARM_SET;
    gm_alarm_t **link = &p->alarms;
    while (*link && (*link)->deadline <= a->deadline)
        link = &(*link)->next;
    a->next = *link;
    *link = a;
}

GMX_EXPORT void gm_cancel_alarm(gm_alarm_t *a)
{
    if (!a || a->state != GM_ALARM_SET) return;
    unlink_alarm(a);
    a->state = GM_ALARM_FREE;
}

GMX_EXPORT void gm_flush_alarm(struct gm_port *p)
{
    while (p && p->alarms)
        gm_cancel_alarm(p->alarms);
}

int gmx_alarm_due(struct gm_port *p, uint64_t now)
{
    return p->alarms && p->alarms->deadline <= now;
}

uint64_t gmx_alarm_next(struct gm_port *p)
{
    return p->alarms ? p->alarms->deadline : 0;
}

void gmx_alarms_run(struct gm_port *p)
{
    uint64_t now = gmx_now_ns();
    /* Only alarms due now: a callback that re-arms itself runs next time. */
    while (p->alarms && p->alarms->deadline <= now) {
        gm_alarm_t *a = p->alarms;
        p->alarms = a->next;
        a->next = NULL;
        a->state = GM_ALARM_FREE;
        if (a->callback) a->callback(a->context);
    }
}

GMX_EXPORT gm_u64_t gm_ticks(struct gm_port *p)
{
    (void)p;
    return gmx_now_ns() / 500;
}
