#define _GNU_SOURCE
#include "CLinux.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>
#include <sys/resource.h>

int clinux_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int clinux_spawn(const char *path, char *const argv[], char *const envp[], int in, int out, int err, int *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) { posix_spawn_file_actions_destroy(&actions); return rc; }
    // dup2 clears close-on-exec on the copy; the originals close at exec.
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, in, 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, out, 1);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, err, 2);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &all);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t child = 0;
    if (rc == 0) rc = posix_spawn(&child, path, &actions, &attr, argv, envp);
    if (rc == 0) *pid = child;
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

int clinux_set_limit(int pid, int resource, uint64_t soft, uint64_t hard) {
    struct rlimit limit = { .rlim_cur = soft, .rlim_max = hard };
    return prlimit(pid, (enum __rlimit_resource)resource, &limit, NULL);
}

static _Thread_local int nonblocking_thread = 0;

void clinux_mark_thread_nonblocking(int on) { nonblocking_thread = on; }
int clinux_thread_must_not_block(void) { return nonblocking_thread; }
