#ifndef CVIPSSHIM_INTERNAL_H
#define CVIPSSHIM_INTERNAL_H
/* What the shim's C files share and Swift does not see. */
#include <stddef.h>

/** libvips 8.14's loader for BMP, ICO and CUR (through ImageMagick). */
#define MAGICK_LOADER "VipsForeignLoadMagickBuffer"

/** loaders.c: blocks every loader but the buffer loaders of the store's
    formats (vips_start.c calls it once). */
void cvs__restrict_loaders(void);

/** loaders.c: the loader libvips will use for `bytes` (a cursor is first
    turned into an icon, in place), or NULL with the refusal in `why` when
    it is not one of the store's formats' loaders. Only the magick loader's
    block changes between jobs: it is unblocked for BMP and icon bytes alone. */
const char *cvs__choose_loader(unsigned char *bytes, size_t length, char *why, size_t capacity);

/** metadata.c: removes every metadata field of `image` (which the caller
    owns): EXIF, XMP, IPTC, ICC profile, orientation, ... */
struct _VipsImage;
void cvs__remove_metadata(struct _VipsImage *image);

/** metadata.c: drops the EXIF and XMP chunks of a WebP file in place; its new length. */
size_t cvs__webp_drop_metadata(unsigned char *bytes, size_t length);

#endif
