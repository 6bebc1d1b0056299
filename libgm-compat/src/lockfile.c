/* lockfile.c - the lock file of each open port, /dev/shm/<namespace>-<node>-<port>.lock.
 *
 * Its owner holds an flock on it while the port is open (a second opener gets GM_BUSY) and
 * writes its shm address into it: the shm provider appends a per-process counter to endpoint
 * names, so a peer reads the exact address from here.  The file also holds the port's
 * doorbell (bell.c), so it keeps GMX_LOCKFILE_SIZE bytes from its take on.
 *
 * Where: one directory per host, the same for every process of every user, never a
 * per-process setting.  A task that pvmd started has pvmd's environment, not the one of the
 * program it talks to: with the files in $TMPDIR, two processes with different TMPDIRs each
 * found the other's port closed.  /dev/shm is where libfabric's shm provider keeps its
 * regions (a host without it has no shm provider either); /tmp where it is missing.  Names
 * carry the namespace (default gm<uid>), and a file another user owns is never trusted: it is
 * neither read nor taken nor removed.
 *
 * Nothing stays behind.  The file goes when the port closes or the process exits.  A process
 * killed with its port open (SIGKILL, or a crash) leaves its lock file and its shm provider's
 * region (16 MiB, /dev/shm/<address>): whoever finds such a file with nobody holding its
 * lock removes both, the region named in the file first: a sender probing the port, the
 * watchdog, and every gm_open, which sweeps the directory (gmx_lock_sweep).  The flock is the
 * proof of death: the kernel drops it with the last descriptor of the process, so no pid can
 * be reused under us, and a live owner is never swept.
 *
 * Removal is safe because only a holder of the exclusive lock unlinks the path (and the region
 * named in it), and a taker that locked an inode checks that the path still names that inode
 * (else someone removed it meanwhile and it starts over on a fresh file).  Only a holder of
 * the lock creates a region under the port's name (gm_open takes the lock first), so the
 * region a dead owner's file names is no live process's. */
#include "gm_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_ADDR_PREFIX "fi_shm://"
#define LOCK_SUFFIX ".lock"

static const char *lock_dir_name = "/dev/shm";
static pthread_once_t lock_dir_once = PTHREAD_ONCE_INIT;

static void lock_dir_pick(void)
{
    struct stat st;
    if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode) || access("/dev/shm", W_OK | X_OK) != 0)
        lock_dir_name = "/tmp";
}

const char *gmx_lock_dir(void)
{
    pthread_once(&lock_dir_once, lock_dir_pick);
    return lock_dir_name;
}

void gmx_lock_path(unsigned node, unsigned port, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s-%u-%u" LOCK_SUFFIX, gmx_lock_dir(), gmx_cfg.shm_ns, node, port);
}

/* Opens a lock file that is ours: a regular file of this user, symbolic links not followed.
 * -1 (errno set) otherwise; EPERM for a file of another user. */
int gmx_lock_open(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* 1 if path still names the file open as fd. */
static int still_linked(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Zeroes the address (a dead owner's, or ours at close).  The file is not truncated: peers
 * may have its doorbell page mapped (bell.c), and a page beyond the end would fault. */
static int clear_address(int fd)
{
    static const char zeros[GMX_ADDR_AREA];
    return pwrite(fd, zeros, sizeof zeros, 0) == (ssize_t)sizeof zeros ? 0 : -1;
}

/* The shm region named by the address in the lock file open as fd, whose path is path:
 * its name for shm_unlink in buf, 0; -1 if the file names none (no address: a closed port,
 * a tcp port) or one that is not this port's.  The file's stem <namespace>-<node>-<port>
 * must begin the region's name followed by ':' (the provider's suffix) or by ".<pid>.<n>:"
 * (a name per opening, port.c), so a damaged file
 * never makes us remove anything else. */
static int region_of(int fd, const char *path, char *buf, size_t len)
{
    char addr[GMX_ADDR_AREA + 1];
    ssize_t got = pread(fd, addr, GMX_ADDR_AREA, 0);
    if (got <= 0) return -1;
    addr[got] = '\0';
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = strlen(base);
    if (stem <= strlen(LOCK_SUFFIX)) return -1;
    stem -= strlen(LOCK_SUFFIX);
    /* libfabric's shm region, or our own rings' (shmring.c) */
    size_t plen = strlen(SHM_ADDR_PREFIX);
    if (strncmp(addr, GMX_SHM_ADDR_PREFIX, strlen(GMX_SHM_ADDR_PREFIX)) == 0)
        plen = strlen(GMX_SHM_ADDR_PREFIX);
    else if (strncmp(addr, SHM_ADDR_PREFIX, plen) != 0)
        return -1;
    const char *name = addr + plen;
    if (strncmp(name, base, stem) != 0 || (name[stem] != ':' && name[stem] != '.') ||
        strchr(name, '/') || strlen(name) + 2 > len)
        return -1;
    /* ".<pid>.<n>" (port.c: a name per opening), hex digits only, then the ':' suffix */
    if (name[stem] == '.') {
        size_t k = stem + 1, dots = 1;
        for (; name[k] && name[k] != ':'; k++)
            if (name[k] == '.')
                dots++;
            else if (!isxdigit((unsigned char)name[k]))
                return -1;
        if (name[k] != ':' || dots != 2) return -1;
    }
    snprintf(buf, len, "/%s", name);
    return 0;
}

/* Removes the region a dead owner left (the caller holds the exclusive lock of fd). */
static void remove_dead_region(int fd, const char *path)
{
    char name[GMX_ADDR_AREA + 2];
    if (region_of(fd, path, name, sizeof name) != 0) return;
    if (shm_unlink(name) == 0) gmx_log("removed the shm region %s\n", name);
}

int gmx_lock_take(unsigned node, unsigned port)
{
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    /* A prober (gmx_lock_unheld) holds the lock for a few microseconds: retry briefly before
     * saying busy.  A removal racing with us costs a new file, a bounded number of times. */
    for (int tries = 0; tries < 200; tries++) {
        int fd = gmx_lock_open(path, O_RDWR | O_CREAT);
        if (fd < 0) {
            if (errno == EPERM) fprintf(stderr, "libgm: %s belongs to another user\n", path);
            return -2;
        }
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
        remove_dead_region(fd, path); /* an address here is a dead owner's */
        if (clear_address(fd) != 0 || ftruncate(fd, GMX_LOCKFILE_SIZE) != 0) {
            unlink(path);
            close(fd);
            return -2;
        }
        return fd;
    }
    return -2;
}

void gmx_lock_release(unsigned node, unsigned port, int fd, int region_too)
{
    if (fd < 0) return;
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    /* At exit the provider does not remove its region (its endpoint is never closed): we do,
     * while we still hold the lock, so no new owner's region can have the name yet. */
    if (region_too) remove_dead_region(fd, path);
    /* Unpublish the address first: a reader that opened the file before the unlink reads
     * nothing rather than a dead endpoint's name. */
    if (clear_address(fd) != 0) gmx_log("cannot clear the lock file of port %u\n", port);
    unlink(path);
    close(fd);
}

/* The probe behind gmx_lock_unheld and the sweep, on the lock file at path. */
static int probe_path(const char *path)
{
    int fd = gmx_lock_open(path, O_RDONLY);
    if (fd < 0)
        return errno == ENOENT ? GMX_PORT_NONE
                               : GMX_PORT_HELD; /* another user's: not ours to judge */
    /* Shared first: probers of one port do not make each other see it held.  Only one that
     * gets it alone removes the file. */
    int st = GMX_PORT_HELD;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        st = GMX_PORT_DEAD;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && still_linked(fd, path)) {
            remove_dead_region(fd, path); /* its owner died */
            unlink(path);
        }
    }
    close(fd); /* also drops our probe lock */
    return st;
}

int gmx_lock_unheld(unsigned node, unsigned port)
{
    char path[256];
    gmx_lock_path(node, port, path, sizeof path);
    return probe_path(path);
}

/* 1 if name is <namespace>-<node>-<port>.lock as gmx_lock_path makes them. */
static int lock_name_ok(const char *name)
{
    size_t n = strlen(name), slen = strlen(LOCK_SUFFIX);
    if (n <= slen || strcmp(name + n - slen, LOCK_SUFFIX) != 0) return 0;
    const char *end = name + n - slen;
    for (int field = 0; field < 2; field++) { /* port, then node */
        const char *digits = end;
        while (digits > name && digits[-1] >= '0' && digits[-1] <= '9')
            digits--;
        if (digits == end || end - digits > 5 || digits == name || digits[-1] != '-') return 0;
        end = digits - 1;
    }
    size_t ns = (size_t)(end - name);
    return ns > 0 && ns <= 40 && !memchr(name, ':', ns) && !memchr(name, ' ', ns);
}

unsigned gmx_lock_sweep(void)
{
    const char *dir = gmx_lock_dir();
    DIR *d = opendir(dir);
    if (!d) return 0;
    unsigned removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!lock_name_ok(e->d_name) || (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)) continue;
        char path[512];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
            lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            st.st_size != GMX_LOCKFILE_SIZE)
            continue; /* not one of our lock files: never touched */
        if (probe_path(path) == GMX_PORT_DEAD) removed++;
    }
    closedir(d);
    return removed;
}
