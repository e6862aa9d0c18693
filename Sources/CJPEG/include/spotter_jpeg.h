// JPEG decoding with Debian's libjpeg-turbo (libjpeg62-turbo-dev), set up as OpenCV's imread sets it
// up, so decoded pixels equal OpenCV's, Pillow's and TensorFlow's. In C because libjpeg reports
// errors by longjmp, which Swift cannot catch.
#ifndef SPOTTER_JPEG_H
#define SPOTTER_JPEG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int width;
    int height;
    /// Packed RGB24 rows of width * 3 bytes, malloc'ed; free with spotter_jpeg_free.
    uint8_t *pixels;
    /// libjpeg's message when decoding failed.
    char message[200];
} spotter_jpeg_image;

/// Decodes `size` bytes of a JPEG file to RGB24 (CMYK and YCCK converted as OpenCV does, grayscale
/// replicated). Refuses pictures of more than `max_pixels` pixels. Returns 0 on success; otherwise
/// `message` says why and nothing needs freeing.
int spotter_jpeg_decode(const uint8_t *data, size_t size, size_t max_pixels, spotter_jpeg_image *out);

void spotter_jpeg_free(spotter_jpeg_image *image);

#endif
