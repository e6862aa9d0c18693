// Debian's FFmpeg development packages (libavformat-dev, libavcodec-dev, libavutil-dev, libswscale-dev).
//
// Spotter does not link FFmpeg: its libraries and the ~130 they pull in cost about 80 ms to load,
// which commands that never touch media (`inspect`, `detect` on JPEGs, `--help`) should not pay.
// The functions Spotter calls are defined in loader.c, which opens the libraries on first use.
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

// AVERROR is a function-like macro Swift cannot import; these name the codes Spotter checks.
static inline int spotter_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int spotter_averror_eof(void) { return AVERROR_EOF; }
static inline int spotter_averror_exit(void) { return AVERROR_EXIT; }

/// Opens FFmpeg's libraries (once; later calls return the first result). Returns 0 on success;
/// otherwise -1 with `*error` set to the dynamic loader's message (static storage).
int spotter_ffmpeg_load(const char **error);

/// libavdevice pulls in dozens of libraries (text-to-speech voices, SVG, ...) that would stay in
/// memory for every run; it is loaded only when a camera is opened. Returns 0 on success.
int spotter_load_avdevice(void);
