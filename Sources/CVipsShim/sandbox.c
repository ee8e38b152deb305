/* Step 4 of the helper's start: no_new_privs and a seccomp-BPF allow-list,
   written by hand (no libseccomp: the program is a few dozen instructions). */
#define _GNU_SOURCE
#include "CVipsShim.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#else
#error "cached-variant has no seccomp filter for this architecture"
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the filter reads arguments' low words at their little-endian offsets"
#endif

/** The low 32 bits of argument `n` (what the kernel reads of an int or pid_t). */
#define ARG_LOW(n) ((uint32_t)offsetof(struct seccomp_data, args[n]))

enum { MAX_INSTRUCTIONS = 256 };

/** The program as it is built. */
typedef struct {
    struct sock_filter code[MAX_INSTRUCTIONS];
    unsigned short length;
    int overflow;
} program;

static void emit(program *p, struct sock_filter instruction) {
    if (p->length < MAX_INSTRUCTIONS) p->code[p->length++] = instruction;
    else p->overflow = 1;
}

static void statement(program *p, uint16_t code, uint32_t k) {
    emit(p, (struct sock_filter)BPF_STMT(code, k));
}

static void jump(program *p, uint16_t code, uint32_t k, uint8_t if_true, uint8_t if_false) {
    emit(p, (struct sock_filter)BPF_JUMP(code, k, if_true, if_false));
}

/** `nr` is answered `action`, whatever its arguments. The accumulator holds
    the syscall number before and after. */
static void answer(program *p, long nr, uint32_t action) {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1);
    statement(p, BPF_RET | BPF_K, action);
}

static void allow(program *p, long nr) { answer(p, nr, SECCOMP_RET_ALLOW); }

/** `nr` is allowed when the low word of argument `arg` passes `test`
    (BPF_JEQ: equals `value`; BPF_JSET: has a bit of `value`), refused with
    EPERM otherwise. Self-contained: both ways return. */
static void allow_if(program *p, long nr, int arg, uint16_t test, uint32_t value) {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4);
    statement(p, BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg));
    jump(p, BPF_JMP | test | BPF_K, value, 0, 1);
    statement(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    statement(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
}

/** The architecture check: a syscall of another ABI (32-bit x86 through
    int 0x80, x32) never reaches the table below, whose numbers are this
    ABI's. Leaves the syscall number in the accumulator. */
static void check_architecture(program *p) {
    statement(p, BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, arch));
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, FILTER_ARCH, 1, 0);
    statement(p, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    statement(p, BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
    jump(p, BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1);
    statement(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
#endif
}

/** The allow-list, found by running the warmed-up helper on every
    fixture, a corpus of real-sized images in every format and variety
    (progressive, CMYK, 16-bit, grey, palette, interlaced, animated,
    multi-page, ICC profile, SVG with text and embedded images), truncated
    copies of each and garbage, to every output format, under `strace -f`:
    these are all the calls made after the ready message, plus a few of the
    same kind on paths that run rarely (marked). None opens, creates or
    names a file, a socket or a process. */
static void rules(program *p, pid_t self) {
    /* The pipes, and the most frequent calls first (the program is a
       linear scan): every thread's locks and waits. */
    allow(p, SYS_futex);
    allow(p, SYS_read);
    allow(p, SYS_write);
    /* Memory: glibc malloc (brk, mmap'd chunks and thread arenas,
       mprotect as an arena grows, madvise as it trims), libvips's and the
       codecs' buffers. mremap (rare): realloc of an mmap'd chunk. orc, the
       JIT of libvips's vector paths, takes its code memory during the
       warm-up (a file in /tmp mapped twice); it would map anonymous memory
       with PROT_EXEC if it needed more, so mmap and mprotect take any
       protection. */
    allow(p, SYS_mmap);
    allow(p, SYS_munmap);
    allow(p, SYS_mprotect);
    allow(p, SYS_madvise);
    allow(p, SYS_brk);
    allow(p, SYS_mremap);
    /* Threads, started and ended per job by libvips's pool (glib), libaom,
       libjxl, openjpeg and libgomp (ImageMagick): glibc's pthread_create
       tries clone3 first and falls back to clone when it is not
       implemented, so clone3 answers ENOSYS and clone is allowed only with
       CLONE_THREAD (a thread of this process, never a new process).
       pthread_create blocks signals around the clone (rt_sigprocmask); a
       new thread registers its robust futex list and rseq area; glib and
       libaom name their threads (prctl PR_SET_NAME on the calling thread,
       nothing else of prctl); libvips sizes its pool from
       sched_getaffinity. */
    allow_if(p, SYS_clone, 0, BPF_JSET, CLONE_THREAD);
    answer(p, SYS_clone3, SECCOMP_RET_ERRNO | ENOSYS);
    allow(p, SYS_rt_sigprocmask);
    allow(p, SYS_set_robust_list);
    allow(p, SYS_rseq);
    allow_if(p, SYS_prctl, 0, BPF_JEQ, PR_SET_NAME);
    allow(p, SYS_sched_getaffinity);
    allow(p, SYS_exit);
    allow(p, SYS_exit_group);
    /* ImageMagick's timer (its progress monitor reads the process's CPU times). */
    allow(p, SYS_times);
    /* Rare: Swift's hashing seed and some codecs' (getrandom), waits and
       spins (nanosleep, clock_nanosleep, sched_yield), the vDSO's
       fallback (clock_gettime), abort() and raise() on this process alone
       (getpid, gettid, tgkill and kill with this pid; rt_sigreturn after a
       handler). */
    allow(p, SYS_getrandom);
    allow(p, SYS_nanosleep);
    allow(p, SYS_clock_nanosleep);
    allow(p, SYS_sched_yield);
    allow(p, SYS_clock_gettime);
    allow(p, SYS_getpid);
    allow(p, SYS_gettid);
    allow_if(p, SYS_tgkill, 0, BPF_JEQ, (uint32_t)self);
    allow_if(p, SYS_kill, 0, BPF_JEQ, (uint32_t)self);
    allow(p, SYS_rt_sigreturn);
}

/** Puts the fatal signals back to their default action: the process ends
    at once. Swift's runtime installs a crash handler that starts a
    backtracer and then has the signal's default action take over; in the
    sandbox neither the backtracer's process nor rt_sigaction is allowed,
    and the handler ran again and again, writing "Backtracing ... failed"
    to stderr each time (seen: 4 GB in a few minutes when a source's
    allocation failed under RLIMIT_AS). Libraries' handlers go too
    (SIGXCPU's included: RLIMIT_CPU's soft limit must end the helper). */
static int reset_fatal_signals(void) {
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ};
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        if (sigaction(fatal[i], &action, NULL) != 0) return -1;
    return 0;
}

int cvs_enter_sandbox(void) {
    static program p;
    p.length = 0;
    p.overflow = 0;
    check_architecture(&p);
    rules(&p, getpid());
    statement(&p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    if (p.overflow) {
        errno = E2BIG;
        return -1;
    }
    if (reset_fatal_signals() != 0) return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    struct sock_fprog fprog = {.len = p.length, .filter = p.code};
    /* TSYNC: every thread the warm-up started gets the filter (and
       no_new_privs) too, not just this one. It answers a thread's id when
       one could not be synchronised. */
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog);
    if (r > 0) errno = EBUSY;
    return r == 0 ? 0 : -1;
}
