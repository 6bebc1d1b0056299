/* lockfile.c - the lock file of each open port, $TMPDIR/<namespace>-<node>-<port>.lock.
 *
 * Its owner holds an flock on it while the port is open (a second opener gets GM_BUSY) and
 * writes its shm address into it: the shm provider appends a per-process counter to endpoint
 * names, so a peer reads the exact address from here.  The file also holds the port's
 * doorbell (bell.c), so it keeps GMX_LOCKFILE_SIZE bytes from its take on.  The file goes when the
 * port closes or the process exits, and a file whose owner died (nobody holds its lock) is removed
 * by the next process that looks at it: a sender probing the port, or a process opening a port of
 * that node.
 *
 * Removal is safe because only a holder of the exclusive lock unlinks the path, and a taker
 * that locked an inode checks that the path still names that inode (else someone removed it
 * meanwhile and it starts over on a fresh file). */
#include "gm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void gmx_lock_path(unsigned node, unsigned port, char *buf, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, len, "%s/%s-%u-%u.lock", dir && *dir ? dir : "/tmp", gmx_cfg.shm_ns, node, port);
}

/* 1 if path still names the file open as fd. */
static int still_linked(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Zeroes the address (a dead owner's, or ours at close).  The file is not truncated: peers
 * may have its doorbell page mapped (bell.c), and a page beyond the end would fault. */
static int clear_address(int fd)
{
    static const char zeros[GMX_ADDR_AREA];
    return pwrite(fd, zeros, sizeof zeros, 0) == (ssize_t)sizeof zeros ? 0 : -1;
}

int gmx_lock_take(unsigned node, unsigned port)
{
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    /* A prober (gmx_lock_unheld) holds the lock for a few microseconds: retry briefly before
     * saying busy.  A removal racing with us costs a new file, a bounded number of times. */
    for (int tries = 0; tries < 200; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return -2;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd);
            if (errno != EWOULDBLOCK || tries >= 20) return errno == EWOULDBLOCK ? -1 : -2;
            struct timespec nap = {0, 200000};
            nanosleep(&nap, NULL);
            continue;
        }
        if (!still_linked(fd, path)) {
            close(fd);
            continue;
        }
        if (clear_address(fd) != 0 || ftruncate(fd, GMX_LOCKFILE_SIZE) != 0) {
            unlink(path);
            close(fd);
            return -2;
        }
        return fd;
    }
    return -2;
}

void gmx_lock_release(unsigned node, unsigned port, int fd)
{
    if (fd < 0) return;
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    /* Unpublish the address first: a reader that opened the file before the unlink reads
     * nothing rather than a dead endpoint's name. */
    if (clear_address(fd) != 0) gmx_log("cannot clear the lock file of port %u\n", port);
    unlink(path);
    close(fd);
}

int gmx_lock_unheld(unsigned node, unsigned port)
{
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 1;
    /* Shared first: probers of one port do not make each other see it held.  Only one that
     * gets it alone removes the file. */
    int unheld = flock(fd, LOCK_SH | LOCK_NB) == 0;
    if (unheld && flock(fd, LOCK_EX | LOCK_NB) == 0 && still_linked(fd, path))
        unlink(path); /* its owner died */
    close(fd);        /* also drops our probe lock */
    return unheld;
}
