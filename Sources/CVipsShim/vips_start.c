/* Step 2 of the helper's start: libvips for in-memory buffers alone, with
   the smallest set of decoders the store's formats need. */
#include "CVipsShim.h"
#include "internal.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <vips/vips.h>

/** The libraries' warnings and messages (libvips's "ignoring nclx profile",
    Pango's "failed to create cairo scaled font" for each run of an SVG's
    text) are not errors, and a hostile image could fill the daemon's log
    with them: dropped. Errors reach the daemon in the job's answer;
    criticals still go to stderr. A writer, not a handler: Pango logs
    through GLib's structured logging, which handlers do not see. */
static GLogWriterOutput quiet_writer(GLogLevelFlags level, const GLogField *fields, gsize count, gpointer data) {
    if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) return g_log_writer_default(level, fields, count, data);
    return G_LOG_WRITER_HANDLED;
}

int cvs_vips_start(const char *argv0, char *message, size_t capacity) {
    /* libvips decodes an image it cannot stream into memory below this size
       and into a temp file above it. The sandbox forbids opening files, so
       everything goes to memory, within the helper's RLIMIT_AS; bombs are
       refused by max-image-pixels before any of this. */
    setenv("VIPS_DISC_THRESHOLD", "1000g", 1);
    /* glibc gives each thread that finds the arenas busy a new one, up to 8
       per core, each reserving 64 MiB of address space: about 690 MiB of
       RLIMIT_AS after the warm-up on 2 cores, 310 MiB with two arenas, for
       the same time per job (measured on 2 MP and 50 MP images). */
    mallopt(M_ARENA_MAX, 2);
    g_log_set_writer_func(quiet_writer, NULL, NULL);
    if (VIPS_INIT(argv0) != 0) {
        snprintf(message, capacity, "vips_init failed: %s", vips_error_buffer());
        vips_error_clear();
        return -1;
    }
    /* No operation is cached between jobs: each job's images are freed when
       it ends, and one job's pixels never meet another's. */
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_leak_set(FALSE);
    cvs__restrict_loaders();
    return 0;
}
