/* Step 1 of the helper's start: what the process does to itself before it
   touches any library. */
#define _GNU_SOURCE
#include "CVipsShim.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/** Closes every descriptor above 2: close_range, or one by one up to the
    descriptor limit on a kernel older than 5.9. */
static int close_above_stderr(void) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return 0;
    if (errno != ENOSYS) return -1;
#endif
    struct rlimit limit;
    long top = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY ? (long)limit.rlim_cur : 65536;
    for (long fd = 3; fd < top; fd++) (void)close((int)fd);
    return 0;
}

/** Every signal to its default action and none blocked: a spawned process
    inherits its parent's blocked signals and ignored ones (the daemon
    blocks SIGTERM, SIGINT and SIGHUP for its signalfd and ignores SIGPIPE;
    a test runner blocked SIGXCPU, which then did not end a helper over
    its CPU limit). */
static int default_signals(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        /* Numbers glibc keeps for itself (its threads' signals) answer EINVAL. */
        if (sigaction(s, &action, NULL) != 0 && errno != EINVAL) return -1;
    }
    sigset_t none;
    sigemptyset(&none);
    return sigprocmask(SIG_SETMASK, &none, NULL);
}

int cvs_harden(pid_t expected_parent) {
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return -1;
    /* The parent died before the death signal was armed: we were
       reparented (to init, or to a subreaper) and nobody reads our answers.
       The daemon says who it is: it may itself be pid 1 (in a container). */
    if ((expected_parent > 0 && parent != expected_parent) || getppid() != parent) {
        errno = ESRCH;
        return -1;
    }
    if (close_above_stderr() != 0) return -1;
    if (default_signals() != 0) return -1;
    if (chdir("/") != 0) return -1;
    umask(077);
    /* No core file: a decoder's memory holds other jobs' images. */
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return 0;
}
