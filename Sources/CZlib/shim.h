// Debian's zlib (zlib1g-dev).
#include <zlib.h>

// inflateInit2 is a function-like macro Swift cannot import. Raw deflate (no zlib header), as zip
// archives store it.
static inline int spotter_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}
