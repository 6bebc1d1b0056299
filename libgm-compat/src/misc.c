/* misc.c - error texts, gm_exit, and GM's small C helpers. */
#include "gm_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- errors ---------------------------------------------------------------- */

#define GMX_STATUS_TEXTS(X)                                                                        \
    X(GM_SUCCESS, "success")                                                                       \
    X(GM_FAILURE, "unqualified failure")                                                           \
    X(GM_INPUT_BUFFER_TOO_SMALL, "input buffer is too small")                                      \
    X(GM_OUTPUT_BUFFER_TOO_SMALL, "output buffer is too small")                                    \
    X(GM_TRY_AGAIN, "try again")                                                                   \
    X(GM_BUSY, "port is busy")                                                                     \
    X(GM_MEMORY_FAULT, "memory fault")                                                             \
    X(GM_INTERRUPTED, "interrupted")                                                               \
    X(GM_INVALID_PARAMETER, "invalid parameter")                                                   \
    X(GM_OUT_OF_MEMORY, "out of memory")                                                           \
    X(GM_INVALID_COMMAND, "invalid command")                                                       \
    X(GM_PERMISSION_DENIED, "permission denied")                                                   \
    X(GM_INTERNAL_ERROR, "internal error")                                                         \
    X(GM_UNATTACHED, "unattached")                                                                 \
    X(GM_UNSUPPORTED_DEVICE, "unsupported device")                                                 \
    X(GM_SEND_TIMED_OUT, "send timed out (no receive buffer provided)")                            \
    X(GM_SEND_REJECTED, "send rejected (size not acceptable)")                                     \
    X(GM_SEND_TARGET_PORT_CLOSED, "target port is closed")                                         \
    X(GM_SEND_TARGET_NODE_UNREACHABLE, "target node is unreachable")                               \
    X(GM_SEND_DROPPED, "send dropped at the client's request")                                     \
    X(GM_SEND_PORT_CLOSED, "sending port was closed")                                              \
    X(GM_NODE_ID_NOT_YET_SET, "node id not yet set")                                               \
    X(GM_STILL_SHUTTING_DOWN, "port is still shutting down")                                       \
    X(GM_CLONE_BUSY, "clone busy")                                                                 \
    X(GM_NO_SUCH_DEVICE, "no such device")                                                         \
    X(GM_ABORTED, "aborted")                                                                       \
    X(GM_INCOMPATIBLE_LIB_AND_DRIVER, "incompatible library and driver (API version)")             \
    X(GM_UNTRANSLATED_SYSTEM_ERROR, "untranslated system error")                                   \
    X(GM_ACCESS_DENIED, "access denied")                                                           \
    X(GM_NO_DRIVER_SUPPORT, "no driver support")                                                   \
    X(GM_PTE_REF_CNT_OVERFLOW, "page table reference count overflow")                              \
    X(GM_NOT_SUPPORTED_IN_KERNEL, "not supported in the kernel")                                   \
    X(GM_NOT_SUPPORTED_ON_ARCH, "not supported on this architecture")                              \
    X(GM_NO_MATCH, "no match")                                                                     \
    X(GM_USER_ERROR, "user error")                                                                 \
    X(GM_TIMED_OUT, "timed out")                                                                   \
    X(GM_DATA_CORRUPTED, "data corrupted")                                                         \
    X(GM_HARDWARE_FAULT, "hardware fault")                                                         \
    X(GM_SEND_ORPHANED, "send orphaned")                                                           \
    X(GM_MINOR_OVERFLOW, "minor overflow")                                                         \
    X(GM_PAGE_TABLE_FULL, "page table full")                                                       \
    X(GM_UC_ERROR, "UC error")                                                                     \
    X(GM_INVALID_PORT_NUMBER, "invalid port number")                                               \
    X(GM_DEV_NOT_FOUND, "no device files found")                                                   \
    X(GM_FIRMWARE_NOT_RUNNING, "firmware not running")                                             \
    X(GM_YP_NO_MATCH, "no match for yellow pages query")                                           \
    X(GM_SRAM_PARITY_ERROR, "SRAM parity error")                                                   \
    X(GM_FIRMWARE_ABORT, "firmware abort")

GMX_EXPORT char *gm_strerror(gm_status_t error)
{
    switch (error) {
#define GMX_CASE(code, text)                                                                       \
    case code:                                                                                     \
        return (char *)text;
        GMX_STATUS_TEXTS(GMX_CASE)
#undef GMX_CASE
    default:
        return (char *)"unknown GM status code";
    }
}

GMX_EXPORT void gm_perror(const char *message, gm_status_t error)
{
    if (message && *message)
        fprintf(stderr, "%s: %s\n", message, gm_strerror(error));
    else
        fprintf(stderr, "%s\n", gm_strerror(error));
}

GMX_EXPORT void _gm_assertion_failed(const char *txt, int line, const char *file)
{
    fprintf(stderr, "GM assertion failed: %s (%s:%d)\n", txt ? txt : "?", file ? file : "?", line);
    abort();
}

GMX_EXPORT void gm_abort(void)
{
    abort();
}

/* ---- gm_exit and gm_on_exit ------------------------------------------------ */

struct on_exit_cb {
    gm_on_exit_callback_t cb;
    void *arg;
    struct on_exit_cb *next;
};
static pthread_mutex_t exit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct on_exit_cb *exit_cbs; /* guarded by exit_lock; newest first */

GMX_EXPORT gm_status_t gm_on_exit(gm_on_exit_callback_t cb, void *arg)
{
    struct on_exit_cb *e = malloc(sizeof *e);
    if (!e) return GM_OUT_OF_MEMORY;
    e->cb = cb;
    e->arg = arg;
    pthread_mutex_lock(&exit_lock);
    e->next = exit_cbs;
    exit_cbs = e;
    pthread_mutex_unlock(&exit_lock);
    return GM_SUCCESS;
}

GMX_EXPORT void gm_exit(gm_status_t status)
{
    pthread_mutex_lock(&exit_lock);
    struct on_exit_cb *e = exit_cbs;
    exit_cbs = NULL;
    pthread_mutex_unlock(&exit_lock);
    while (e) {
        struct on_exit_cb *next = e->next;
        if (e->cb) e->cb(status, e->arg);
        free(e);
        e = next;
    }
    exit(status == GM_SUCCESS ? 0 : 1);
}

/* ---- memory and string helpers --------------------------------------------- */

GMX_EXPORT void gm_bcopy(const void *from, void *to, gm_size_t len)
{
    if (len) memmove(to, from, len);
}
GMX_EXPORT void gm_bzero(void *ptr, gm_size_t len)
{
    if (len) memset(ptr, 0, len);
}
GMX_EXPORT void *gm_memset(void *s, int c, gm_size_t n)
{
    return n ? memset(s, c, n) : s;
}
GMX_EXPORT int gm_memcmp(const void *a, const void *b, gm_size_t len)
{
    return len ? memcmp(a, b, len) : 0;
}
GMX_EXPORT void *gm_malloc(gm_size_t len)
{
    return malloc(len ? len : 1);
}
GMX_EXPORT void *gm_calloc(gm_size_t len, gm_size_t cnt)
{
    return calloc(len ? len : 1, cnt ? cnt : 1);
}
GMX_EXPORT void gm_free(void *ptr)
{
    free(ptr);
}

GMX_EXPORT void *gm_alloc_pages(gm_size_t len)
{
    void *m = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}
GMX_EXPORT void gm_free_pages(void *addr, gm_size_t len)
{
    if (addr) munmap(addr, len ? len : 1);
}
GMX_EXPORT void *gm_page_alloc(void)
{
    return gm_alloc_pages((gm_size_t)sysconf(_SC_PAGESIZE));
}
GMX_EXPORT void gm_page_free(void *addr)
{
    gm_free_pages(addr, (gm_size_t)sysconf(_SC_PAGESIZE));
}

GMX_EXPORT gm_size_t gm_strlen(const char *s)
{
    return s ? strlen(s) : 0;
}
GMX_EXPORT char *gm_strncpy(char *to, const char *from, int len)
{
    return len > 0 ? strncpy(to, from, (size_t)len) : to;
}
GMX_EXPORT int gm_strcmp(const char *a, const char *b)
{
    return strcmp(a, b);
}
GMX_EXPORT int gm_strncmp(const char *a, const char *b, int len)
{
    return len > 0 ? strncmp(a, b, (size_t)len) : 0;
}
GMX_EXPORT int gm_strncasecmp(const char *a, const char *b, int len)
{
    return len > 0 ? strncasecmp(a, b, (size_t)len) : 0;
}
GMX_EXPORT char *gm_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}
GMX_EXPORT int gm_isprint(int c)
{
    return isprint(c & 0xff);
}

GMX_EXPORT int gm_printf(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vprintf(format, ap);
    va_end(ap);
    return n;
}
GMX_EXPORT int gm_eprintf(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vfprintf(stderr, format, ap);
    va_end(ap);
    return n;
}

GMX_EXPORT void gm_hex_dump(const void *ptr, gm_size_t len)
{
    const unsigned char *b = ptr;
    for (gm_size_t i = 0; b && i < len; i++)
        printf("%02x%s", b[i], (i % 16 == 15 || i + 1 == len) ? "\n" : " ");
}

GMX_EXPORT int gm_sleep(unsigned seconds)
{
    return (int)sleep(seconds);
}
GMX_EXPORT gm_pid_t gm_getpid(void)
{
    return (gm_pid_t)getpid();
}

GMX_EXPORT unsigned long gm_log2_roundup(unsigned long n)
{
    unsigned long r = 0;
    while (r < 63 && (1UL << r) < n)
        r++;
    return r;
}

GMX_EXPORT unsigned long gm_crc(void *ptr, gm_size_t len)
{
    /* CRC-32 (IEEE), bitwise: only for checksums of small debug data. */
    const unsigned char *b = ptr;
    unsigned long crc = 0xffffffffUL;
    for (gm_size_t i = 0; b && i < len; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320UL & (0UL - (crc & 1)));
    }
    return crc ^ 0xffffffffUL;
}
GMX_EXPORT unsigned long gm_crc_str(const char *s)
{
    return gm_crc((void *)s, gm_strlen(s));
}

static pthread_mutex_t rand_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long rand_state = 1; /* guarded by rand_lock */
GMX_EXPORT void gm_srand(int seed)
{
    pthread_mutex_lock(&rand_lock);
    rand_state = (unsigned long)seed;
    pthread_mutex_unlock(&rand_lock);
}
GMX_EXPORT int gm_rand(void)
{
    pthread_mutex_lock(&rand_lock);
    rand_state = rand_state * 6364136223846793005UL + 1442695040888963407UL;
    int r = (int)((rand_state >> 33) & 0x7fffffff);
    pthread_mutex_unlock(&rand_lock);
    return r;
}
GMX_EXPORT unsigned int gm_rand_mod(unsigned int modulus)
{
    return modulus ? (unsigned)gm_rand() % modulus : 0;
}

GMX_EXPORT void *gm_memorize_message(void *message, void *buffer, unsigned int len)
{
    if (message != buffer && len) memmove(buffer, message, len);
    return buffer;
}

/* ---- mutexes ----------------------------------------------------------------- */

struct gm_mutex {
    pthread_mutex_t m;
};
GMX_EXPORT struct gm_mutex *gm_create_mutex(void)
{
    struct gm_mutex *mu = malloc(sizeof *mu);
    if (mu && pthread_mutex_init(&mu->m, NULL) != 0) {
        free(mu);
        mu = NULL;
    }
    return mu;
}
GMX_EXPORT void gm_destroy_mutex(struct gm_mutex *mu)
{
    if (mu) {
        pthread_mutex_destroy(&mu->m);
        free(mu);
    }
}
GMX_EXPORT void gm_mutex_enter(struct gm_mutex *mu)
{
    if (mu && pthread_mutex_lock(&mu->m) != 0) abort(); /* a broken invariant of our own */
}
GMX_EXPORT void gm_mutex_exit(struct gm_mutex *mu)
{
    if (mu && pthread_mutex_unlock(&mu->m) != 0) abort();
}

/* ---- lookaside lists: fixed-size entries; each remembers its list ---------- */

struct gm_lookaside {
    gm_size_t entry_len;
};
struct la_entry {
    struct gm_lookaside *list;
    max_align_t payload[];
};
GMX_EXPORT struct gm_lookaside *gm_create_lookaside(gm_size_t entry_len, gm_size_t min_cnt)
{
    (void)min_cnt;
    struct gm_lookaside *l = malloc(sizeof *l);
    if (l) l->entry_len = entry_len;
    return l;
}
GMX_EXPORT void gm_destroy_lookaside(struct gm_lookaside *l)
{
    free(l);
}
GMX_EXPORT void *gm_lookaside_alloc(struct gm_lookaside *l)
{
    if (!l) return NULL;
    struct la_entry *e = malloc(sizeof *e + l->entry_len);
    if (!e) return NULL;
    e->list = l;
    return e->payload;
}
GMX_EXPORT void *gm_lookaside_zalloc(struct gm_lookaside *l)
{
    void *p = gm_lookaside_alloc(l);
    if (p) memset(p, 0, l->entry_len);
    return p;
}
GMX_EXPORT void gm_lookaside_free(void *ptr)
{
    if (ptr) free((char *)ptr - offsetof(struct la_entry, payload));
}
