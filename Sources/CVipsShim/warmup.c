/* Step 3 of the helper's start: every decoder and encoder a job may use is
   run once, before the sandbox, on tiny images made here. Several open
   files or load code the first time they are used and never again:
   ImageMagick loads its BMP, ICON and PNG coder modules and reads its
   configuration, gdk-pixbuf (librsvg's decoder of images inside an SVG)
   reads its loaders.cache, fontconfig reads its configuration and caches,
   glibc reads /sys/devices/system/cpu for the codecs' thread counts. After
   the sandbox any such open fails with EPERM, so what is not warmed up here
   is refused later, never opened. */
#include "CVipsShim.h"

#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

/* The savers that make the warm-up's inputs, one per format the store
   accepts that libvips can write, each given as its call. */
typedef int (*saver)(VipsImage *in, void **buf, size_t *len);

static int save_jpeg(VipsImage *in, void **b, size_t *n) { return vips_jpegsave_buffer(in, b, n, NULL); }
static int save_png(VipsImage *in, void **b, size_t *n) { return vips_pngsave_buffer(in, b, n, NULL); }
static int save_webp(VipsImage *in, void **b, size_t *n) { return vips_webpsave_buffer(in, b, n, NULL); }
static int save_gif(VipsImage *in, void **b, size_t *n) { return vips_gifsave_buffer(in, b, n, NULL); }
static int save_tiff(VipsImage *in, void **b, size_t *n) { return vips_tiffsave_buffer(in, b, n, NULL); }
static int save_jp2(VipsImage *in, void **b, size_t *n) { return vips_jp2ksave_buffer(in, b, n, NULL); }
static int save_jxl(VipsImage *in, void **b, size_t *n) { return vips_jxlsave_buffer(in, b, n, NULL); }
static int save_bmp(VipsImage *in, void **b, size_t *n) { return vips_magicksave_buffer(in, b, n, "format", "bmp", NULL); }
static int save_ico(VipsImage *in, void **b, size_t *n) { return vips_magicksave_buffer(in, b, n, "format", "ico", NULL); }
static int save_heic(VipsImage *in, void **b, size_t *n) {
    return vips_heifsave_buffer(in, b, n, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_HEVC, NULL);
}
static int save_avif(VipsImage *in, void **b, size_t *n) {
    return vips_heifsave_buffer(in, b, n, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1, NULL);
}

static const struct { const char *name; saver save; } inputs[] = {
    {"jpeg", save_jpeg}, {"png", save_png}, {"webp", save_webp}, {"gif", save_gif},
    {"tiff", save_tiff}, {"jp2", save_jp2}, {"jxl", save_jxl}, {"bmp", save_bmp},
    {"ico", save_ico}, {"heic", save_heic}, {"avif", save_avif},
};

/* The four savers a variant is written with: the only ones left unblocked. */
static const char *const variant_savers[] = {
    "VipsForeignSaveJpegBuffer", "VipsForeignSavePngBuffer", "VipsForeignSaveWebpBuffer", "VipsForeignSaveHeifBuffer",
};

/** Runs one job on `bytes` (changed in place for a cursor) for each of
    `formats`; a failure is reported on stderr and counted. */
static int run(const char *name, unsigned char *bytes, size_t length, const uint8_t *formats, size_t count) {
    int failures = 0;
    for (size_t i = 0; i < count; i++) {
        cvs_job job = {.format = formats[i], .fit = 2, .width = 3, .height = 2, .max_dimension = 16,
                       .max_pixels = 1000000, .max_result = 1 << 20};
        cvs_result result;
        cvs_make_variant(bytes, length, &job, &result);
        if (result.status != CVS_MADE) {
            fprintf(stderr, "cached-variant: warm-up of %s to format %d failed: %.*s\n", name, formats[i],
                    (int)result.length, (const char *)result.bytes);
            failures++;
        }
        cvs_result_free(&result);
    }
    return failures;
}

/** An icon (type 1) or cursor (type 2) holding one PNG image, as Windows
    Vista's large icons are: ImageMagick decodes it with its PNG coder. */
static unsigned char *icon_with_png(const void *png, size_t png_length, int type, size_t *length) {
    enum { HEAD = 6 + 16 };
    unsigned char *b = g_malloc0(HEAD + png_length);
    b[2] = (unsigned char)type;
    b[4] = 1;                                         /* one image */
    b[6] = 8; b[7] = 8;                               /* 8 x 8 */
    if (type == 1) { b[10] = 1; b[12] = 32; }         /* planes, bits per pixel (a cursor: its hotspot, 0, 0) */
    for (int i = 0; i < 4; i++) b[14 + i] = (unsigned char)(png_length >> (8 * i));
    b[18] = HEAD;                                     /* the image's offset */
    memcpy(b + HEAD, png, png_length);
    *length = HEAD + png_length;
    return b;
}

/** An SVG with text and a PNG and a JPEG inside: the parts of librsvg that
    load lazily (fontconfig's configuration and cache, so that Pango finds
    its fonts listed; gdk-pixbuf's loaders.cache). The font files
    themselves are opened again by cairo and HarfBuzz for each SVG, which
    the sandbox forbids: an SVG's text is drawn as missing-glyph boxes
    (the SVG test in VariantHelperTests shows it). */
static char *svg_with_text_and_images(VipsImage *rgb) {
    void *png = NULL, *jpeg = NULL;
    size_t png_length = 0, jpeg_length = 0;
    if (vips_pngsave_buffer(rgb, &png, &png_length, NULL) || vips_jpegsave_buffer(rgb, &jpeg, &jpeg_length, NULL)) {
        g_free(png);
        return NULL;
    }
    gchar *png64 = g_base64_encode(png, png_length), *jpeg64 = g_base64_encode(jpeg, jpeg_length);
    char *svg = g_strdup_printf(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"24\" height=\"16\">"
        "<text x=\"0\" y=\"12\" font-family=\"sans-serif\" font-size=\"10\">Ag</text>"
        "<image x=\"8\" y=\"0\" width=\"8\" height=\"8\" href=\"data:image/png;base64,%s\"/>"
        "<image x=\"16\" y=\"0\" width=\"8\" height=\"8\" href=\"data:image/jpeg;base64,%s\"/></svg>",
        png64, jpeg64);
    g_free(png64); g_free(jpeg64); g_free(png); g_free(jpeg);
    return svg;
}

/** Every input format, each through one job to PNG. */
static int warm_decoders(VipsImage *rgb, VipsImage *rgba) {
    static const uint8_t png_only[] = {2};
    int failures = 0;
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        void *bytes = NULL;
        size_t length = 0;
        /* ICO keeps an alpha channel: made from the RGBA image. */
        if (inputs[i].save(inputs[i].save == save_ico ? rgba : rgb, &bytes, &length)) {
            fprintf(stderr, "cached-variant: warm-up: saving %s failed: %s", inputs[i].name, vips_error_buffer());
            vips_error_clear();
            failures++;
            continue;
        }
        failures += run(inputs[i].name, bytes, length, png_only, 1);
        if (inputs[i].save == save_png)
            for (int type = 1; type <= 2; type++) {
                size_t icon_length;
                unsigned char *icon = icon_with_png(bytes, length, type, &icon_length);
                failures += run(type == 1 ? "ico with png" : "cur with png", icon, icon_length, png_only, 1);
                g_free(icon);
            }
        g_free(bytes);
    }
    char *svg = svg_with_text_and_images(rgb);
    if (svg) failures += run("svg", (unsigned char *)svg, strlen(svg), png_only, 1);
    else failures++;
    g_free(svg);
    /* A broken BMP: ImageMagick reads its English messages file the first
       time it reports an error ("improper image header" rather than
       "ImproperImageHeader"). Refused, as it should be. */
    unsigned char broken_bmp[64] = {'B', 'M'};
    cvs_job job = {.format = 2, .fit = 1, .width = 4, .max_dimension = 4, .max_pixels = 1000, .max_result = 1 << 20};
    cvs_result result;
    cvs_make_variant(broken_bmp, sizeof broken_bmp, &job, &result);
    cvs_result_free(&result);
    return failures;
}

/** Every output format, from an RGBA PNG (JPEG flattens its alpha). */
static int warm_encoders(VipsImage *rgba) {
    static const uint8_t all[] = {1, 2, 4, 6};
    void *png = NULL;
    size_t length = 0;
    if (vips_pngsave_buffer(rgba, &png, &length, NULL)) return 1;
    int failures = run("png with alpha", png, length, all, sizeof all);
    g_free(png);
    return failures;
}

/** An 8 x 8 RGB gradient (32x, 32y, 128) and the same with an alpha
    channel: not flat, so that every coder takes its ordinary path
    (palette, prediction, chroma). */
static int test_images(VipsImage **rgb, VipsImage **rgba) {
    VipsImage *t[4] = {NULL, NULL, NULL, NULL};
    int failed = vips_xyz(&t[0], 8, 8, NULL) || vips_linear1(t[0], &t[1], 32, 0, NULL) ||
                 vips_bandjoin_const1(t[1], &t[2], 128, NULL) || vips_cast_uchar(t[2], &t[3], NULL) ||
                 vips_copy(t[3], rgb, "interpretation", VIPS_INTERPRETATION_sRGB, NULL) ||
                 vips_bandjoin_const1(*rgb, rgba, 200, NULL);
    for (int i = 0; i < 4; i++) VIPS_UNREF(t[i]);
    return failed ? -1 : 0;
}

int cvs_warm_up(char *message, size_t capacity) {
    VipsImage *rgb = NULL, *rgba = NULL;
    if (test_images(&rgb, &rgba)) {
        snprintf(message, capacity, "warm-up: making the test image failed: %s", vips_error_buffer());
        vips_error_clear();
        VIPS_UNREF(rgb);
        VIPS_UNREF(rgba);
        return -1;
    }
    int failures = warm_decoders(rgb, rgba) + warm_encoders(rgba);
    VIPS_UNREF(rgb);
    VIPS_UNREF(rgba);
    vips_operation_block_set("VipsForeignSave", TRUE);
    for (size_t i = 0; i < sizeof variant_savers / sizeof variant_savers[0]; i++)
        vips_operation_block_set(variant_savers[i], FALSE);
    if (failures > 0) fprintf(stderr, "cached-variant: warm-up: %d step(s) failed; those formats will be refused\n", failures);
    return 0;
}
