// FFmpeg's functions as Spotter calls them, each resolved from the libraries on its first call.
#include "spotter_ffmpeg.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum { AVUTIL, SWSCALE, AVCODEC, AVFORMAT, LIBRARY_COUNT };

// The sonames of Debian 12's FFmpeg 5.1, the headers this file is compiled against.
static const char *const library_names[LIBRARY_COUNT] = {
    "libavutil.so.57", "libswscale.so.6", "libavcodec.so.59", "libavformat.so.59",
};
static void *libraries[LIBRARY_COUNT];
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_libraries(void) {
    for (int index = 0; index < LIBRARY_COUNT; index++) {
        // Global, so that libavdevice (opened later for cameras) binds to these.
        libraries[index] = dlopen(library_names[index], RTLD_LAZY | RTLD_GLOBAL);
        if (!libraries[index]) {
            const char *reason = dlerror();
            snprintf(load_error, sizeof load_error, "%s", reason ? reason : library_names[index]);
            return;
        }
    }
}

int spotter_ffmpeg_load(const char **error) {
    pthread_once(&load_once, load_libraries);
    if (load_error[0] == 0) return 0;
    if (error) *error = load_error;
    return -1;
}

int spotter_load_avdevice(void) {
    if (spotter_ffmpeg_load(NULL) != 0) return -1;
    void *library = dlopen("libavdevice.so.59", RTLD_LAZY | RTLD_GLOBAL);
    if (!library) return -1;
    void (*register_all)(void) = (void (*)(void))dlsym(library, "avdevice_register_all");
    if (!register_all) return -1;
    register_all();
    return 0;
}

// Media code calls spotter_ffmpeg_load (and reports its error) before any FFmpeg function, so a
// missing library or symbol here is a packaging fault: say which and stop.
static void *resolve(int library, const char *name) {
    const char *error = NULL;
    if (spotter_ffmpeg_load(&error) != 0) {
        fprintf(stderr, "spotter: cannot load FFmpeg for %s: %s\n", name, error);
        abort();
    }
    void *address = dlsym(libraries[library], name);
    if (!address) {
        fprintf(stderr, "spotter: %s has no function %s\n", library_names[library], name);
        abort();
    }
    return address;
}

// The address of `name`, looked up on the first call through `cached` and kept there.
static inline void *cached_symbol(_Atomic(void *) *cached, int library, const char *name) {
    void *address = atomic_load_explicit(cached, memory_order_acquire);
    if (!address) {
        address = resolve(library, name);
        atomic_store_explicit(cached, address, memory_order_release);
    }
    return address;
}

// Defines `name` with the header's signature, forwarding every call to FFmpeg's function. The
// compiler checks each definition against the header's declaration.
#define FORWARD(library, result, name, parameters, arguments)                                        \
    result name parameters {                                                                         \
        static _Atomic(void *) cached;                                                               \
        return ((result(*) parameters)cached_symbol(&cached, library, #name))arguments;              \
    }
#define FORWARD_VOID(library, name, parameters, arguments)                                           \
    void name parameters {                                                                           \
        static _Atomic(void *) cached;                                                               \
        ((void (*) parameters)cached_symbol(&cached, library, #name))arguments;                      \
    }

// libavutil
FORWARD(AVUTIL, AVRational, av_d2q, (double d, int max), (d, max))
FORWARD_VOID(AVUTIL, av_dict_free, (AVDictionary **m), (m))
FORWARD(AVUTIL, AVDictionaryEntry *, av_dict_get,
        (const AVDictionary *m, const char *key, const AVDictionaryEntry *prev, int flags), (m, key, prev, flags))
FORWARD(AVUTIL, int, av_dict_set, (AVDictionary **pm, const char *key, const char *value, int flags), (pm, key, value, flags))
FORWARD(AVUTIL, double, av_display_rotation_get, (const int32_t matrix[9]), (matrix))
FORWARD(AVUTIL, AVFrame *, av_frame_alloc, (void), ())
FORWARD_VOID(AVUTIL, av_frame_free, (AVFrame **frame), (frame))
FORWARD(AVUTIL, int, av_frame_get_buffer, (AVFrame *frame, int align), (frame, align))
FORWARD(AVUTIL, int, av_frame_make_writable, (AVFrame *frame), (frame))
FORWARD_VOID(AVUTIL, av_frame_unref, (AVFrame *frame), (frame))
FORWARD_VOID(AVUTIL, av_free, (void *ptr), (ptr))
FORWARD(AVUTIL, const char *, av_get_pix_fmt_name, (enum AVPixelFormat pix_fmt), (pix_fmt))
FORWARD_VOID(AVUTIL, av_log_set_level, (int level), (level))
FORWARD(AVUTIL, void *, av_malloc, (size_t size), (size))
FORWARD(AVUTIL, int, av_strerror, (int errnum, char *errbuf, size_t errbuf_size), (errnum, errbuf, errbuf_size))

// libswscale
FORWARD_VOID(SWSCALE, sws_freeContext, (struct SwsContext *context), (context))
FORWARD(SWSCALE, struct SwsContext *, sws_getContext,
        (int srcW, int srcH, enum AVPixelFormat srcFormat, int dstW, int dstH, enum AVPixelFormat dstFormat, int flags,
         SwsFilter *srcFilter, SwsFilter *dstFilter, const double *param),
        (srcW, srcH, srcFormat, dstW, dstH, dstFormat, flags, srcFilter, dstFilter, param))
FORWARD(SWSCALE, int, sws_scale,
        (struct SwsContext *c, const uint8_t *const srcSlice[], const int srcStride[], int srcSliceY, int srcSliceH,
         uint8_t *const dst[], const int dstStride[]),
        (c, srcSlice, srcStride, srcSliceY, srcSliceH, dst, dstStride))

// libavcodec
FORWARD(AVCODEC, AVPacket *, av_packet_alloc, (void), ())
FORWARD_VOID(AVCODEC, av_packet_free, (AVPacket **pkt), (pkt))
FORWARD_VOID(AVCODEC, av_packet_rescale_ts, (AVPacket *pkt, AVRational tb_src, AVRational tb_dst), (pkt, tb_src, tb_dst))
FORWARD_VOID(AVCODEC, av_packet_unref, (AVPacket *pkt), (pkt))
FORWARD(AVCODEC, AVCodecContext *, avcodec_alloc_context3, (const AVCodec *codec), (codec))
FORWARD(AVCODEC, const AVCodec *, avcodec_find_decoder, (enum AVCodecID id), (id))
FORWARD(AVCODEC, const AVCodec *, avcodec_find_encoder, (enum AVCodecID id), (id))
FORWARD(AVCODEC, const AVCodec *, avcodec_find_encoder_by_name, (const char *name), (name))
FORWARD_VOID(AVCODEC, avcodec_free_context, (AVCodecContext **avctx), (avctx))
FORWARD(AVCODEC, const char *, avcodec_get_name, (enum AVCodecID id), (id))
FORWARD(AVCODEC, int, avcodec_open2, (AVCodecContext *avctx, const AVCodec *codec, AVDictionary **options),
        (avctx, codec, options))
FORWARD(AVCODEC, int, avcodec_parameters_from_context, (AVCodecParameters *par, const AVCodecContext *codec), (par, codec))
FORWARD(AVCODEC, int, avcodec_parameters_to_context, (AVCodecContext *codec, const AVCodecParameters *par), (codec, par))
FORWARD(AVCODEC, int, avcodec_receive_frame, (AVCodecContext *avctx, AVFrame *frame), (avctx, frame))
FORWARD(AVCODEC, int, avcodec_receive_packet, (AVCodecContext *avctx, AVPacket *avpkt), (avctx, avpkt))
FORWARD(AVCODEC, int, avcodec_send_frame, (AVCodecContext *avctx, const AVFrame *frame), (avctx, frame))
FORWARD(AVCODEC, int, avcodec_send_packet, (AVCodecContext *avctx, const AVPacket *avpkt), (avctx, avpkt))

// libavformat
FORWARD(AVFORMAT, int, av_find_best_stream,
        (AVFormatContext *ic, enum AVMediaType type, int wanted_stream_nb, int related_stream,
         const AVCodec **decoder_ret, int flags),
        (ic, type, wanted_stream_nb, related_stream, decoder_ret, flags))
FORWARD(AVFORMAT, const AVInputFormat *, av_find_input_format, (const char *short_name), (short_name))
FORWARD(AVFORMAT, int, av_interleaved_write_frame, (AVFormatContext *s, AVPacket *pkt), (s, pkt))
FORWARD(AVFORMAT, int, av_read_frame, (AVFormatContext *s, AVPacket *pkt), (s, pkt))
FORWARD(AVFORMAT, uint8_t *, av_stream_get_side_data, (const AVStream *stream, enum AVPacketSideDataType type, size_t *size),
        (stream, type, size))
FORWARD(AVFORMAT, int, av_write_trailer, (AVFormatContext *s), (s))
FORWARD(AVFORMAT, AVFormatContext *, avformat_alloc_context, (void), ())
FORWARD(AVFORMAT, int, avformat_alloc_output_context2,
        (AVFormatContext **ctx, const AVOutputFormat *oformat, const char *format_name, const char *filename),
        (ctx, oformat, format_name, filename))
FORWARD_VOID(AVFORMAT, avformat_close_input, (AVFormatContext **s), (s))
FORWARD(AVFORMAT, int, avformat_find_stream_info, (AVFormatContext *ic, AVDictionary **options), (ic, options))
FORWARD_VOID(AVFORMAT, avformat_free_context, (AVFormatContext *s), (s))
FORWARD(AVFORMAT, int, avformat_network_init, (void), ())
FORWARD(AVFORMAT, AVStream *, avformat_new_stream, (AVFormatContext *s, const AVCodec *c), (s, c))
FORWARD(AVFORMAT, int, avformat_open_input,
        (AVFormatContext **ps, const char *url, const AVInputFormat *fmt, AVDictionary **options), (ps, url, fmt, options))
FORWARD(AVFORMAT, int, avformat_write_header, (AVFormatContext *s, AVDictionary **options), (s, options))
FORWARD(AVFORMAT, int, avio_closep, (AVIOContext **s), (s))
FORWARD(AVFORMAT, int, avio_feof, (AVIOContext *s), (s))
FORWARD_VOID(AVFORMAT, avio_flush, (AVIOContext *s), (s))
FORWARD(AVFORMAT, int, avio_open, (AVIOContext **s, const char *url, int flags), (s, url, flags))
