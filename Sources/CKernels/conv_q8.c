#include "spotter_kernels.h"
#include "tiles.h"

#include <immintrin.h>
#include <string.h>

// An 8-bit convolution with exact int32 sums on AVX2: inputs and weights widened to int16 with their
// zero points subtracted (the input once per tile of pixels, the weights at load), then VPMADDWD on
// pairs of k. Debian's XNNPACK (2022) widens the weights in its inner loop and keeps two accumulators
// on the stack; this loop only multiplies and adds.
#define TARGET __attribute__((target("avx2,fma")))
#define MR 6
#define NR 16

static int32_t taps(const spotter_conv_q8* c) { return c->k_h * c->k_w; }

/// k (taps times input channels) rounded up to a pair.
static size_t pairs(const spotter_conv_q8* c) { return ((size_t)taps(c) * (size_t)c->in_c + 1) / 2; }

static size_t blocks(const spotter_conv_q8* c) { return ((size_t)c->out_c + NR - 1) / NR; }

size_t spotter_conv_q8_packed_count(const spotter_conv_q8* c) { return blocks(c) * pairs(c) * 2 * NR; }

void spotter_conv_q8_pack(const spotter_conv_q8* c, const void* weights, const int32_t* weight_zero, int16_t* packed) {
    const size_t k = (size_t)taps(c) * (size_t)c->in_c, kp = pairs(c);
    memset(packed, 0, sizeof(int16_t) * spotter_conv_q8_packed_count(c));
    for (int32_t n = 0; n < c->out_c; n++) {
        int16_t* block = packed + (size_t)(n / NR) * kp * 2 * NR;
        const int32_t lane = n % NR;
        for (size_t kk = 0; kk < k; kk++) {
            const size_t index = (size_t)n * k + kk;
            const int32_t w = c->is_signed ? ((const int8_t*)weights)[index] : ((const uint8_t*)weights)[index];
            // Pair kk/2 holds, per channel, the weights of k = 2p and 2p + 1 next to each other.
            block[(kk / 2) * 2 * NR + (size_t)lane * 2 + kk % 2] = (int16_t)(w - weight_zero[n]);
        }
    }
}

/// Writes `count` input values minus the zero point as int16.
TARGET static inline void widen(const spotter_conv_q8* c, const uint8_t* src, int16_t* dst, int32_t count) {
    const __m256i zero = _mm256_set1_epi16((int16_t)c->in_zero);
    int32_t i = 0;
    if (c->is_signed) {
        for (; i + 16 <= count; i += 16) {
            const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(src + i)));
            _mm256_storeu_si256((__m256i*)(dst + i), _mm256_sub_epi16(v, zero));
        }
        for (; i < count; i++) dst[i] = (int16_t)((int8_t)src[i] - c->in_zero);
    } else {
        for (; i + 16 <= count; i += 16) {
            const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(src + i)));
            _mm256_storeu_si256((__m256i*)(dst + i), _mm256_sub_epi16(v, zero));
        }
        for (; i < count; i++) dst[i] = (int16_t)(src[i] - c->in_zero);
    }
}

/// Fills the tile's rows of widened input: MR rows of 2 * pairs int16 (receptive fields; padding and
/// the odd k's partner are 0). Pixels past `count` repeat the last one.
TARGET static void fill_rows(const spotter_conv_q8* c, const uint8_t* input, int32_t p0, int32_t count, int16_t* rows) {
    const int32_t plane = c->out_h * c->out_w;
    const size_t row_length = 2 * pairs(c);
    for (int m = 0; m < MR; m++) {
        int16_t* dst = rows + (size_t)m * row_length;
        if (m >= count) {
            memcpy(dst, rows + (size_t)(count - 1) * row_length, sizeof(int16_t) * row_length);
            continue;
        }
        const int32_t p = p0 + m;
        const int32_t b = p / plane, oy = (p % plane) / c->out_w, ox = p % c->out_w;
        const int32_t y0 = oy * c->stride_h - c->pad_top, x0 = ox * c->stride_w - c->pad_left;
        for (int32_t ky = 0; ky < c->k_h; ky++) {
            const int32_t y = y0 + ky * c->dil_h;
            if (c->dil_w == 1 && y >= 0 && y < c->in_h && x0 >= 0 && x0 + c->k_w <= c->in_w) {
                // The whole filter row is inside: k_w * in_c consecutive bytes.
                widen(c, input + (((size_t)b * c->in_h + y) * c->in_w + x0) * c->in_c, dst, c->k_w * c->in_c);
                dst += c->k_w * c->in_c;
                continue;
            }
            for (int32_t kx = 0; kx < c->k_w; kx++, dst += c->in_c) {
                const int32_t x = x0 + kx * c->dil_w;
                if (y < 0 || y >= c->in_h || x < 0 || x >= c->in_w) {
                    memset(dst, 0, sizeof(int16_t) * (size_t)c->in_c);
                } else {
                    widen(c, input + (((size_t)b * c->in_h + y) * c->in_w + x) * c->in_c, dst, c->in_c);
                }
            }
        }
        if ((size_t)taps(c) * (size_t)c->in_c < row_length) *dst = 0;
    }
}

/// Requantizes 16 sums as XNNPACK's fp32 scheme (so as LiteRT's default path): scaled in float,
/// clamped above, rounded to nearest even, offset, clamped below; stores `valid` bytes.
TARGET static inline void store_row(const spotter_conv_q8* c, int32_t n0, uint8_t* out, int32_t valid,
                                    __m256i a0, __m256i a1) {
    const __m256 max_less_zero = _mm256_set1_ps((float)(c->out_max - c->out_zero));
    const __m256i zero = _mm256_set1_epi32(c->out_zero), lo = _mm256_set1_epi32(c->out_min);
    a0 = _mm256_add_epi32(a0, _mm256_loadu_si256((const __m256i*)(c->bias + n0)));
    a1 = _mm256_add_epi32(a1, _mm256_loadu_si256((const __m256i*)(c->bias + n0 + 8)));
    __m256 f0 = _mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a0), _mm256_loadu_ps(c->scale + n0)), max_less_zero);
    __m256 f1 = _mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a1), _mm256_loadu_ps(c->scale + n0 + 8)), max_less_zero);
    const __m256i v0 = _mm256_max_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(f0), zero), lo);
    const __m256i v1 = _mm256_max_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(f1), zero), lo);
    // Every value is within the output type now, so the packing never saturates.
    const __m256i halves = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8);
    const __m128i low = _mm256_castsi256_si128(halves), high = _mm256_extracti128_si256(halves, 1);
    const __m128i bytes = c->is_signed ? _mm_packs_epi16(low, high) : _mm_packus_epi16(low, high);
    if (valid == NR) {
        _mm_storeu_si128((__m128i*)out, bytes);
    } else {
        uint8_t lane[NR];
        _mm_storeu_si128((__m128i*)lane, bytes);
        memcpy(out, lane, (size_t)valid);
    }
}

/// One tile of up to MR pixels by 16 channels: 12 accumulators in named variables (kept in registers).
TARGET static inline void tile(const spotter_conv_q8* c, const int16_t* rows, size_t kp, const int16_t* w,
                               int32_t n0, uint8_t* out, int32_t count) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const size_t row = 2 * kp;
    const int16_t *a0 = rows, *a1 = a0 + row, *a2 = a1 + row, *a3 = a2 + row, *a4 = a3 + row, *a5 = a4 + row;
    for (size_t p = 0; p < kp; p++, w += 2 * NR) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i*)w), w1 = _mm256_loadu_si256((const __m256i*)(w + NR));
        int32_t pair;
        __m256i x;
#define ROW(A, C0, C1)                                           \
        memcpy(&pair, A + 2 * p, 4);                             \
        x = _mm256_set1_epi32(pair);                             \
        C0 = _mm256_add_epi32(C0, _mm256_madd_epi16(x, w0));     \
        C1 = _mm256_add_epi32(C1, _mm256_madd_epi16(x, w1));
        ROW(a0, c00, c01) ROW(a1, c10, c11) ROW(a2, c20, c21) ROW(a3, c30, c31) ROW(a4, c40, c41) ROW(a5, c50, c51)
#undef ROW
    }
    const int32_t valid = c->out_c - n0 < NR ? c->out_c - n0 : NR;
    const size_t stride = (size_t)c->out_c;
    store_row(c, n0, out, valid, c00, c01);
    if (count > 1) store_row(c, n0, out + stride, valid, c10, c11);
    if (count > 2) store_row(c, n0, out + 2 * stride, valid, c20, c21);
    if (count > 3) store_row(c, n0, out + 3 * stride, valid, c30, c31);
    if (count > 4) store_row(c, n0, out + 4 * stride, valid, c40, c41);
    if (count > 5) store_row(c, n0, out + 5 * stride, valid, c50, c51);
}

typedef struct {
    const spotter_conv_q8* conv;
    const uint8_t* input;
    uint8_t* output;
    int32_t pixels;          ///< batches * out_h * out_w
    int32_t tiles_per_task;
} task_q8;

TARGET static void conv_q8_task(void* opaque, size_t task) {
    const task_q8* t = (const task_q8*)opaque;
    const spotter_conv_q8* c = t->conv;
    const size_t kp = pairs(c), tile_length = MR * 2 * kp;
    int32_t first, last;
    spotter_task_pixels(task, t->tiles_per_task, MR, t->pixels, &first, &last);
    const int32_t tiles = (last - first + MR - 1) / MR;
    // All of the task's widened rows first, then each block of weights (k * 32 bytes, in L1) over
    // all of them: a tile at a time, every tile would stream all the weights again.
    int16_t rows[(size_t)tiles * tile_length];
    for (int32_t i = 0; i < tiles; i++) {
        const int32_t p0 = first + i * MR;
        fill_rows(c, t->input, p0, last - p0 < MR ? last - p0 : MR, rows + (size_t)i * tile_length);
    }
    for (int32_t n0 = 0; n0 < c->out_c; n0 += NR) {
        const int16_t* w = c->packed + (size_t)(n0 / NR) * kp * 2 * NR;
        for (int32_t i = 0; i < tiles; i++) {
            const int32_t p0 = first + i * MR;
            tile(c, rows + (size_t)i * tile_length, kp, w, n0, t->output + (size_t)p0 * c->out_c + n0, last - p0 < MR ? last - p0 : MR);
        }
    }
}

void spotter_conv_q8_run(const spotter_conv_q8* conv, const void* input, void* output, pthreadpool_t pool) {
    const int32_t pixels = conv->batches * conv->out_h * conv->out_w;
    const int32_t tiles = (pixels + MR - 1) / MR;
    // At most 96 KiB of widened rows on a task's stack.
    const int32_t fit = (int32_t)((96 * 1024) / (MR * 2 * pairs(conv) * sizeof(int16_t)));
    const int32_t per_task = spotter_tiles_per_task(tiles, pool, fit);
    task_q8 context = {conv, (const uint8_t*)input, (uint8_t*)output, pixels, per_task};
    pthreadpool_parallelize_1d(pool, conv_q8_task, &context, (size_t)((tiles + per_task - 1) / per_task), 0);
}
