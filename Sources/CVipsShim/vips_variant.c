/* One variant: the header checked against max-image-pixels, the thumbnail
   decoded and shrunk, converted to 8-bit sRGB, then encoded. Each stage's
   failure gets its status: a header or a decode the image's fault
   (refused: the same bytes will be refused again), an encoder or memory
   the helper's (failed). */
#include "CVipsShim.h"
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

enum { FORMAT_JPEG = 1, FORMAT_PNG = 2, FORMAT_WEBP = 4, FORMAT_AVIF = 6 };
enum { FIT_COVER = 2 };

/** libaom's effort for an AVIF variant of `pixels` pixels (0 fastest .. 9;
    libvips's and vipsthumbnail's default is 4). Measured on 2 cores with a
    photo: at 96 px wide, 4 takes 6.9 ms and 0 takes 2.1 ms for a file 18%
    larger; at 400 px, 35 ms against 3.7 ms, 38% larger; at 1920 px, 2.5 s
    against 0.1 s (9 took 33 s). So the default up to 400 x 400 pixels
    (thumbnails, made once, served often), the fastest above, where 4 would
    take seconds of a helper for each variant. */
static int avif_effort(uint64_t pixels) {
    return pixels <= 400 * 400 ? 4 : 0;
}

/** Sets `r` to a message: newlines become "; ", and the text is cut to
    CVS_MAX_MESSAGE bytes on a UTF-8 character boundary. */
static void set_message(cvs_result *r, uint8_t status, const char *text) {
    GString *s = g_string_new(NULL);
    for (const char *p = text; *p; p++) {
        if (*p != '\n') g_string_append_c(s, *p);
        else if (p[1] != '\0') g_string_append(s, "; ");
    }
    size_t n = s->len;
    if (n > CVS_MAX_MESSAGE) {
        n = CVS_MAX_MESSAGE;
        while (n > 0 && ((unsigned char)s->str[n] & 0xC0) == 0x80) n--;
    }
    r->status = status;
    r->width = r->height = 0;
    r->length = n;
    r->bytes = (unsigned char *)g_strndup(s->str, n);
    g_string_free(s, TRUE);
}

/** Whether libvips's error says memory ran out (RLIMIT_AS): the helper's
    limit, not the image's fault. */
static int is_out_of_memory(const char *text) {
    static const char *const signs[] = {"out of memory", "Memory allocation failed", "MemoryAllocationFailed",
                                        "Cannot allocate memory", "memory exhausted", "std::bad_alloc"};
    for (size_t i = 0; i < sizeof signs / sizeof signs[0]; i++)
        if (strstr(text, signs[i])) return 1;
    return 0;
}

/** Sets `r` to `what` and libvips's error buffer, which it then clears.
    A refusal whose cause is memory is a failure. */
static void fail_from_vips(cvs_result *r, uint8_t status, const char *what) {
    const char *error = vips_error_buffer();
    char *text = *error ? g_strdup_printf("%s: %s", what, error) : g_strdup(what);
    if (status == CVS_REFUSED && is_out_of_memory(text)) status = CVS_FAILED;
    set_message(r, status, text);
    g_free(text);
    vips_error_clear();
}

/** Megapixels for a message: whole when they are, else one decimal. */
static void megapixels(uint64_t pixels, char *out, size_t capacity) {
    if (pixels % 1000000 == 0) snprintf(out, capacity, "%" PRIu64, pixels / 1000000);
    else snprintf(out, capacity, "%.1f", (double)pixels / 1e6);
}

/** Reads the header alone (no pixel is decoded) and refuses an image whose
    first frame has more than max_pixels pixels. `has_profile`: whether an
    ICC profile is embedded. 0, or -1 with `r` set. */
static int check_header(const unsigned char *src, size_t len, const cvs_job *job, cvs_result *r, int *has_profile) {
    VipsImage *head = vips_image_new_from_buffer(src, len, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (!head) {
        fail_from_vips(r, CVS_REFUSED, "not an image this helper decodes");
        return -1;
    }
    uint64_t width = (uint64_t)vips_image_get_width(head);
    /* A multi-page or animated image: its first page, the one a variant is made of. */
    uint64_t height = (uint64_t)vips_image_get_page_height(head);
    *has_profile = vips_image_get_typeof(head, VIPS_META_ICC_NAME) != 0;
    g_object_unref(head);
    uint64_t pixels = width * height;
    if (pixels > job->max_pixels) {
        char have[32], limit[32];
        megapixels(pixels, have, sizeof have);
        megapixels(job->max_pixels, limit, sizeof limit);
        char *text = g_strdup_printf("image is %" PRIu64 " x %" PRIu64 " pixels (%s megapixels), over max-image-pixels %" PRIu64
                                     " (%s megapixels)", width, height, have, job->max_pixels, limit);
        set_message(r, CVS_REFUSED, text);
        g_free(text);
        return -1;
    }
    return 0;
}

/** The thumbnail, still lazy: shrink-on-load where the format has it
    (JPEG, WebP, SVG, HEIF, pyramids), EXIF orientation applied (no_rotate
    false), only the first frame or page of an animated or multi-page image
    (the loaders' default n=1: a variant is a still image), an embedded ICC
    profile converted to sRGB, cropped around the centre for `cover`. A
    missing side is bounded by max_dimension. The loader fails on any error
    (fail_on=error), so a truncated or corrupt file is refused rather than
    given as a half-grey image. */
static VipsImage *thumbnail(const unsigned char *src, size_t len, const cvs_job *job, int has_profile, cvs_result *r) {
    uint32_t width = job->width ? job->width : job->max_dimension;
    uint32_t height = job->height ? job->height : job->max_dimension;
    if (width < 1 || height < 1 || width > VIPS_MAX_COORD || height > VIPS_MAX_COORD) {
        char *text = g_strdup_printf("the job asks for a %" PRIu32 " x %" PRIu32 " box", width, height);
        set_message(r, CVS_FAILED, text);
        g_free(text);
        return NULL;
    }
    VipsInteresting crop = job->fit == FIT_COVER && job->width && job->height ? VIPS_INTERESTING_CENTRE : VIPS_INTERESTING_NONE;
    /* Without an embedded profile no ICC transform is needed: the image is
       taken as sRGB (or grey, or CMYK through libvips's own profile) by
       vips_colourspace, as vipsthumbnail does. fail_on goes to the loader
       through option_string: libvips 8.14.1 does not pass thumbnail's own
       fail_on argument on to a buffer's loader (a truncated JPEG was made
       into a half-grey thumbnail with it). */
    VipsImage *out = NULL;
    /* With neither side asked, the image keeps its own size, bounded by
       max_dimension: a conversion (format=png, fit=cover alone) never
       upscales. A side asked for is made, larger or smaller. */
    VipsSize size = job->width || job->height ? VIPS_SIZE_BOTH : VIPS_SIZE_DOWN;
    if (vips_thumbnail_buffer((void *)src, len, &out, (int)width, "height", (int)height, "size", size,
                              "crop", crop, "no_rotate", FALSE, "option_string", "fail_on=error",
                              "export_profile", has_profile ? "srgb" : NULL, NULL)) {
        fail_from_vips(r, CVS_REFUSED, "decoding failed");
        return NULL;
    }
    return out;
}

/** `in` as 8-bit sRGB (from grey, 16-bit, CMYK, ...), its alpha flattened
    on white when `flatten`. Takes `in`'s reference; NULL on error. */
static VipsImage *to_srgb(VipsImage *in, int flatten) {
    VipsImage *t = NULL;
    if (in->Type != VIPS_INTERPRETATION_sRGB) {
        if (!vips_colourspace_issupported(in)) {
            /* An interpretation libvips cannot convert from (MULTIBAND, ...):
               take the bands for what their count and format suggest. */
            if (vips_copy(in, &t, "interpretation", vips_image_guess_interpretation(in), NULL)) goto fail;
            g_object_unref(in);
            in = t;
        }
        if (in->Type != VIPS_INTERPRETATION_sRGB) {
            if (vips_colourspace(in, &t, VIPS_INTERPRETATION_sRGB, NULL)) goto fail;
            g_object_unref(in);
            in = t;
        }
    }
    if (flatten && vips_image_hasalpha(in)) {
        double white[3] = {255, 255, 255};
        VipsArrayDouble *background = vips_array_double_new(white, 3);
        int failed = vips_flatten(in, &t, "background", background, NULL);
        vips_area_unref(VIPS_AREA(background));
        if (failed) goto fail;
        g_object_unref(in);
        in = t;
    }
    if (in->BandFmt != VIPS_FORMAT_UCHAR) {
        if (vips_cast_uchar(in, &t, NULL)) goto fail;
        g_object_unref(in);
        in = t;
    }
    return in;
fail:
    g_object_unref(in);
    return NULL;
}

/** Decodes and shrinks: the whole pipeline runs here, into memory, so
    that a decoder's error is told from an encoder's. */
static VipsImage *decode(const unsigned char *src, size_t len, const cvs_job *job, int has_profile, cvs_result *r) {
    VipsImage *thumb = thumbnail(src, len, job, has_profile, r);
    if (!thumb) return NULL;
    VipsImage *ready = to_srgb(thumb, job->format == FORMAT_JPEG);
    VipsImage *decoded = ready ? vips_image_copy_memory(ready) : NULL;
    if (ready) g_object_unref(ready);
    if (!decoded) fail_from_vips(r, CVS_REFUSED, "decoding failed");
    else cvs__remove_metadata(decoded);
    return decoded;
}

/** Encodes with metadata stripped. 0, or -1 with libvips's error set. */
static int encode(VipsImage *in, uint8_t format, void **buf, size_t *len) {
    int failed;
    switch (format) {
    case FORMAT_JPEG:
        /* optimize_coding: Huffman tables made for the image, 40% smaller
           at 96 px for no measurable time (0.27 ms either way). */
        return vips_jpegsave_buffer(in, buf, len, "Q", 80, "optimize_coding", TRUE, "strip", TRUE, NULL);
    case FORMAT_PNG:
        return vips_pngsave_buffer(in, buf, len, "strip", TRUE, NULL);
    case FORMAT_WEBP:
        failed = vips_webpsave_buffer(in, buf, len, "Q", 80, "strip", TRUE, NULL);
        if (!failed) *len = cvs__webp_drop_metadata(*buf, *len);
        return failed;
    case FORMAT_AVIF:
        return vips_heifsave_buffer(in, buf, len, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1, "Q", 50, "bitdepth", 8,
                                    "effort", avif_effort((uint64_t)in->Xsize * (uint64_t)in->Ysize), "strip", TRUE, NULL);
    default:
        vips_error("cached-variant", "unknown variant format %d", format);
        return -1;
    }
}

void cvs_make_variant(unsigned char *source, size_t length, const cvs_job *job, cvs_result *r) {
    memset(r, 0, sizeof *r);
    /* A warning of the last job (libjpeg's "premature end") stays in the
       buffer: it is not this job's error. */
    vips_error_clear();
    char why[512];
    if (!cvs__choose_loader(source, length, why, sizeof why)) {
        set_message(r, CVS_REFUSED, why);
        return;
    }
    int has_profile = 0;
    if (check_header(source, length, job, r, &has_profile) != 0) return;
    VipsImage *image = decode(source, length, job, has_profile, r);
    if (!image) return;
    void *bytes = NULL;
    size_t size = 0;
    if (encode(image, job->format, &bytes, &size) != 0) {
        fail_from_vips(r, CVS_FAILED, "encoding failed");
        g_object_unref(image);
        return;
    }
    r->width = (uint32_t)image->Xsize;
    r->height = (uint32_t)image->Ysize;
    g_object_unref(image);
    if (size > job->max_result) {
        char *text = g_strdup_printf("the variant is %zu bytes, over the %" PRIu64 " bytes the daemon takes", size, job->max_result);
        g_free(bytes);
        set_message(r, CVS_FAILED, text);  /* the size asked, not the original, is at fault */
        g_free(text);
        return;
    }
    r->status = CVS_MADE;
    r->bytes = bytes;
    r->length = size;
    vips_error_clear();
}

void cvs_result_free(cvs_result *r) {
    g_free(r->bytes);
    r->bytes = NULL;
    r->length = 0;
}
