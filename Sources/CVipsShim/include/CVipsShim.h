#ifndef CVIPSSHIM_H
#define CVIPSSHIM_H
/* The C side of the variant helper (`cached-variant`): the process's
   hardening and seccomp sandbox, libvips's start and warm-up, and the
   making of one variant. Swift sees plain C types only: no glib or vips
   header is included here, so the helper's Swift code never parses them.

   The order is fixed (docs/architecture.md, "A variant", step 4):
   cvs_harden, cvs_vips_start, cvs_warm_up, cvs_enter_sandbox, then jobs. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- hardening.c ---- */

/** Step 1, before anything else: dies with its parent (PR_SET_PDEATHSIG
    SIGKILL; ESRCH when the parent is already gone, or is not
    `expected_parent` when that is above 0), closes every descriptor above
    2, every signal to its default action and unblocked, moves to `/`,
    umask 077, no core file. 0, or -1 with errno. */
int cvs_harden(pid_t expected_parent);

/* ---- sandbox.c ---- */

/** Step 4: the fatal signals back to their default action (a crash ends
    the process at once), PR_SET_NO_NEW_PRIVS, then the seccomp allow-list
    on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC: libvips's,
    glib's and the codecs' threads started by the warm-up are filtered too).
    0, or -1 with errno: the caller exits, no job is taken. */
int cvs_enter_sandbox(void);

/* ---- probe.c ---- */

/** `--probe-sandbox DIR`, after cvs_enter_sandbox: tries what the sandbox
    must forbid and prints one line per attempt on standard output,
    `NAME: denied (ERRNO)` or `NAME: ALLOWED`. `parent` is the parent's pid,
    read before the sandbox (getppid is not on the allow-list). The last
    attempt is execve("/bin/true"): if it were allowed the process would
    become /bin/true and its line would be missing. */
void cvs_probe_sandbox(const char *dir, pid_t parent);

/* ---- vips_start.c ---- */

/** Step 2: starts libvips for buffers alone: no temp files, no operation
    cache, every loader blocked except the buffer loaders of the formats the
    store accepts. 0, or -1 with a message in `message` (NUL-terminated,
    at most `capacity` bytes). */
int cvs_vips_start(const char *argv0, char *message, size_t capacity);

/* ---- warmup.c ---- */

/** Step 3: runs every decoder and encoder a job may use once, on tiny
    images made here, so that libraries that open files or load plugins
    lazily do it now, before the sandbox forbids it; then blocks every saver
    but the four a variant is written with. 0, or -1 with a message. */
int cvs_warm_up(char *message, size_t capacity);

/* ---- vips_variant.c ---- */

/** A job, as its header says (VariantWire.Job). */
typedef struct {
    /** VariantFormat's raw value: 1 jpeg, 2 png, 4 webp, 6 avif. */
    uint8_t format;
    /** VariantFit's raw value: 1 contain, 2 cover. */
    uint8_t fit;
    /** The box; 0: that side is free (bounded by `max_dimension`). */
    uint32_t width, height;
    uint32_t max_dimension;
    /** Refuse an image whose first frame has more pixels, by its header. */
    uint64_t max_pixels;
    /** Refuse a result longer than this. */
    uint64_t max_result;
} cvs_job;

/** Result statuses: VariantWire.ResultHeader.Status. */
enum { CVS_MADE = 0, CVS_REFUSED = 1, CVS_FAILED = 2 };

/** What a job gives: the variant's bytes (status CVS_MADE, with its width
    and height) or a UTF-8 message saying why not. */
typedef struct {
    uint8_t status;
    uint32_t width, height;
    /** Owned: release with cvs_result_free. */
    unsigned char *bytes;
    size_t length;
} cvs_result;

/** The longest message a result carries (VariantWire.maxMessage). */
#define CVS_MAX_MESSAGE 4096

/** Makes the variant of `source` (`length` bytes) that `job` asks for.
    `source` may be changed in place (a cursor is passed to ImageMagick as
    an icon: see cursor.c). Always fills `result`. */
void cvs_make_variant(unsigned char *source, size_t length, const cvs_job *job, cvs_result *result);

/** Frees a result's bytes. */
void cvs_result_free(cvs_result *result);

#endif
