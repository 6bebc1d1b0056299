/* bell.c - the doorbell of a port: a thread sleeping for a port's next event is woken by
 * the senders on this host.
 *
 * libfabric's shm provider offers no descriptor to sleep on, so a thread waiting for an
 * event could only nap and look again, and an idle port answered a message when its nap
 * ended, up to milliseconds later.  Each port's lock file therefore carries a doorbell in
 * shared memory (a page that is mapped by the port and by every shm port that sends to it):
 *   - a thread about to sleep counts itself in `armed`, looks for events once more, and
 *     sleeps on the futex `seq` (gmx_bell_arm, gmx_bell_sleep, gmx_bell_disarm);
 *   - a sender that finds `armed` set after its provider call bumps `seq` and wakes the
 *     sleepers (gmx_bell_ring).  A target that is not asleep costs it one load of a line
 *     nobody writes.
 * Each side orders its write before its read with a full fence (the sleeper: armed, then
 * the provider's queue; the sender: the queue, then armed), so one of them sees the other.
 *
 * Ports of other providers ring nobody (their messages come from other hosts): their own
 * bell is rung only by gm_compat_wake.  The lock file never shrinks below GMX_LOCKFILE_SIZE
 * once a mapper may have it (lockfile.c), so a mapped page never faults. */
#include "gm_internal.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct gmx_bell *map_fd(int fd)
{
    void *page = mmap(NULL, GMX_LOCKFILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return page == MAP_FAILED ? NULL : (struct gmx_bell *)((char *)page + GMX_BELL_OFFSET);
}

struct gmx_bell *gmx_bell_map_own(int lock_fd)
{
    struct stat st;
    if (lock_fd < 0 || fstat(lock_fd, &st) != 0 || st.st_size < GMX_LOCKFILE_SIZE) return NULL;
    struct gmx_bell *b = map_fd(lock_fd);
    if (b) atomic_store(&b->armed, 0); /* a dead owner may have slept on it */
    return b;
}

struct gmx_bell *gmx_bell_map_peer(unsigned node, unsigned port)
{
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    int fd = gmx_lock_open(path, O_RDWR);
    if (fd < 0) return NULL;
    struct stat st;
    /* A file still being set up (or of a library without bells) is not mapped: beyond its
     * end the page would fault. */
    struct gmx_bell *b = fstat(fd, &st) == 0 && st.st_size >= GMX_LOCKFILE_SIZE ? map_fd(fd) : NULL;
    close(fd);
    return b;
}

void gmx_bell_unmap(struct gmx_bell *b)
{
    if (b) munmap((char *)b - GMX_BELL_OFFSET, GMX_LOCKFILE_SIZE);
}

void gmx_bell_ring(struct gmx_bell *b)
{
    if (!b) return;
    atomic_thread_fence(memory_order_seq_cst); /* our message before the look at armed */
    if (atomic_load_explicit(&b->armed, memory_order_relaxed) == 0) return;
    atomic_fetch_add(&b->seq, 1);
    syscall(SYS_futex, &b->seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

uint32_t gmx_bell_arm(struct gmx_bell *b)
{
    atomic_fetch_add(&b->armed, 1);
    atomic_thread_fence(memory_order_seq_cst); /* armed before the caller's look for events */
    return atomic_load(&b->seq);
}

void gmx_bell_sleep(struct gmx_bell *b, uint32_t seen, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    /* Not FUTEX_PRIVATE: the word is shared with other processes.  Returns at once when a
     * ring came after gmx_bell_arm. */
    syscall(SYS_futex, &b->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
}

void gmx_bell_disarm(struct gmx_bell *b)
{
    atomic_fetch_sub(&b->armed, 1);
}
