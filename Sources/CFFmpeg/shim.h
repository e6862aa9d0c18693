// Debian's FFmpeg development packages (libavformat-dev, libavcodec-dev, libavutil-dev, libswscale-dev).
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
#include <libavdevice/avdevice.h>

// AVERROR is a function-like macro Swift cannot import; these name the codes Spotter checks.
static inline int spotter_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int spotter_averror_eof(void) { return AVERROR_EOF; }
