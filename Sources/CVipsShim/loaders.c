/* Which decoder a source reaches. libvips picks a loader by asking each, in
   priority order, whether the bytes are its format (a signature check); a
   source reaches only the buffer loaders of the formats the store accepts.

   Blocking alone is not enough in libvips 8.14: vips_foreign_find_load_buffer
   still returns a blocked loader, and a blocked loader reads the header
   (poppler parses a whole PDF there) before "operation is blocked" stops
   it. So the loader is chosen here first, by the same call libvips makes,
   and a source whose loader is not on the list is refused before any of
   its code runs. */
#include "CVipsShim.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

/* The buffer loaders of the formats the store accepts (CacheStore's
   ImageType), by GType name as `vips -l` lists them in Debian 12's
   libvips 8.14. */
static const char *const buffer_loaders[] = {
    "VipsForeignLoadJpegBuffer",   /* jpeg */
    "VipsForeignLoadPngBuffer",    /* png */
    "VipsForeignLoadNsgifBuffer",  /* gif */
    "VipsForeignLoadWebpBuffer",   /* webp */
    "VipsForeignLoadHeifBuffer",   /* avif, heic, heif (the heif module) */
    "VipsForeignLoadSvgBuffer",    /* svg (librsvg) */
    "VipsForeignLoadTiffBuffer",   /* tiff */
    "VipsForeignLoadJp2kBuffer",   /* jp2 and the j2k codestream (openjpeg) */
    "VipsForeignLoadJxlBuffer",    /* jxl (the jxl module) */
    MAGICK_LOADER,                 /* bmp, ico, cur: see magick_signature */
};

void cvs__restrict_loaders(void) {
    vips_operation_block_set("VipsForeignLoad", TRUE);
    for (size_t i = 0; i < sizeof buffer_loaders / sizeof buffer_loaders[0]; i++) {
        if (g_type_from_name(buffer_loaders[i]) == 0) {
            fprintf(stderr, "cached-variant: this libvips has no %s: its format will be refused\n", buffer_loaders[i]);
            continue;
        }
        vips_operation_block_set(buffer_loaders[i], FALSE);
    }
}

/* ICONDIR: reserved (0), type (1 icon, 2 cursor), count, then 16-byte
   entries. An icon's entry has colour planes and bits per pixel where a
   cursor's has its hotspot; nothing else differs. */
enum { ICONDIR_SIZE = 6, ICONDIRENTRY_SIZE = 16 };

/** True when `b` is a Windows cursor as CacheStore's ImageType sees one:
    ICONDIR type 2, at least one entry, the first entry's image placed after
    the directory. */
static int is_cursor(const unsigned char *b, size_t n) {
    if (n < ICONDIR_SIZE + ICONDIRENTRY_SIZE) return 0;
    if (b[0] != 0 || b[1] != 0 || b[2] != 2 || b[3] != 0) return 0;
    unsigned count = b[4] | (unsigned)b[5] << 8;
    if (count == 0) return 0;
    uint32_t offset = b[18] | (uint32_t)b[19] << 8 | (uint32_t)b[20] << 16 | (uint32_t)b[21] << 24;
    return offset >= ICONDIR_SIZE + ICONDIRENTRY_SIZE * count;
}

/** Turns a cursor into an icon in place. ImageMagick's ICON reader reads
    cursors (it takes type 1 or 2, and ignores the directory's planes and
    bit count, reading both from each image's own header), but its format
    detection knows only the icon signature, 00 00 01 00: given a cursor it
    guesses TGA and fails ("improper image header"). The type word is the
    only change needed; the pixels decoded are the icon's (checked against
    the PNG the fixture cursor was made from). */
static void cursor_as_icon(unsigned char *bytes, size_t length) {
    if (is_cursor(bytes, length)) bytes[2] = 1;
}

/** ImageMagick (libvips 8.14's only way to BMP and icons) would take any of
    its hundred formats that no other loader claims: PostScript, MVG, MSL,
    text, ... It is given only bytes that start with a BMP (`BM`) or icon
    (00 00 01 00) signature. */
static int magick_signature(const unsigned char *b, size_t n) {
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return 1;
    static const unsigned char icon[4] = {0, 0, 1, 0};
    return n >= 4 && memcmp(b, icon, 4) == 0;
}

static int listed(const char *loader) {
    for (size_t i = 0; i < sizeof buffer_loaders / sizeof buffer_loaders[0]; i++)
        if (strcmp(loader, buffer_loaders[i]) == 0) return 1;
    return 0;
}

const char *cvs__choose_loader(unsigned char *bytes, size_t length, char *why, size_t capacity) {
    cursor_as_icon(bytes, length);
    int magick = magick_signature(bytes, length);
    vips_operation_block_set(MAGICK_LOADER, !magick);
    const char *loader = vips_foreign_find_load_buffer(bytes, length);
    if (!loader) {
        snprintf(why, capacity, "not an image this helper decodes: %s", vips_error_buffer());
        vips_error_clear();
        return NULL;
    }
    if (!listed(loader) || (strcmp(loader, MAGICK_LOADER) == 0 && !magick)) {
        snprintf(why, capacity, "not an image this helper decodes: the bytes are for libvips's %s, not a format of the store",
                 vips_nickname_find(g_type_from_name(loader)));
        return NULL;
    }
    return loader;
}
