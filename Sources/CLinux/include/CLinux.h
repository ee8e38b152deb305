#ifndef CLINUX_H
#define CLINUX_H
/* What Swift's Glibc module does not export: epoll, eventfd, accept4 and
   the ucred layout. No _GNU_SOURCE here (it breaks SwiftGlibc's fd_set). */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <stdint.h>

int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/** Same layout as struct ucred (SO_PEERCRED). */
struct clinux_ucred { int32_t pid; uint32_t uid; uint32_t gid; };

/** Reads the peer's credentials of a connected Unix socket; 0 or -1 with errno. */
int clinux_peercred(int fd, struct clinux_ucred *out);

/** epoll_event is packed on x86_64; these keep Swift away from its layout. */
int clinux_epoll_add(int epfd, int fd, uint32_t events, uint64_t data);
int clinux_epoll_mod(int epfd, int fd, uint32_t events, uint64_t data);
int clinux_epoll_del(int epfd, int fd);
/** Waits for events into parallel arrays; returns the count or -1 with errno. */
int clinux_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms);

/** openat2(dirfd, path, flags, mode) resolving beneath dirfd with no symbolic
    link followed anywhere in the path (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
    RESOLVE_NO_MAGICLINKS). -1 with errno; ENOSYS where the kernel lacks it. */
int clinux_openat2_beneath(int dirfd, const char *path, int flags, unsigned int mode);
/** O_PATH, which Swift's Glibc module does not export (it needs _GNU_SOURCE). */
int clinux_o_path(void);

/** flock(fd, LOCK_EX | LOCK_NB): Swift sees only the struct named flock. */
int clinux_flock_exclusive_nb(int fd);

/** Blocks SIGTERM, SIGINT and SIGHUP in this thread (and threads started after)
    and returns a non-blocking signalfd that reports them; -1 with errno. */
int clinux_signalfd_termination(void);
/** Reads one signal number from a signalfd; 0 when none is pending. */
int clinux_signalfd_read(int fd);
/** Ignores SIGPIPE process-wide. */
void clinux_ignore_sigpipe(void);

/** Names the calling thread (pthread_setname_np needs _GNU_SOURCE). */
void clinux_set_thread_name(const char *name);

/** preadv2(fd, buf, len, off, RWF_NOWAIT): reads only what is already in the
    page cache; -1 with errno EAGAIN when the read would block on the disk. */
long clinux_pread_nowait(int fd, void *buf, unsigned long len, long off);

/** The lock-order check (debug builds): pushes `rank` on this thread's stack
    of held lock ranks and returns the rank on top before it (0: none held). */
int clinux_lock_rank_push(int rank);
/** Pops the most recent `rank` from this thread's stack. */
void clinux_lock_rank_pop(int rank);

/** Fixes glibc malloc's trim and mmap thresholds (mallopt), which it
    otherwise moves as large blocks come and go; returns 0 on success. */
int clinux_tune_malloc(int trim_threshold, int mmap_threshold);

#endif
