#include "spotter_kernels.h"
#include "tiles.h"

#include <immintrin.h>
#include <string.h>

// Debian's XNNPACK (2022) keeps one accumulator of its AVX2 float GEMMs on the stack, so every step
// of the inner loop waits for a store to reach the next load; this kernel keeps all of them in
// registers: 6 pixels x 16 channels (12 accumulators, 2 weight vectors, 1 broadcast). The inner loop
// runs along a whole filter row (k_w * in_c floats, 15 for a 5x5 filter on RGB) where it can.
// With AVX-512 a block of 16 channels is one vector: 6 accumulators, half the FMAs per step.
#define TARGET __attribute__((target("avx2,fma")))
#define TARGET_512 __attribute__((target("avx2,fma,avx512f")))
#define MR 6
#define NR 16

int spotter_has_avx2_fma(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int32_t taps(const spotter_conv_f32* c) { return c->k_h * c->k_w; }

/// Width of the block starting at channel n0: 16, or 8 for a last block of at most 8 channels.
static int32_t block_width(const spotter_conv_f32* c, int32_t n0) { return c->out_c - n0 > 8 ? NR : 8; }

size_t spotter_conv_f32_packed_count(const spotter_conv_f32* c) {
    const size_t k = (size_t)taps(c) * (size_t)c->in_c;
    size_t total = 0;
    for (int32_t n0 = 0; n0 < c->out_c; n0 += NR) total += (size_t)block_width(c, n0) * (1 + k);
    return total;
}

void spotter_conv_f32_pack(const spotter_conv_f32* c, const float* weights, const float* bias, float* packed) {
    const size_t k = (size_t)taps(c) * (size_t)c->in_c;
    for (int32_t n0 = 0; n0 < c->out_c; n0 += NR) {
        const int32_t width = block_width(c, n0);
        float* block = packed + (size_t)n0 * (1 + k);
        memset(block, 0, sizeof(float) * (size_t)width * (1 + k));
        for (int32_t lane = 0; lane < width && n0 + lane < c->out_c; lane++) {
            const int32_t n = n0 + lane;
            block[lane] = bias ? bias[n] : 0;
            for (size_t kk = 0; kk < k; kk++) block[(1 + kk) * (size_t)width + (size_t)lane] = weights[(size_t)n * k + kk];
        }
    }
}

/// The PReLU of one block of channels (alpha NULL: none), padded so a whole block can be read.
typedef struct {
    const float* alpha;
    const float* scale;
    float lo, hi;
} prelu_at;

static prelu_at prelu_for_block(const spotter_conv_f32* c, int32_t n0) {
    prelu_at p = {NULL, NULL, c->prelu_min, c->prelu_max};
    if (c->prelu_alpha) { p.alpha = c->prelu_alpha + n0; p.scale = c->prelu_scale + n0; }
    return p;
}

/// spotter_prelu_f32's operations on 8 values: clamp(max(v, 0) + ((v - |v|) * a) * s).
TARGET static inline __m256 prelu8(__m256 v, const float* a, const float* s, __m256 lo, __m256 hi) {
    const __m256 negative = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(v, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)), _mm256_loadu_ps(a)),
                                          _mm256_loadu_ps(s));
    return _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(_mm256_max_ps(v, _mm256_setzero_ps()), negative), lo), hi);
}

/// The same on 16 values.
TARGET_512 static inline __m512 prelu16(__m512 v, __m512 a, __m512 s, __m512 lo, __m512 hi) {
    const __m512 magnitude = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
    const __m512 negative = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(v, magnitude), a), s);
    return _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(_mm512_max_ps(v, _mm512_setzero_ps()), negative), lo), hi);
}

/// Clamps, applies the PReLU if any, and stores one row of `W` channels (`valid` of them) from
/// accumulators `v0`, `v1`.
TARGET static inline void store_row(float* out, int32_t W, int32_t valid, __m256 v0, __m256 v1, __m256 lo, __m256 hi,
                                    const prelu_at* p) {
    float lane[NR];
    float* dst = valid == W ? out : lane;
    v0 = _mm256_min_ps(_mm256_max_ps(v0, lo), hi);
    v1 = _mm256_min_ps(_mm256_max_ps(v1, lo), hi);
    if (p->alpha) {
        const __m256 plo = _mm256_set1_ps(p->lo), phi = _mm256_set1_ps(p->hi);
        v0 = prelu8(v0, p->alpha, p->scale, plo, phi);
        if (W == NR) v1 = prelu8(v1, p->alpha + 8, p->scale + 8, plo, phi);
    }
    _mm256_storeu_ps(dst, v0);
    if (W == NR) _mm256_storeu_ps(dst + 8, v1);
    if (valid < W) memcpy(out, lane, sizeof(float) * (size_t)valid);
}

/// One tile of up to MR pixels and one block of `W` channels (16 or 8, `remaining` of them real):
/// 6 x 2 (or 6 x 1) accumulators in named variables, which the compiler keeps in registers. `rows`
/// holds, for each segment, MR pointers to `length` floats of the pixels' input (or to zeros);
/// output rows are `out_c` apart.
TARGET static inline __attribute__((always_inline)) void tile(int32_t W, const float* const* rows, int32_t segments, int32_t length,
                               const float* block, float* out, int32_t count, int32_t remaining, int32_t out_c,
                               __m256 lo, __m256 hi, prelu_at p) {
    const __m256 b0 = _mm256_loadu_ps(block), b1 = W == NR ? _mm256_loadu_ps(block + 8) : b0;
    __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1;
    __m256 c30 = b0, c31 = b1, c40 = b0, c41 = b1, c50 = b0, c51 = b1;
    const float* w = block + W;
    for (int32_t t = 0; t < segments; t++, rows += MR) {
        const float *a0 = rows[0], *a1 = rows[1], *a2 = rows[2], *a3 = rows[3], *a4 = rows[4], *a5 = rows[5];
        if (W == NR) {
            for (int32_t ci = 0; ci < length; ci++, w += NR) {
                const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
                __m256 x = _mm256_broadcast_ss(a0 + ci);
                c00 = _mm256_fmadd_ps(x, w0, c00); c01 = _mm256_fmadd_ps(x, w1, c01);
                x = _mm256_broadcast_ss(a1 + ci);
                c10 = _mm256_fmadd_ps(x, w0, c10); c11 = _mm256_fmadd_ps(x, w1, c11);
                x = _mm256_broadcast_ss(a2 + ci);
                c20 = _mm256_fmadd_ps(x, w0, c20); c21 = _mm256_fmadd_ps(x, w1, c21);
                x = _mm256_broadcast_ss(a3 + ci);
                c30 = _mm256_fmadd_ps(x, w0, c30); c31 = _mm256_fmadd_ps(x, w1, c31);
                x = _mm256_broadcast_ss(a4 + ci);
                c40 = _mm256_fmadd_ps(x, w0, c40); c41 = _mm256_fmadd_ps(x, w1, c41);
                x = _mm256_broadcast_ss(a5 + ci);
                c50 = _mm256_fmadd_ps(x, w0, c50); c51 = _mm256_fmadd_ps(x, w1, c51);
            }
        } else {
            for (int32_t ci = 0; ci < length; ci++, w += 8) {
                const __m256 w0 = _mm256_loadu_ps(w);
                c00 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + ci), w0, c00);
                c10 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + ci), w0, c10);
                c20 = _mm256_fmadd_ps(_mm256_broadcast_ss(a2 + ci), w0, c20);
                c30 = _mm256_fmadd_ps(_mm256_broadcast_ss(a3 + ci), w0, c30);
                c40 = _mm256_fmadd_ps(_mm256_broadcast_ss(a4 + ci), w0, c40);
                c50 = _mm256_fmadd_ps(_mm256_broadcast_ss(a5 + ci), w0, c50);
            }
        }
    }
    const int32_t valid = remaining < W ? remaining : W;
    const size_t stride = (size_t)out_c;
    store_row(out, W, valid, c00, c01, lo, hi, &p);
    if (count > 1) store_row(out + stride, W, valid, c10, c11, lo, hi, &p);
    if (count > 2) store_row(out + 2 * stride, W, valid, c20, c21, lo, hi, &p);
    if (count > 3) store_row(out + 3 * stride, W, valid, c30, c31, lo, hi, &p);
    if (count > 4) store_row(out + 4 * stride, W, valid, c40, c41, lo, hi, &p);
    if (count > 5) store_row(out + 5 * stride, W, valid, c50, c51, lo, hi, &p);
}

/// Clamps (then the PReLU, if any) and stores `count` rows of one block of 16 channels (`remaining`
/// of them real, if fewer), rows `out_c` apart.
TARGET_512 static inline __attribute__((always_inline)) void store_tile512(const __m512* rows_out, float* out, int32_t count, int32_t remaining,
                                                                         int32_t out_c, __m256 lo8, __m256 hi8, prelu_at p) {
    const __m512 lo = _mm512_set1_ps(_mm256_cvtss_f32(lo8)), hi = _mm512_set1_ps(_mm256_cvtss_f32(hi8));
    const __mmask16 mask = remaining >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1);
    const size_t stride = (size_t)out_c;
    if (p.alpha) {
        const __m512 a = _mm512_loadu_ps(p.alpha), s = _mm512_loadu_ps(p.scale), plo = _mm512_set1_ps(p.lo), phi = _mm512_set1_ps(p.hi);
        for (int32_t m = 0; m < count; m++) {
            _mm512_mask_storeu_ps(out + (size_t)m * stride, mask, prelu16(_mm512_min_ps(_mm512_max_ps(rows_out[m], lo), hi), a, s, plo, phi));
        }
        return;
    }
    for (int32_t m = 0; m < count; m++) {
        _mm512_mask_storeu_ps(out + (size_t)m * stride, mask, _mm512_min_ps(_mm512_max_ps(rows_out[m], lo), hi));
    }
}

/// `tile` for a block of 16 channels with one AVX-512 vector per pixel: the same products added in
/// the same order, so the same floats.
TARGET_512 static inline __attribute__((always_inline)) void tile512(const float* const* rows, int32_t segments, int32_t length, const float* block,
                                      float* out, int32_t count, int32_t remaining, int32_t out_c, __m256 lo8, __m256 hi8,
                                      prelu_at p) {
    const __m512 b = _mm512_loadu_ps(block);
    __m512 c0 = b, c1 = b, c2 = b, c3 = b, c4 = b, c5 = b;
    const float* w = block + NR;
    for (int32_t t = 0; t < segments; t++, rows += MR) {
        const float *a0 = rows[0], *a1 = rows[1], *a2 = rows[2], *a3 = rows[3], *a4 = rows[4], *a5 = rows[5];
        for (int32_t ci = 0; ci < length; ci++, w += NR) {
            const __m512 w0 = _mm512_loadu_ps(w);
            c0 = _mm512_fmadd_ps(_mm512_set1_ps(a0[ci]), w0, c0);
            c1 = _mm512_fmadd_ps(_mm512_set1_ps(a1[ci]), w0, c1);
            c2 = _mm512_fmadd_ps(_mm512_set1_ps(a2[ci]), w0, c2);
            c3 = _mm512_fmadd_ps(_mm512_set1_ps(a3[ci]), w0, c3);
            c4 = _mm512_fmadd_ps(_mm512_set1_ps(a4[ci]), w0, c4);
            c5 = _mm512_fmadd_ps(_mm512_set1_ps(a5[ci]), w0, c5);
        }
    }
    const __m512 rows_out[MR] = {c0, c1, c2, c3, c4, c5};
    store_tile512(rows_out, out, count, remaining, out_c, lo8, hi8, p);
}

/// Clamps (then the PReLU, if any) and stores `count` rows of two blocks of 16 channels
/// (`remaining` real from the first block's start), rows `out_c` apart.
TARGET_512 static inline __attribute__((always_inline)) void store_tile512x2(const __m512* rows_a, const __m512* rows_b, float* out, int32_t count,
                                                                           int32_t remaining, int32_t out_c, __m256 lo8, __m256 hi8, prelu_at p) {
    const __m512 lo = _mm512_set1_ps(_mm256_cvtss_f32(lo8)), hi = _mm512_set1_ps(_mm256_cvtss_f32(hi8));
    const int32_t second = remaining - NR;
    const __mmask16 mask = second >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << second) - 1);
    const size_t stride = (size_t)out_c;
    if (p.alpha) {
        const __m512 pa = _mm512_loadu_ps(p.alpha), sa = _mm512_loadu_ps(p.scale);
        const __m512 pb = _mm512_loadu_ps(p.alpha + NR), sb = _mm512_loadu_ps(p.scale + NR);
        const __m512 plo = _mm512_set1_ps(p.lo), phi = _mm512_set1_ps(p.hi);
        for (int32_t m = 0; m < count; m++) {
            _mm512_storeu_ps(out + (size_t)m * stride, prelu16(_mm512_min_ps(_mm512_max_ps(rows_a[m], lo), hi), pa, sa, plo, phi));
            _mm512_mask_storeu_ps(out + (size_t)m * stride + NR, mask,
                                  prelu16(_mm512_min_ps(_mm512_max_ps(rows_b[m], lo), hi), pb, sb, plo, phi));
        }
        return;
    }
    for (int32_t m = 0; m < count; m++) {
        _mm512_storeu_ps(out + (size_t)m * stride, _mm512_min_ps(_mm512_max_ps(rows_a[m], lo), hi));
        _mm512_mask_storeu_ps(out + (size_t)m * stride + NR, mask, _mm512_min_ps(_mm512_max_ps(rows_b[m], lo), hi));
    }
}

/// Two consecutive blocks, the first of 16 channels, the second of `width_b` (16, or 8 for a last
/// block of at most 8 channels; `remaining` channels from the first block's start, over 16): 12
/// accumulators, enough independent FMAs to cover their latency; each block's products in
/// `tile512`'s (and an 8-wide block's in `tile`'s) order.
TARGET_512 static inline __attribute__((always_inline)) void tile512x2(const float* const* rows, int32_t segments, int32_t length, const float* block_a,
                                        const float* block_b, int32_t width_b, float* out, int32_t count, int32_t remaining,
                                        int32_t out_c, __m256 lo8, __m256 hi8, prelu_at p) {
    // The second block is 16 or 8 channels wide (a last block of at most 8); 8 are read masked.
    const __mmask16 lanes_b = width_b == NR ? (__mmask16)0xFFFF : (__mmask16)0xFF;
    const __m512 ba = _mm512_loadu_ps(block_a), bb = _mm512_maskz_loadu_ps(lanes_b, block_b);
    __m512 a0 = ba, a1 = ba, a2 = ba, a3 = ba, a4 = ba, a5 = ba;
    __m512 b0 = bb, b1 = bb, b2 = bb, b3 = bb, b4 = bb, b5 = bb;
    const float *wa = block_a + NR, *wb = block_b + width_b;
    for (int32_t t = 0; t < segments; t++, rows += MR) {
        const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3], *x4 = rows[4], *x5 = rows[5];
        for (int32_t ci = 0; ci < length; ci++, wa += NR, wb += width_b) {
            const __m512 va = _mm512_loadu_ps(wa), vb = _mm512_maskz_loadu_ps(lanes_b, wb);
            __m512 x = _mm512_set1_ps(x0[ci]);
            a0 = _mm512_fmadd_ps(x, va, a0); b0 = _mm512_fmadd_ps(x, vb, b0);
            x = _mm512_set1_ps(x1[ci]);
            a1 = _mm512_fmadd_ps(x, va, a1); b1 = _mm512_fmadd_ps(x, vb, b1);
            x = _mm512_set1_ps(x2[ci]);
            a2 = _mm512_fmadd_ps(x, va, a2); b2 = _mm512_fmadd_ps(x, vb, b2);
            x = _mm512_set1_ps(x3[ci]);
            a3 = _mm512_fmadd_ps(x, va, a3); b3 = _mm512_fmadd_ps(x, vb, b3);
            x = _mm512_set1_ps(x4[ci]);
            a4 = _mm512_fmadd_ps(x, va, a4); b4 = _mm512_fmadd_ps(x, vb, b4);
            x = _mm512_set1_ps(x5[ci]);
            a5 = _mm512_fmadd_ps(x, va, a5); b5 = _mm512_fmadd_ps(x, vb, b5);
        }
    }
    const __m512 rows_a[MR] = {a0, a1, a2, a3, a4, a5}, rows_b[MR] = {b0, b1, b2, b3, b4, b5};
    store_tile512x2(rows_a, rows_b, out, count, remaining, out_c, lo8, hi8, p);
}

/// Clamps (then the PReLU, if any) and stores `count` rows of a block of 16 channels and one of 8
/// (`remaining` real from the first block's start), rows `out_c` apart.
TARGET_512 static inline __attribute__((always_inline)) void store_tile512x8(const __m512* rows_a, const __m256* rows_b, float* out, int32_t count,
                                                                           int32_t remaining, int32_t out_c, __m256 lo8, __m256 hi8, prelu_at p) {
    const __m512 lo = _mm512_set1_ps(_mm256_cvtss_f32(lo8)), hi = _mm512_set1_ps(_mm256_cvtss_f32(hi8));
    const int32_t second = remaining - NR;
    const size_t stride = (size_t)out_c;
    for (int32_t m = 0; m < count; m++) {
        __m512 va = _mm512_min_ps(_mm512_max_ps(rows_a[m], lo), hi);
        __m256 vb = _mm256_min_ps(_mm256_max_ps(rows_b[m], lo8), hi8);
        if (p.alpha) {
            const __m512 plo = _mm512_set1_ps(p.lo), phi = _mm512_set1_ps(p.hi);
            va = prelu16(va, _mm512_loadu_ps(p.alpha), _mm512_loadu_ps(p.scale), plo, phi);
            vb = prelu8(vb, p.alpha + NR, p.scale + NR, _mm256_set1_ps(p.lo), _mm256_set1_ps(p.hi));
        }
        _mm512_storeu_ps(out + (size_t)m * stride, va);
        if (second >= 8) {
            _mm256_storeu_ps(out + (size_t)m * stride + NR, vb);
        } else {
            float lane[8];
            _mm256_storeu_ps(lane, vb);
            memcpy(out + (size_t)m * stride + NR, lane, sizeof(float) * (size_t)second);
        }
    }
}

/// `tile512x2` when the second block is 8 channels wide (24, 40, 56... channels): that block's
/// accumulators are 256-bit, so no FMA works on 8 lanes that are thrown away (on CPUs that split
/// 512-bit operations in two, such as AMD's Zen 4, a masked half costs as much as a full one).
/// Each lane's products are added in the same order, so the same floats.
TARGET_512 static inline __attribute__((always_inline)) void tile512x8(const float* const* rows, int32_t segments, int32_t length, const float* block_a,
                                        const float* block_b, float* out, int32_t count, int32_t remaining, int32_t out_c,
                                        __m256 lo8, __m256 hi8, prelu_at p) {
    const __m512 ba = _mm512_loadu_ps(block_a);
    const __m256 bb = _mm256_loadu_ps(block_b);
    __m512 a0 = ba, a1 = ba, a2 = ba, a3 = ba, a4 = ba, a5 = ba;
    __m256 b0 = bb, b1 = bb, b2 = bb, b3 = bb, b4 = bb, b5 = bb;
    const float *wa = block_a + NR, *wb = block_b + 8;
    for (int32_t t = 0; t < segments; t++, rows += MR) {
        const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3], *x4 = rows[4], *x5 = rows[5];
        for (int32_t ci = 0; ci < length; ci++, wa += NR, wb += 8) {
            const __m512 va = _mm512_loadu_ps(wa);
            const __m256 vb = _mm256_loadu_ps(wb);
            __m512 x = _mm512_set1_ps(x0[ci]);
            a0 = _mm512_fmadd_ps(x, va, a0); b0 = _mm256_fmadd_ps(_mm512_castps512_ps256(x), vb, b0);
            x = _mm512_set1_ps(x1[ci]);
            a1 = _mm512_fmadd_ps(x, va, a1); b1 = _mm256_fmadd_ps(_mm512_castps512_ps256(x), vb, b1);
            x = _mm512_set1_ps(x2[ci]);
            a2 = _mm512_fmadd_ps(x, va, a2); b2 = _mm256_fmadd_ps(_mm512_castps512_ps256(x), vb, b2);
            x = _mm512_set1_ps(x3[ci]);
            a3 = _mm512_fmadd_ps(x, va, a3); b3 = _mm256_fmadd_ps(_mm512_castps512_ps256(x), vb, b3);
            x = _mm512_set1_ps(x4[ci]);
            a4 = _mm512_fmadd_ps(x, va, a4); b4 = _mm256_fmadd_ps(_mm512_castps512_ps256(x), vb, b4);
            x = _mm512_set1_ps(x5[ci]);
            a5 = _mm512_fmadd_ps(x, va, a5); b5 = _mm256_fmadd_ps(_mm512_castps512_ps256(x), vb, b5);
        }
    }
    const __m512 rows_a[MR] = {a0, a1, a2, a3, a4, a5};
    const __m256 rows_b[MR] = {b0, b1, b2, b3, b4, b5};
    store_tile512x8(rows_a, rows_b, out, count, remaining, out_c, lo8, hi8, p);
}

typedef struct {
    const spotter_conv_f32* conv;
    const float* input;
    float* output;
    int32_t pixels;          ///< batches * out_h * out_w
    int32_t tiles_per_task;
} task_f32;

/// With dilation 1 along x, the k_w taps of one filter row read k_w * in_c consecutive floats, so a
/// "segment" is a whole filter row (k_h segments); otherwise a segment is one tap (in_c floats).
/// The packed weights are in the same order either way.
static int32_t segment_length(const spotter_conv_f32* c) { return c->dil_w == 1 ? c->k_w * c->in_c : c->in_c; }
static int32_t segment_count(const spotter_conv_f32* c) { return c->dil_w == 1 ? c->k_h : taps(c); }

/// A 1x1 filter, stride 1, no padding: output pixel p reads input pixel p.
static int is_pointwise(const spotter_conv_f32* c) {
    return c->k_h == 1 && c->k_w == 1 && c->stride_h == 1 && c->stride_w == 1 && c->pad_top == 0 && c->pad_left == 0 &&
           c->in_h == c->out_h && c->in_w == c->out_w;
}

/// Points `rows` (segment-major, MR per segment) at the input of output pixels [p0, p0 + count):
/// into the input, at zeros when a segment is all padding, or at a copy in `border` with zeros
/// where a filter row hangs over the left or right edge. Pixels past `count` repeat the last one.
static void gather_rows(const spotter_conv_f32* c, const float* input, int32_t p0, int32_t count,
                        const float** rows, float* border) {
    const int32_t plane = c->out_h * c->out_w, length = segment_length(c);
    if (is_pointwise(c)) {
        for (int m = 0; m < MR; m++) rows[m] = input + (size_t)(p0 + (m < count ? m : count - 1)) * (size_t)c->in_c;
        return;
    }
    // Coordinates of p0, then stepped pixel by pixel (no division per pixel).
    int32_t b = p0 / plane, oy = (p0 % plane) / c->out_w, ox = p0 % c->out_w;
    const int32_t x_first = ox * c->stride_w - c->pad_left, x_last = (ox + count - 1) * c->stride_w - c->pad_left;
    if (c->dil_w == 1 && ox + count <= c->out_w && x_first >= 0 && x_last + c->k_w <= c->in_w) {
        // The tile's pixels share an output row and their filter rows lie inside the input rows:
        // for each filter row, pointers a stride apart (or all at zeros, in the padding).
        const int32_t y0 = oy * c->stride_h - c->pad_top;
        const size_t step = (size_t)c->stride_w * (size_t)c->in_c;
        for (int32_t ky = 0; ky < c->k_h; ky++) {
            const int32_t y = y0 + ky * c->dil_h;
            const float* start = input + (((size_t)b * c->in_h + (size_t)(y < 0 ? 0 : y)) * c->in_w + (size_t)x_first) * c->in_c;
            for (int m = 0; m < MR; m++) {
                rows[ky * MR + m] = y < 0 || y >= c->in_h ? c->zero : start + (size_t)(m < count ? m : count - 1) * step;
            }
        }
        return;
    }
    for (int m = 0; m < MR; m++) {
        if (m > 0 && m < count && ++ox == c->out_w) {
            ox = 0;
            if (++oy == c->out_h) { oy = 0; b++; }
        }
        const int32_t y0 = oy * c->stride_h - c->pad_top, x0 = ox * c->stride_w - c->pad_left;
        for (int32_t ky = 0, t = 0; ky < c->k_h; ky++) {
            const int32_t y = y0 + ky * c->dil_h;
            const float* line = input + ((size_t)b * c->in_h + (size_t)(y < 0 ? 0 : y)) * c->in_w * c->in_c;
            if (c->dil_w == 1) {
                if (y < 0 || y >= c->in_h) {
                    rows[t * MR + m] = c->zero;
                } else if (x0 >= 0 && x0 + c->k_w <= c->in_w) {
                    rows[t * MR + m] = line + (size_t)x0 * c->in_c;
                } else {
                    float* dst = border + ((size_t)m * c->k_h + (size_t)ky) * (size_t)length;
                    for (int32_t kx = 0; kx < c->k_w; kx++) {
                        const int32_t x = x0 + kx;
                        for (int32_t ci = 0; ci < c->in_c; ci++) {
                            dst[kx * c->in_c + ci] = x < 0 || x >= c->in_w ? 0 : line[(size_t)x * c->in_c + ci];
                        }
                    }
                    rows[t * MR + m] = dst;
                }
                t++;
                continue;
            }
            for (int32_t kx = 0; kx < c->k_w; kx++, t++) {
                const int32_t x = x0 + kx * c->dil_w;
                rows[t * MR + m] = (y < 0 || y >= c->in_h || x < 0 || x >= c->in_w) ? c->zero : line + (size_t)x * c->in_c;
            }
        }
    }
}

/// A task's tiles: every block of channels over each tile of pixels. `WIDE_TILES` runs the block of
/// 16 at n0 (or it and the next) and adds the channels it covered to n0.
#define CONV_F32_TASK(NAME, ATTRIBUTES, WIDE_TILES)                                                          \
    ATTRIBUTES static void NAME(void* opaque, size_t task) {                                                 \
        const task_f32* t = (const task_f32*)opaque;                                                         \
        const spotter_conv_f32* c = t->conv;                                                                 \
        const size_t k = (size_t)taps(c) * (size_t)c->in_c;                                                  \
        const int32_t segments = segment_count(c), length = segment_length(c);                               \
        const __m256 lo = _mm256_set1_ps(c->out_min), hi = _mm256_set1_ps(c->out_max);                       \
        const float* rows[segments * MR];                                                                    \
        float border[c->dil_w == 1 ? MR * k : 1];                                                            \
        int32_t first, last;                                                                                 \
        /* 1x1 layers read input rows directly: no call per tile. */                                         \
        const int pointwise = is_pointwise(c);                                                               \
        spotter_task_pixels(task, t->tiles_per_task, MR, t->pixels, &first, &last);                          \
        for (int32_t p0 = first; p0 < last; p0 += MR) {                                                      \
            const int32_t count = last - p0 < MR ? last - p0 : MR;                                           \
            if (pointwise) {                                                                                 \
                for (int m = 0; m < MR; m++) rows[m] = t->input + (size_t)(p0 + (m < count ? m : count - 1)) * c->in_c; \
            } else {                                                                                         \
                gather_rows(c, t->input, p0, count, rows, border);                                           \
            }                                                                                                \
            float* out = t->output + (size_t)p0 * c->out_c;                                                  \
            for (int32_t n0 = 0; n0 < c->out_c;) {                                                           \
                const float* block = c->packed + (size_t)n0 * (1 + k);                                       \
                if (block_width(c, n0) == NR) {                                                              \
                    WIDE_TILES;                                                                              \
                } else {                                                                                     \
                    tile(8, rows, segments, length, block, out + n0, count, c->out_c - n0, c->out_c, lo, hi,     \
                         prelu_for_block(c, n0));                                                            \
                    n0 += NR;                                                                                \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }

CONV_F32_TASK(conv_f32_task, TARGET,
              tile(NR, rows, segments, length, block, out + n0, count, c->out_c - n0, c->out_c, lo, hi, prelu_for_block(c, n0));
              n0 += NR)
// Two blocks at a time where there is a second (16 wide, or 8 for a last block of at most 8).
CONV_F32_TASK(conv_f32_task_512, TARGET_512,
              if (c->out_c - n0 > NR && block_width(c, n0 + NR) == 8) {
                  tile512x8(rows, segments, length, block, block + (size_t)NR * (1 + k), out + n0, count, c->out_c - n0,
                            c->out_c, lo, hi, prelu_for_block(c, n0));
                  n0 += 2 * NR;
              } else if (c->out_c - n0 > NR) {
                  tile512x2(rows, segments, length, block, block + (size_t)NR * (1 + k), block_width(c, n0 + NR), out + n0,
                            count, c->out_c - n0, c->out_c, lo, hi, prelu_for_block(c, n0));
                  n0 += 2 * NR;
              } else {
                  tile512(rows, segments, length, block, out + n0, count, c->out_c - n0, c->out_c, lo, hi, prelu_for_block(c, n0));
                  n0 += NR;
              })

// ---- bfloat16 products (spotter_conv_f32.packed_bf16) ----
//
// The same tiles, but each pair of products is one lane of `vdpbf16ps`: inputs rounded to bfloat16
// (once per run, or per tile for a 1x1 layer), times weights rounded at load, summed in float32; a
// segment of odd length ends with its last value paired with a zero. Twice the products per
// instruction of float FMAs, with inputs and weights kept to 8 significant bits: OpenVINO's
// default on CPUs with these instructions, opt-in here.
#define TARGET_BF16 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")))

int spotter_has_avx512_bf16(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
}

/// Pairs of products per segment: a segment of odd length ends with a zero pair half.
static int32_t segment_pairs(const spotter_conv_f32* c) { return (segment_length(c) + 1) / 2; }

/// uint16s of one block of channels per channel: its bias (a float, two halves), then its pairs.
static size_t bf16_block_stride(const spotter_conv_f32* c) { return 2 + 2 * (size_t)segment_count(c) * (size_t)segment_pairs(c); }

/// Blocks go in pairs, the first always 16 wide, the second 8 wide when at most 8 channels remain.
static int32_t bf16_block_width(const spotter_conv_f32* c, int32_t n0) { return n0 % (2 * NR) == NR ? block_width(c, n0) : NR; }

size_t spotter_conv_bf16_packed_count(const spotter_conv_f32* c) {
    size_t total = 0;
    for (int32_t n0 = 0; n0 < c->out_c; n0 += NR) total += (size_t)bf16_block_width(c, n0) * bf16_block_stride(c);
    return total;
}

/// A float rounded to the nearest bfloat16 (ties to even), as `vcvtneps2bf16` rounds.
static uint16_t bfloat16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
    if ((bits & 0x7f800000u) == 0) bits &= 0x80000000u;      // subnormals become zeros, as the instruction does
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

void spotter_conv_bf16_pack(const spotter_conv_f32* c, const float* weights, const float* bias, uint16_t* packed) {
    const size_t k = (size_t)taps(c) * (size_t)c->in_c;
    const int32_t segments = segment_count(c), length = segment_length(c), pairs = segment_pairs(c);
    for (int32_t n0 = 0; n0 < c->out_c; n0 += NR) {
        const int32_t width = bf16_block_width(c, n0);
        uint16_t* block = packed + (size_t)n0 * bf16_block_stride(c);
        memset(block, 0, sizeof(uint16_t) * (size_t)width * bf16_block_stride(c));
        for (int32_t lane = 0; lane < width && n0 + lane < c->out_c; lane++) {
            const int32_t n = n0 + lane;
            const float b = bias ? bias[n] : 0;
            memcpy(block + 2 * lane, &b, sizeof b);
            for (int32_t t = 0; t < segments; t++) {
                for (int32_t j = 0; j < length; j++) {
                    const size_t pair = (size_t)t * (size_t)pairs + (size_t)(j / 2);
                    block[2 * (size_t)width + (pair * (size_t)width + (size_t)lane) * 2 + (size_t)(j & 1)] =
                        bfloat16(weights[(size_t)n * k + (size_t)t * (size_t)length + (size_t)j]);
                }
            }
        }
    }
}

/// Rounds `length` floats to bfloat16 into `out`, then zeros up to `padded` (at least `length`).
TARGET_BF16 static inline void round_row(const float* in, int32_t length, int32_t padded, uint16_t* out) {
    for (int32_t i = 0; i < padded; i += NR) {
        const int32_t left = length - i, room = padded - i;
        const __mmask16 load = left >= NR ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const __mmask16 store = room >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << room) - 1);
        const __m256bh half = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(load, in + i));
        _mm256_mask_storeu_epi16(out + i, store, (__m256i)half);
    }
}

/// The bfloat16 pair at `x` broadcast to every lane.
TARGET_BF16 static inline __m512bh pair_at(const uint16_t* x) {
    int32_t bits;
    memcpy(&bits, x, sizeof bits);
    return (__m512bh)_mm512_set1_epi32(bits);
}

/// A block of 16 channels and a second of `width_b` (0: none, `block_b` unread; 8 or 16) over up to MR pixels:
/// `rows` holds, for each segment, MR pointers to `length` rounded inputs. An odd length's last
/// value is paired with a zero (never with what follows it, which may be another pixel's).
TARGET_BF16 static inline __attribute__((always_inline)) void tile_bf16(int32_t width_b, const uint16_t* const* rows, int32_t segments,
                                                                      int32_t length, const uint16_t* block_a, const uint16_t* block_b,
                                                                      float* out, int32_t count, int32_t remaining, int32_t out_c,
                                                                      __m256 lo8, __m256 hi8, prelu_at p) {
    const __m512 ba = _mm512_loadu_ps((const float*)block_a);
    const __m512 bb = width_b == NR ? _mm512_loadu_ps((const float*)block_b) : _mm512_setzero_ps();
    const __m256 bh = width_b == 8 ? _mm256_loadu_ps((const float*)block_b) : _mm256_setzero_ps();
    __m512 a0 = ba, a1 = ba, a2 = ba, a3 = ba, a4 = ba, a5 = ba;
    __m512 b0 = bb, b1 = bb, b2 = bb, b3 = bb, b4 = bb, b5 = bb;
    __m256 h0 = bh, h1 = bh, h2 = bh, h3 = bh, h4 = bh, h5 = bh;
    const uint16_t *wa = block_a + 2 * NR, *wb = block_b + 2 * width_b;
#define BF16_STEP(V, A, B, H)                                                                                    \
    {                                                                                                            \
        const __m512bh v = V;                                                                                    \
        A = _mm512_dpbf16_ps(A, v, va);                                                                          \
        if (width_b == NR) B = _mm512_dpbf16_ps(B, v, (__m512bh)_mm512_loadu_si512(wb));                         \
        if (width_b == 8) H = _mm256_dpbf16_ps(H, (__m256bh)_mm512_castsi512_si256((__m512i)v), (__m256bh)_mm256_loadu_si256((const __m256i*)wb)); \
    }
#define BF16_PAIRS(PAIR)                                                                                         \
    BF16_STEP(PAIR(x0), a0, b0, h0) BF16_STEP(PAIR(x1), a1, b1, h1) BF16_STEP(PAIR(x2), a2, b2, h2)              \
    BF16_STEP(PAIR(x3), a3, b3, h3) BF16_STEP(PAIR(x4), a4, b4, h4) BF16_STEP(PAIR(x5), a5, b5, h5)
#define FULL_PAIR(X) pair_at(X + i)
#define LAST_ALONE(X) ((__m512bh)_mm512_set1_epi32((int32_t)X[length - 1]))
    for (int32_t t = 0; t < segments; t++, rows += MR) {
        const uint16_t *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3], *x4 = rows[4], *x5 = rows[5];
        int32_t i = 0;
        for (; i + 1 < length; i += 2, wa += 2 * NR, wb += 2 * width_b) {
            const __m512bh va = (__m512bh)_mm512_loadu_si512(wa);
            BF16_PAIRS(FULL_PAIR)
        }
        if (i < length) {
            const __m512bh va = (__m512bh)_mm512_loadu_si512(wa);
            BF16_PAIRS(LAST_ALONE)
            wa += 2 * NR;
            wb += 2 * width_b;
        }
    }
#undef LAST_ALONE
#undef FULL_PAIR
#undef BF16_PAIRS
#undef BF16_STEP
    const __m512 rows_a[MR] = {a0, a1, a2, a3, a4, a5};
    if (width_b == NR) {
        const __m512 rows_b[MR] = {b0, b1, b2, b3, b4, b5};
        store_tile512x2(rows_a, rows_b, out, count, remaining, out_c, lo8, hi8, p);
    } else if (width_b == 8) {
        const __m256 rows_h[MR] = {h0, h1, h2, h3, h4, h5};
        store_tile512x8(rows_a, rows_h, out, count, remaining, out_c, lo8, hi8, p);
    } else {
        store_tile512(rows_a, out, count, remaining, out_c, lo8, hi8, p);
    }
}

typedef struct {
    const float* input;
    uint16_t* output;
    size_t count;
} rounding_task;

/// Rounds one span of 64 KiB of floats.
TARGET_BF16 static void round_span(void* opaque, size_t start, size_t count) {
    const rounding_task* t = (const rounding_task*)opaque;
    round_row(t->input + start, (int32_t)count, (int32_t)count, t->output + start);
}

/// A task's tiles: every pair of blocks of channels over each tile of pixels. The rows are pointers
/// into the rounded input (a 1x1 layer's MR pixels rounded here, as one run of floats), or into
/// this tile's rounded copies of the rows the float gather made (zeros, or a filter row hanging over
/// an edge).
TARGET_BF16 static void conv_bf16_task(void* opaque, size_t task) {
    const task_f32* t = (const task_f32*)opaque;
    const spotter_conv_f32* c = t->conv;
    const size_t k = (size_t)taps(c) * (size_t)c->in_c;
    const int32_t segments = segment_count(c), length = segment_length(c), pairs = segment_pairs(c);
    const size_t stride = bf16_block_stride(c), padded = 2 * (size_t)pairs;
    const __m256 lo = _mm256_set1_ps(c->out_min), hi = _mm256_set1_ps(c->out_max);
    const float* rows[segments * MR];
    const uint16_t* rounded_rows[segments * MR];
    float border[c->dil_w == 1 ? MR * k : 1];
    uint16_t copies[(size_t)segments * MR * padded];
    const int pointwise = is_pointwise(c);
    const uintptr_t begin = (uintptr_t)t->input, end = (uintptr_t)(t->input + spotter_conv_bf16_rounded_count(c));
    int32_t first, last;
    spotter_task_pixels(task, t->tiles_per_task, MR, t->pixels, &first, &last);
    for (int32_t p0 = first; p0 < last; p0 += MR) {
        const int32_t count = last - p0 < MR ? last - p0 : MR;
        if (pointwise) {
            // MR consecutive pixels: one run of floats, rounded in one go.
            round_row(t->input + (size_t)p0 * (size_t)length, count * length, count * length, copies);
            for (int32_t m = 0; m < MR; m++) rounded_rows[m] = copies + (size_t)(m < count ? m : count - 1) * (size_t)length;
        } else {
            gather_rows(c, t->input, p0, count, rows, border);
            for (int32_t r = 0; r < segments * MR; r++) {
                const uintptr_t at = (uintptr_t)rows[r];
                if (at >= begin && at < end) {
                    rounded_rows[r] = c->rounded_input + (rows[r] - t->input);
                } else {
                    round_row(rows[r], length, (int32_t)padded, copies + (size_t)r * padded);
                    rounded_rows[r] = copies + (size_t)r * padded;
                }
            }
        }
        float* out = t->output + (size_t)p0 * c->out_c;
        for (int32_t n0 = 0; n0 < c->out_c; n0 += 2 * NR) {
            const uint16_t* block = c->packed_bf16 + (size_t)n0 * stride;
            const uint16_t* next = block + (size_t)NR * stride;
            const int32_t left = c->out_c - n0;
            if (left <= NR) {
                tile_bf16(0, rounded_rows, segments, length, block, block, out + n0, count, left, c->out_c, lo, hi, prelu_for_block(c, n0));
            } else if (bf16_block_width(c, n0 + NR) == 8) {
                tile_bf16(8, rounded_rows, segments, length, block, next, out + n0, count, left, c->out_c, lo, hi, prelu_for_block(c, n0));
            } else {
                tile_bf16(NR, rounded_rows, segments, length, block, next, out + n0, count, left, c->out_c, lo, hi, prelu_for_block(c, n0));
            }
        }
    }
}

size_t spotter_conv_bf16_rounded_count(const spotter_conv_f32* c) {
    return is_pointwise(c) ? 0 : (size_t)c->batches * (size_t)c->in_h * (size_t)c->in_w * (size_t)c->in_c;
}

void spotter_conv_f32_run(const spotter_conv_f32* conv, const float* input, float* output, pthreadpool_t pool) {
    const int32_t pixels = conv->batches * conv->out_h * conv->out_w;
    const int32_t tiles = (pixels + MR - 1) / MR;
    const int32_t per_task = spotter_tiles_per_task(tiles, pool, 8);
    task_f32 context = {conv, input, output, pixels, per_task};
    if (conv->packed_bf16 && spotter_conv_bf16_rounded_count(conv) > 0) {
        // Each input is read by several filter taps: rounded once, before the tiles.
        rounding_task rounding = {input, conv->rounded_input, spotter_conv_bf16_rounded_count(conv)};
        pthreadpool_parallelize_1d_tile_1d(pool, round_span, &rounding, rounding.count, 1 << 14, 0);
    }
    void (*run)(void*, size_t) = conv->packed_bf16 ? conv_bf16_task : spotter_has_avx512f() ? conv_f32_task_512 : conv_f32_task;
    pthreadpool_parallelize_1d(pool, run, &context, (size_t)((tiles + per_task - 1) / per_task), 0);
}
