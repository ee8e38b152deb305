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

/** Whether every page of the first `len` bytes of `fd` is in the page cache
    and up to date (mincore(2) of a mapping that is never touched: a page
    whose read from the disk failed is in the cache but not up to date, and
    does not count): 1 when all are, 0 when some are not, -1 with errno. */
int clinux_pages_uptodate(int fd, uint64_t len);

/** The file's inode flags (FS_IOC_GETFLAGS): 0 with *flags set, or -1 with
    errno (ENOTTY where the file system has none). */
int clinux_file_flags(int fd, uint32_t *flags);
/** FS_NOCOW_FL: on btrfs, a file without data checksums. */
uint32_t clinux_nocow_flag(void);

/** fstatfs(fd).f_type: which file system holds `fd`; 0 with *type set, or -1 with errno. */
int clinux_fs_type(int fd, int64_t *type);

/** The lock-order check (debug builds): pushes `rank` on this thread's stack
    of held lock ranks and returns the rank on top before it (0: none held). */
int clinux_lock_rank_push(int rank);
/** Pops the most recent `rank` from this thread's stack. */
void clinux_lock_rank_pop(int rank);

/** Fixes glibc malloc's trim and mmap thresholds (mallopt), which it
    otherwise moves as large blocks come and go; returns 0 on success. */
int clinux_tune_malloc(int trim_threshold, int mmap_threshold);
/* The CPUs this process may run on (its affinity mask, as nproc counts
   them); 0 when the kernel does not say. */
int clinux_usable_cores(void);

/* Starts loading the cache line at p (for a write), so that a later access
   to it does not wait: a hash table's bucket, while other work runs. */
static inline void clinux_prefetch(const void *p) { __builtin_prefetch(p, 1, 3); }

/* malloc_trim(0): free heap pages go back to the kernel. */
int clinux_release_free_memory(void);

/** The most descriptors one clinux_send_with_fds passes and one
    clinux_recv_with_fds takes: a batch `open`'s (docs/protocol.md, "Limits";
    the kernel's own bound per message, SCM_MAX_FD, is 253). */
#define CLINUX_MAX_PASSED_FDS 64

/** sendmsg(sock, buf, len, MSG_NOSIGNAL) with the `nfds` descriptors of
    `fds` (1 to CLINUX_MAX_PASSED_FDS) attached as SCM_RIGHTS ancillary data
    (CMSG_* are macros Swift cannot call). They travel together with the
    first byte sent; -1 with errno (EINVAL for a count out of range). */
long clinux_send_with_fds(int sock, const void *buf, unsigned long len, const int *fds, int nfds);

/** recvmsg(sock, buf, len) with MSG_CMSG_CLOEXEC, taking up to `max_fds`
    (at most CLINUX_MAX_PASSED_FDS) descriptors passed as SCM_RIGHTS into
    `fds` and their count into `*nfds`.
    `*truncated` is set when the kernel dropped ancillary data that did not
    fit (MSG_CTRUNC; it closes what it dropped). Returns the bytes received,
    0 at end of stream, -1 with errno. */
long clinux_recv_with_fds(int sock, void *buf, unsigned long len, int *fds, int max_fds, int *nfds, int *truncated);

/** copy_file_range(in, &in_off, out, NULL, len, 0): the kernel copies
    between the files (reflinks where it can), writing at `out`'s offset;
    -1 with errno (EXDEV, ENOSYS, EINVAL where it cannot). */
long clinux_copy_file_range(int in, long long *in_off, int out, unsigned long len);

/** A non-blocking, close-on-exec TCP socket listening on the literal
    address `host` (IPv4, or IPv6 when `ipv6`) and `port`, with SO_REUSEADDR
    (and IPV6_V6ONLY for IPv6); -1 with errno, EINVAL for an address that
    is not a literal. */
int clinux_tcp_listen(const char *host, int port, int ipv6, int backlog);

/** The socket's family: AF_UNIX, AF_INET, AF_INET6; -1 with errno. */
int clinux_socket_family(int fd);

/** 1 when the socket is bound to a loopback address (127.0.0.0/8, ::1,
    or a Unix socket), 0 when not, -1 with errno. */
int clinux_socket_is_loopback(int fd);

/** TCP_NODELAY on: an answer's last segment is not held back waiting for an ACK. */
int clinux_tcp_nodelay(int fd);

/** A pipe whose two ends are close-on-exec: fds[0] reads, fds[1] writes;
    0 or -1 with errno. */
int clinux_pipe_cloexec(int fds[2]);

/** Starts `path` with `argv` and `envp` (NULL-terminated) as a child whose
    standard input, output and error are `in`, `out` and `err` (every other
    descriptor is close-on-exec in this process), with an empty signal mask
    and every signal at its default action (this process blocks and ignores
    some). posix_spawn: safe in a process with threads. 0 with *pid set, or
    an errno value. */
int clinux_spawn(const char *path, char *const argv[], char *const envp[], int in, int out, int err, int *pid);

/** Marks the calling thread as one that must never block (the event
    loop), or not; `clinux_thread_must_not_block` reads the mark. */
void clinux_mark_thread_nonblocking(int on);
int clinux_thread_must_not_block(void);

/** prlimit(pid, resource, {soft, hard}, NULL): sets another process's limit
    (RLIMIT_AS 9, RLIMIT_CPU 0); 0 or -1 with errno. */
int clinux_set_limit(int pid, int resource, uint64_t soft, uint64_t hard);

#endif
