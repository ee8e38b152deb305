#define _GNU_SOURCE
#include <malloc.h>
#include "CLinux.h"
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>

int clinux_peercred(int fd, struct clinux_ucred *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

static int ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

int clinux_epoll_add(int epfd, int fd, uint32_t events, uint64_t data) { return ctl(epfd, EPOLL_CTL_ADD, fd, events, data); }
int clinux_epoll_mod(int epfd, int fd, uint32_t events, uint64_t data) { return ctl(epfd, EPOLL_CTL_MOD, fd, events, data); }
int clinux_epoll_del(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int clinux_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) { events[i] = evs[i].events; data[i] = evs[i].data.u64; }
    return n;
}

int clinux_flock_exclusive_nb(int fd) { return flock(fd, LOCK_EX | LOCK_NB); }

int clinux_o_path(void) { return O_PATH; }

int clinux_openat2_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (unsigned long long)(unsigned int)flags;
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

#include <signal.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

int clinux_signalfd_termination(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int clinux_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof(info));
    if (n != sizeof(info)) return 0;
    return (int)info.ssi_signo;
}

void clinux_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

#include <sys/prctl.h>
void clinux_set_thread_name(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

#include <sys/syscall.h>
#include <sys/uio.h>
#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif
long clinux_pread_nowait(int fd, void *buf, unsigned long len, long off) {
    struct iovec iov = { buf, len };
    return syscall(SYS_preadv2, fd, &iov, 1, off, 0L, RWF_NOWAIT);
}

/* Ranks of the locks this thread holds, innermost last. 32 is far deeper
   than any nesting the daemon has (three); deeper pushes are not tracked. */
static __thread int lock_ranks[32];
static __thread int lock_depth;

int clinux_lock_rank_push(int rank) {
    int top = lock_depth > 0 ? lock_ranks[(lock_depth < 32 ? lock_depth : 32) - 1] : 0;
    if (lock_depth < 32) lock_ranks[lock_depth] = rank;
    lock_depth++;
    return top;
}

void clinux_lock_rank_pop(int rank) {
    (void)rank;
    if (lock_depth > 0) lock_depth--;
}

int clinux_tune_malloc(int trim_threshold, int mmap_threshold) {
    return mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1 && mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 ? 0 : -1;
}
