/* qlock.c - a look at a shm target's queue lock before a provider call toward it.
 *
 * libfabric 1.17's shm provider takes the target's region lock (a glibc spin lock in the
 * target's shared memory) for every send, and the target takes it while it reads its queue.
 * A target *stopped* inside that hold (SIGSTOP, a debugger, a stop that lands there on a
 * loaded machine) is alive, so its lock is never released by the watchdog (unstick.c): a send
 * to it spins inside the provider until it runs again, and the thread that made it can do
 * nothing else. That thread may be the program's own: a PVM master whose pvm_send met such a
 * child could not go on to let the child continue (tests/pvm/giveup.sh hung, once in a CI run
 * under TSan; deterministically with tests/proc's stopinlock.so).
 *
 * So each shm target's region header is mapped read-only when the peer is resolved, and a
 * provider call toward it first looks at the lock word: free, the call goes on (as before);
 * held, it waits for it at most GMX_QLOCK_SPIN_NS (a running holder lets go within
 * microseconds), and still held, the call is not made: the request waits in the port's backlog
 * (every progress round looks again, a single load while it stays held), so no thread of ours
 * spins on it. The port says which target waits so and since when (gm_compat_port_stuck, as
 * for a call stuck inside, and the watchdog's stuck notify), so a program can give it up after
 * its dead time. A holder that vanished (killed while it held the lock) is still met by a call
 * inside after GMX_ORPHAN_MS, which the watchdog frees (unstick.c); a dead target's lock file
 * fails what waits for it (the backlog's checks).
 *
 * The region header, libfabric 1.17 (Debian's libfabric1): u8 version, u8 reserved, u16
 * flags, int pid, two u8 capabilities, void *base_addr, then the spin lock (glibc on x86_64:
 * 1 free, 0 or below held). The layout is checked when the header is mapped (a version, the
 * pid the region's name carries, a lock word that is a spin lock's); a region that does not
 * match is not looked at, and calls toward it behave as before.
 *
 * A lock taken by the target between our look and the provider's own lock, and held because
 * the target is stopped right then, still holds the call: the window is the few instructions
 * between the two, not the whole hold.
 */
#include "gm_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void gmx_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#define QLOCK_OFFSET 24 /* the spin lock in the region header */
#define QLOCK_PID_OFFSET 4
#define QLOCK_MAP_LEN 4096
#define QLOCK_VERSION_MAX 64 /* libfabric 1.17 writes 4 */

/* The pid the region's name carries: "<namespace>-<node>-<port>.<pid in hex>.<n>:..." */
static int name_pid(const char *name)
{
    const char *last = strrchr(name, '.');
    if (!last || last == name) return -1;
    const char *first = last - 1;
    while (first > name && *first != '.')
        first--;
    if (*first != '.' || last - first < 2 || last - first > 9) return -1;
    long pid = 0;
    for (const char *c = first + 1; c < last; c++) {
        int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
        if (d < 0) return -1;
        pid = pid * 16 + d;
    }
    return pid > 0 && pid <= 0x7fffffff ? (int)pid : -1;
}

const _Atomic int *gmx_qlock_map(const char *addr)
{
    static const char prefix[] = "fi_shm://";
    const char *name =
        strncmp(addr, prefix, sizeof prefix - 1) == 0 ? addr + sizeof prefix - 1 : addr;
    int pid = name_pid(name);
    char path[GMX_REGION_NAME + 16];
    if (pid < 0 || !*name || strchr(name, '/') ||
        snprintf(path, sizeof path, "/dev/shm/%s", name) >= (int)sizeof path)
        return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    void *page = fstat(fd, &st) == 0 && st.st_size >= QLOCK_MAP_LEN
                     ? mmap(NULL, QLOCK_MAP_LEN, PROT_READ, MAP_SHARED, fd, 0)
                     : MAP_FAILED;
    close(fd);
    if (page == MAP_FAILED) return NULL;
    const unsigned char *h = page;
    int hpid, word;
    memcpy(&hpid, h + QLOCK_PID_OFFSET, sizeof hpid);
    const _Atomic int *lock = (const _Atomic int *)(h + QLOCK_OFFSET);
    word = atomic_load_explicit(lock, memory_order_relaxed);
    if (h[0] == 0 || h[0] > QLOCK_VERSION_MAX || hpid != pid || word > 1 || word < -4096) {
        gmx_log("shm region %s: not the header this library knows (version %u, pid %d): its "
                "lock is not looked at\n",
                name, h[0], hpid);
        munmap(page, QLOCK_MAP_LEN);
        return NULL;
    }
    return lock;
}

void gmx_qlock_unmap(const _Atomic int *lock)
{
    if (lock) munmap((char *)lock - QLOCK_OFFSET, QLOCK_MAP_LEN);
}

/* Notes that peer's lock was found held (port lock held): the port's report names the target
 * and since when, unless it names another one already (the report is one target's). */
static void note_held(struct gm_port *p, struct gmx_peer *peer, uint64_t now)
{
    if (!peer->qlock_held_ns) peer->qlock_held_ns = now;
    if (atomic_load_explicit(&p->held_since_ns, memory_order_relaxed)) return;
    atomic_store_explicit(&p->held_target, peer->node << 8 | peer->port, memory_order_relaxed);
    atomic_store_explicit(&p->held_since_ns, peer->qlock_held_ns, memory_order_release);
    gmx_log("port %u: sends to node %u port %u wait: its queue lock is held\n", p->port_id,
            peer->node, peer->port);
}

void gmx_qlock_forget(struct gm_port *p, struct gmx_peer *peer)
{
    peer->qlock_held_ns = 0;
    if (atomic_load_explicit(&p->held_since_ns, memory_order_relaxed) &&
        atomic_load_explicit(&p->held_target, memory_order_relaxed) ==
            (peer->node << 8 | peer->port))
        atomic_store_explicit(&p->held_since_ns, 0, memory_order_release);
}

int gmx_qlock_busy(struct gm_port *p, struct gmx_peer *peer)
{
    const _Atomic int *lock = peer->qlock;
    if (!lock) return 0;
    if (atomic_load_explicit(lock, memory_order_relaxed) > 0) {
        if (peer->qlock_held_ns) gmx_qlock_forget(p, peer);
        return 0;
    }
    uint64_t now = gmx_coarse_ns();
    if (peer->qlock_held_ns && now - peer->qlock_held_ns >= (uint64_t)GMX_ORPHAN_MS * 1000000u &&
        gmx_peer_loss_recent()) {
        /* Held that long soon after a peer vanished: maybe by that peer, killed while it
         * held the lock; the call goes in and the watchdog frees it if so (unstick.c). */
        return 0;
    }
    /* A running holder lets go within microseconds: first met, wait for it; met again (the
     * backlog's retries), a short look only, so a stopped holder costs each progress round
     * little. A busy target takes its lock at every poll: a single load would lose the race
     * the provider's own lock wins. */
    uint64_t until = gmx_now_ns() + (peer->qlock_held_ns ? GMX_QLOCK_RESPIN_NS : GMX_QLOCK_SPIN_NS);
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(lock, memory_order_relaxed) > 0) {
            if (peer->qlock_held_ns) gmx_qlock_forget(p, peer);
            return 0;
        }
        if (!(i & 15) && gmx_now_ns() >= until) break;
        gmx_cpu_relax();
    }
    note_held(p, peer, now);
    return 1;
}

unsigned gmx_qlock_report(struct gm_port *p, unsigned *node, unsigned *port)
{
    uint64_t since = atomic_load_explicit(&p->held_since_ns, memory_order_acquire);
    if (!since) return 0;
    unsigned target = atomic_load_explicit(&p->held_target, memory_order_relaxed);
    if (atomic_load_explicit(&p->held_since_ns, memory_order_acquire) != since)
        return 0; /* another report meanwhile: the next look */
    if (node) *node = target >> 8;
    if (port) *port = target & 0xff;
    uint64_t now = gmx_coarse_ns();
    uint64_t ms = now > since ? (now - since) / 1000000u : 0;
    return ms < 1 ? 1 : ms > UINT32_MAX ? UINT32_MAX : (unsigned)ms;
}
