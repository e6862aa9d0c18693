#include "spotter_jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char *message;
} error_handler;

static void fail(j_common_ptr info) {
    error_handler *handler = (error_handler *)info->err;
    char text[JMSG_LENGTH_MAX];
    handler->manager.format_message(info, text);
    snprintf(handler->message, 200, "%s", text);
    longjmp(handler->jump, 1);
}

// Warnings (a corrupt entropy segment, a premature end) are not fatal, as in OpenCV: the picture
// decodes with what is there.
static void warn(j_common_ptr info, int level) { (void)info; (void)level; }

int spotter_jpeg_decode(const uint8_t *data, size_t size, size_t max_pixels, spotter_jpeg_image *out) {
    struct jpeg_decompress_struct info;
    error_handler handler;
    uint8_t *volatile pixels = NULL;
    uint8_t *volatile row = NULL;
    memset(out, 0, sizeof *out);
    info.err = jpeg_std_error(&handler.manager);
    handler.manager.error_exit = fail;
    handler.manager.emit_message = warn;
    handler.message = out->message;
    if (setjmp(handler.jump)) {
        jpeg_destroy_decompress(&info);
        free(pixels);
        free(row);
        return -1;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    if ((size_t)info.image_width * info.image_height > max_pixels) {
        snprintf(out->message, sizeof out->message, "%ux%u pixels is more than the limit of %zu", info.image_width, info.image_height, max_pixels);
        jpeg_destroy_decompress(&info);
        return -1;
    }
    // As OpenCV's JpegDecoder: four components (CMYK, YCCK) come out as CMYK and are converted
    // below; everything else straight to RGB (OpenCV asks for BGR: the same values in another order).
    int cmyk = info.num_components == 4;
    info.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&info);
    size_t width = info.output_width, height = info.output_height;
    pixels = malloc(width * height * 3);
    row = malloc(width * (size_t)info.output_components);
    if (!pixels || !row) {
        snprintf(out->message, sizeof out->message, "out of memory for %zux%zu pixels", width, height);
        jpeg_destroy_decompress(&info);
        free(pixels);
        free(row);
        return -1;
    }
    while (info.output_scanline < info.output_height) {
        uint8_t *target = pixels + (size_t)info.output_scanline * width * 3;
        JSAMPROW rows[1] = {cmyk ? row : target};
        jpeg_read_scanlines(&info, rows, 1);
        if (cmyk) {
            // OpenCV's icvCvt_CMYK2BGR_8u_C4C3R, written as RGB.
            for (size_t x = 0; x < width; x++) {
                int c = row[4 * x], m = row[4 * x + 1], y = row[4 * x + 2], k = row[4 * x + 3];
                target[3 * x] = (uint8_t)(k - ((255 - c) * k >> 8));
                target[3 * x + 1] = (uint8_t)(k - ((255 - m) * k >> 8));
                target[3 * x + 2] = (uint8_t)(k - ((255 - y) * k >> 8));
            }
        }
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    free(row);
    out->width = (int)width;
    out->height = (int)height;
    out->pixels = pixels;
    return 0;
}

void spotter_jpeg_free(spotter_jpeg_image *image) {
    free(image->pixels);
    image->pixels = NULL;
}
