// Debian's FFmpeg development packages (libavformat-dev, libavcodec-dev, libavutil-dev, libswscale-dev).
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
#include <dlfcn.h>

// AVERROR is a function-like macro Swift cannot import; these name the codes Spotter checks.
static inline int spotter_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int spotter_averror_eof(void) { return AVERROR_EOF; }
static inline int spotter_averror_exit(void) { return AVERROR_EXIT; }

// libavdevice pulls in dozens of libraries (text-to-speech voices, SVG, ...) that would stay in
// memory for every run; it is loaded only when a camera is opened. Returns 0 on success.
static inline int spotter_load_avdevice(void) {
    void* library = dlopen("libavdevice.so.59", RTLD_NOW | RTLD_GLOBAL);
    if (!library) library = dlopen("libavdevice.so", RTLD_NOW | RTLD_GLOBAL);
    if (!library) return -1;
    void (*register_all)(void) = (void (*)(void))dlsym(library, "avdevice_register_all");
    if (!register_all) return -1;
    register_all();
    return 0;
}
