/* What a variant does not carry: none of its original's metadata (EXIF
   with its camera, time and GPS position, XMP, IPTC, ICC profile). The
   savers are asked to strip (`strip`), and two gaps of libvips 8.14 are
   closed here. */
#include "CVipsShim.h"
#include "internal.h"

#include <string.h>
#include <vips/vips.h>

void cvs__remove_metadata(VipsImage *image) {
    /* A saver writes what the image's fields hold, and webpsave writes EXIF
       even when told to strip: the fields go first, so no saver has any of
       the original's to write. The header's own fields (width, bands, ...)
       are not removable and stay. */
    gchar **fields = vips_image_get_fields(image);
    for (int i = 0; fields[i]; i++) (void)vips_image_remove(image, fields[i]);
    g_strfreev(fields);
}

static uint32_t le32(const unsigned char *p) {
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/** The length of the RIFF chunk at `at` with its padding, or 0 when it
    does not fit in `n` bytes. */
static size_t chunk_length(const unsigned char *b, size_t n, size_t at) {
    if (n - at < 8) return 0;
    uint32_t size = le32(b + at + 4);
    size_t whole = 8 + (size_t)size + (size & 1);
    return whole <= n - at ? whole : 0;
}

size_t cvs__webp_drop_metadata(unsigned char *b, size_t n) {
    /* libvips 8.14's webpsave adds an EXIF chunk even with strip set (made
       from the image's resolution when the image has none: 186 bytes of
       resolution, orientation and size). The chunk is dropped from the RIFF
       container, with XMP's, and their flags cleared in VP8X. The bytes are
       libvips's own; if they do not parse as expected they are left alone. */
    if (n < 12 || memcmp(b, "RIFF", 4) != 0 || memcmp(b + 8, "WEBP", 4) != 0 || (size_t)le32(b + 4) + 8 != n) return n;
    size_t at = 12;
    while (at < n) {
        size_t whole = chunk_length(b, n, at);
        if (whole == 0) return n;
        at += whole;
    }
    size_t out = 12;
    unsigned char *vp8x_flags = NULL;
    for (at = 12; at < n;) {
        size_t whole = chunk_length(b, n, at);
        if (memcmp(b + at, "EXIF", 4) != 0 && memcmp(b + at, "XMP ", 4) != 0) {
            memmove(b + out, b + at, whole);
            if (memcmp(b + out, "VP8X", 4) == 0 && whole > 8) vp8x_flags = b + out + 8;
            out += whole;
        }
        at += whole;
    }
    if (vp8x_flags) *vp8x_flags &= (unsigned char)~(0x08 | 0x04); /* the EXIF and XMP flags */
    uint32_t riff = (uint32_t)(out - 8);
    for (int i = 0; i < 4; i++) b[4 + i] = (unsigned char)(riff >> (8 * i));
    return out;
}
