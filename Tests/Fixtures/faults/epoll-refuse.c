/* A fault only the kernel makes at its limits, made on demand: loaded with
 * LD_PRELOAD, epoll_ctl of a socket fails while the file named by
 * CACHED_TEST_EPOLL_REFUSE exists: EPOLL_CTL_ADD with ENOSPC (what
 * fs.epoll.max_user_watches gives), or, when CACHED_TEST_EPOLL_REFUSE_OP
 * is "MOD", EPOLL_CTL_MOD with ENOMEM. Everything else goes to the real
 * call. Built by the test that uses it (EpollFaultTests). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*epoll_ctl_fn)(int, int, int, struct epoll_event *);

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
    static epoll_ctl_fn real;
    if (!real) real = (epoll_ctl_fn)dlsym(RTLD_NEXT, "epoll_ctl");
    const char *flag = getenv("CACHED_TEST_EPOLL_REFUSE");
    const char *which = getenv("CACHED_TEST_EPOLL_REFUSE_OP");
    int refused = which && strcmp(which, "MOD") == 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    struct stat st;
    if (op == refused && flag && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && access(flag, F_OK) == 0) {
        errno = refused == EPOLL_CTL_MOD ? ENOMEM : ENOSPC;
        return -1;
    }
    return real(epfd, op, fd, event);
}
