#define _GNU_SOURCE
#include <malloc.h>
#include "CLinux.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <sched.h>

int clinux_usable_cores(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    return CPU_COUNT(&set);
}

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

#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <linux/fs.h>
#include <sys/mman.h>
int clinux_pages_uptodate(int fd, uint64_t len) {
    if (len == 0) return 1;
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = (size_t)((len + (uint64_t)page - 1) / (uint64_t)page);
    void *map = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return -1;
    unsigned char small[512];
    unsigned char *vec = pages <= sizeof small ? small : malloc(pages);
    int result = -1;
    if (vec != NULL && mincore(map, (size_t)len, vec) == 0) {
        result = 1;
        for (size_t i = 0; i < pages; i++) if (!(vec[i] & 1)) { result = 0; break; }
    }
    int saved = errno;
    if (vec != small) free(vec);
    munmap(map, (size_t)len);
    errno = saved;
    return result;
}

int clinux_file_flags(int fd, uint32_t *flags) {
    int f = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &f) != 0) return -1;
    *flags = (uint32_t)f;
    return 0;
}
uint32_t clinux_nocow_flag(void) { return FS_NOCOW_FL; }

int clinux_fs_type(int fd, int64_t *type) {
    struct statfs st;
    if (fstatfs(fd, &st) != 0) return -1;
    *type = (int64_t)st.f_type;
    return 0;
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

long clinux_send_with_fds(int sock, const void *buf, unsigned long len, const int *fds, int nfds) {
    if (nfds < 1 || nfds > CLINUX_MAX_PASSED_FDS) { errno = EINVAL; return -1; }
    union { char buf[CMSG_SPACE(sizeof(int) * CLINUX_MAX_PASSED_FDS)]; struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = { (void *)buf, len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

long clinux_recv_with_fds(int sock, void *buf, unsigned long len, int *fds, int max_fds, int *nfds, int *truncated) {
    union { char buf[CMSG_SPACE(sizeof(int) * CLINUX_MAX_PASSED_FDS)]; struct cmsghdr align; } control;
    if (max_fds > CLINUX_MAX_PASSED_FDS) max_fds = CLINUX_MAX_PASSED_FDS;
    *nfds = 0;
    *truncated = 0;
    struct iovec iov = { buf, len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (max_fds > 0 ? max_fds : 1));
    long n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) return n;
    if (msg.msg_flags & MSG_CTRUNC) *truncated = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*nfds < max_fds) fds[(*nfds)++] = fd;
            else { close(fd); *truncated = 1; }
        }
    }
    return n;
}

long clinux_copy_file_range(int in, long long *in_off, int out, unsigned long len) {
    loff_t off = (loff_t)*in_off;
    ssize_t n = copy_file_range(in, &off, out, NULL, len, 0);
    if (n >= 0) *in_off = (long long)off;
    return n;
}

int clinux_release_free_memory(void) {
    return malloc_trim(0);
}

int clinux_tcp_listen(const char *host, int port, int ipv6, int backlog) {
    struct sockaddr_storage addr;
    socklen_t len;
    memset(&addr, 0, sizeof addr);
    if (ipv6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&addr;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) { errno = EINVAL; return -1; }
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&addr;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) { errno = EINVAL; return -1; }
        len = sizeof *a;
    }
    int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ipv6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int clinux_socket_family(int fd) {
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0) return -1;
    return addr.ss_family;
}

int clinux_tcp_nodelay(int fd) {
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int clinux_socket_is_loopback(int fd) {
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0) return -1;
    if (addr.ss_family == AF_UNIX) return 1;
    if (addr.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&addr)->sin_addr.s_addr) >> 24) == 127;
    if (addr.ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&addr)->sin6_addr);
    return 0;
}
