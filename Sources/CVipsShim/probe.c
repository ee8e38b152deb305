/* `cached-variant --probe-sandbox DIR`: what the sandbox must forbid,
   tried after it is in place, one line each. */
#define _GNU_SOURCE
#include "CVipsShim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/** Prints `NAME: denied (ERRNO)` for a failed attempt (`result` < 0, the
    errno it left), or `NAME: ALLOWED` (closing what it opened). */
static void report(const char *name, long result, int error, int opened) {
    if (result < 0) {
        const char *errname = strerrorname_np(error);
        if (errname) printf("%s: denied (%s)\n", name, errname);
        else printf("%s: denied (errno %d)\n", name, error);
    } else {
        printf("%s: ALLOWED\n", name);
        if (opened) close((int)result);
    }
    fflush(stdout);
}

void cvs_probe_sandbox(const char *dir, pid_t parent) {
    char path[4096];
    snprintf(path, sizeof path, "%s/probe", dir);
    long r;
    r = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    report("open-write", r, errno, 1);
    r = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
    report("open-read", r, errno, 1);
    r = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    report("socket-inet", r, errno, 1);
    r = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    report("socket-unix", r, errno, 1);
    r = kill(parent, 0);
    report("kill-parent", r, errno, 0);
    /* Last: if it were allowed, the process would become /bin/true and
       exit 0 without this line, which a test notices. */
    char *const argv[] = {"true", NULL};
    char *const envp[] = {NULL};
    r = execve("/bin/true", argv, envp);
    report("execve", r, errno, 0);
}
