#include "spotter_kernels.h"

#include <immintrin.h>
#include <string.h>

// A float32 depthwise convolution with one AVX-512 vector per 16 channels of a pixel. Debian's
// XNNPACK (2022) walks an indirection buffer of input pointers per output pixel and reloads the
// weights with every pixel; here a 3x3 filter's weights stay in registers along a whole output row,
// and with stride 1 each pixel loads only the input column it does not share with the one before.
#define TARGET_512 __attribute__((target("avx2,fma,avx512f")))
#define LANES 16

static int32_t blocks(const spotter_dwconv_f32* c) { return (c->channels + LANES - 1) / LANES; }

size_t spotter_dwconv_f32_packed_count(const spotter_dwconv_f32* c) {
    return (size_t)blocks(c) * LANES * (size_t)(1 + c->k_h * c->k_w);
}

void spotter_dwconv_f32_pack(const spotter_dwconv_f32* c, const float* weights, const float* bias, float* packed) {
    const int32_t taps = c->k_h * c->k_w;
    memset(packed, 0, sizeof(float) * spotter_dwconv_f32_packed_count(c));
    for (int32_t ch = 0; ch < c->channels; ch++) {
        float* block = packed + (size_t)(ch / LANES) * LANES * (size_t)(1 + taps);
        const int32_t lane = ch % LANES;
        block[lane] = bias ? bias[ch] : 0;
        for (int32_t t = 0; t < taps; t++) block[(size_t)(1 + t) * LANES + (size_t)lane] = weights[(size_t)t * (size_t)c->channels + (size_t)ch];
    }
}

/// The output of channels `c0`.. from their sums: clamped to the fused activation, then the PReLU
/// that follows, if any (spotter_prelu_f32's operations: max(v, 0) + ((v - |v|) * alpha) * scale).
TARGET_512 static inline __attribute__((always_inline)) __m512 finish(const spotter_dwconv_f32* c, __m512 acc, __m512 lo, __m512 hi,
                                                                      int32_t c0) {
    __m512 v = _mm512_min_ps(_mm512_max_ps(acc, lo), hi);
    if (!c->prelu_alpha) return v;
    const __m512 magnitude = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
    const __m512 negative = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(v, magnitude), _mm512_loadu_ps(c->prelu_alpha + c0)),
                                          _mm512_loadu_ps(c->prelu_scale + c0));
    v = _mm512_add_ps(_mm512_max_ps(v, _mm512_setzero_ps()), negative);
    return _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(c->prelu_min)), _mm512_set1_ps(c->prelu_max));
}

/// One tap of block BLOCK (0 or 1) of dw_row_3x3: filter row ROW, column KX.
#define DW_TAP(BLOCK, ROW, KX)                                                                               \
    acc##BLOCK = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m##BLOCK##KX, rows[ROW] + o##KX + BLOCK * LANES),     \
                                 w##BLOCK[ROW * 3 + KX], acc##BLOCK);
#define DW_TAPS(BLOCK)                                                                                       \
    DW_TAP(BLOCK, 0, 0) DW_TAP(BLOCK, 0, 1) DW_TAP(BLOCK, 0, 2)                                              \
    DW_TAP(BLOCK, 1, 0) DW_TAP(BLOCK, 1, 1) DW_TAP(BLOCK, 1, 2)                                              \
    DW_TAP(BLOCK, 2, 0) DW_TAP(BLOCK, 2, 1) DW_TAP(BLOCK, 2, 2)

/// Columns [from, to) and channels `c0`.. of one output row of a 3x3 filter: one block of 16 or
/// (`pair`) two, their 9 or 18 weights in registers. `rows` holds the three input rows the filter
/// reads (rows in the padding point at zeros); a tap left or right of the input is read with an
/// empty mask (from column 0).
TARGET_512 static inline __attribute__((always_inline)) void dw_row_3x3(const spotter_dwconv_f32* c, const float* const* rows,
                                                                          float* out, int32_t c0, const float* block, int pair,
                                                                          int32_t from, int32_t to) {
    const size_t C = (size_t)c->channels, block_floats = (size_t)LANES * 10;
    const int32_t left = c->channels - c0, right = left - LANES;
    const __mmask16 lanes0 = left >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    const __mmask16 lanes1 = !pair ? 0 : right >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << right) - 1);
    const __m512 lo = _mm512_set1_ps(c->out_min), hi = _mm512_set1_ps(c->out_max);
    const __m512 bias0 = _mm512_loadu_ps(block), bias1 = pair ? _mm512_loadu_ps(block + block_floats) : bias0;
    __m512 w0[9], w1[9];
    for (int t = 0; t < 9; t++) {
        w0[t] = _mm512_loadu_ps(block + (size_t)(1 + t) * LANES);
        w1[t] = pair ? _mm512_loadu_ps(block + block_floats + (size_t)(1 + t) * LANES) : w0[t];
    }
    for (int32_t ox = from, x = from * c->stride_w - c->pad_left; ox < to; ox++, x += c->stride_w) {
        // Each tap's column: its offset into the rows (column 0 when outside) and its lanes.
        const int32_t x1 = x + c->dil_w, x2 = x + 2 * c->dil_w;
        const int in0 = x >= 0 && x < c->in_w, in1 = x1 >= 0 && x1 < c->in_w, in2 = x2 >= 0 && x2 < c->in_w;
        const size_t o0 = (in0 ? (size_t)x * C : 0) + (size_t)c0, o1 = (in1 ? (size_t)x1 * C : 0) + (size_t)c0;
        const size_t o2 = (in2 ? (size_t)x2 * C : 0) + (size_t)c0;
        const __mmask16 m00 = in0 ? lanes0 : 0, m01 = in1 ? lanes0 : 0, m02 = in2 ? lanes0 : 0;
        __m512 acc0 = bias0;
        DW_TAPS(0)
        float* o = out + (size_t)ox * C + c0;
        _mm512_mask_storeu_ps(o, lanes0, finish(c, acc0, lo, hi, c0));
        if (pair) {
            const __mmask16 m10 = in0 ? lanes1 : 0, m11 = in1 ? lanes1 : 0, m12 = in2 ? lanes1 : 0;
            __m512 acc1 = bias1;
            DW_TAPS(1)
            _mm512_mask_storeu_ps(o + LANES, lanes1, finish(c, acc1, lo, hi, c0 + LANES));
        }
    }
}

/// Columns [from, to) and channels `c0`..`c0 + 15` of one output row of a 3x3 filter with stride
/// and dilation 1, every tap inside the input: each pixel loads only the next column of the three
/// rows and reuses the two it shares with the pixel before (3 loads for 9 products).
TARGET_512 static void dw_row_3x3_sliding(const spotter_dwconv_f32* c, const float* const* rows, float* out, int32_t c0,
                                          const float* block, int32_t from, int32_t to) {
    if (from >= to) return;
    const size_t C = (size_t)c->channels;
    const int32_t left = c->channels - c0;
    const __mmask16 lanes = left >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    const __m512 lo = _mm512_set1_ps(c->out_min), hi = _mm512_set1_ps(c->out_max), bias = _mm512_loadu_ps(block);
    __m512 w[9];
    for (int t = 0; t < 9; t++) w[t] = _mm512_loadu_ps(block + (size_t)(1 + t) * LANES);
    const float *r0 = rows[0] + (size_t)(from - c->pad_left) * C + c0, *r1 = rows[1] + (size_t)(from - c->pad_left) * C + c0;
    const float* r2 = rows[2] + (size_t)(from - c->pad_left) * C + c0;
    __m512 a0 = _mm512_maskz_loadu_ps(lanes, r0), a1 = _mm512_maskz_loadu_ps(lanes, r0 + C);
    __m512 b0 = _mm512_maskz_loadu_ps(lanes, r1), b1 = _mm512_maskz_loadu_ps(lanes, r1 + C);
    __m512 d0 = _mm512_maskz_loadu_ps(lanes, r2), d1 = _mm512_maskz_loadu_ps(lanes, r2 + C);
    float* o = out + (size_t)from * C + c0;
    for (int32_t ox = from; ox < to; ox++, o += C) {
        r0 += C; r1 += C; r2 += C;
        const __m512 a2 = _mm512_maskz_loadu_ps(lanes, r0 + C), b2 = _mm512_maskz_loadu_ps(lanes, r1 + C);
        const __m512 d2 = _mm512_maskz_loadu_ps(lanes, r2 + C);
        __m512 acc = _mm512_fmadd_ps(a0, w[0], bias);
        acc = _mm512_fmadd_ps(a1, w[1], acc);
        acc = _mm512_fmadd_ps(a2, w[2], acc);
        acc = _mm512_fmadd_ps(b0, w[3], acc);
        acc = _mm512_fmadd_ps(b1, w[4], acc);
        acc = _mm512_fmadd_ps(b2, w[5], acc);
        acc = _mm512_fmadd_ps(d0, w[6], acc);
        acc = _mm512_fmadd_ps(d1, w[7], acc);
        acc = _mm512_fmadd_ps(d2, w[8], acc);
        _mm512_mask_storeu_ps(o, lanes, finish(c, acc, lo, hi, c0));
        a0 = a1; a1 = a2; b0 = b1; b1 = b2; d0 = d1; d1 = d2;
    }
}

/// Channels `c0`.. (16 at most) of one output row, any filter, every tap checked against the
/// input's edges (`rows` as for dw_row_3x3), weights read per tap.
TARGET_512 static void dw_row_any(const spotter_dwconv_f32* c, const float* const* rows, float* out, int32_t c0,
                                  const float* block) {
    const int32_t remaining = c->channels - c0;
    const __mmask16 mask = remaining >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1);
    const __m512 lo = _mm512_set1_ps(c->out_min), hi = _mm512_set1_ps(c->out_max);
    const size_t C = (size_t)c->channels;
    for (int32_t ox = 0; ox < c->out_w; ox++) {
        __m512 acc = _mm512_loadu_ps(block);
        const int32_t x0 = ox * c->stride_w - c->pad_left;
        for (int32_t ky = 0; ky < c->k_h; ky++) {
            for (int32_t kx = 0; kx < c->k_w; kx++) {
                const int32_t x = x0 + kx * c->dil_w;
                if (x < 0 || x >= c->in_w) continue;
                const __m512 v = _mm512_maskz_loadu_ps(mask, rows[ky] + (size_t)x * C + c0);
                acc = _mm512_fmadd_ps(v, _mm512_loadu_ps(block + (size_t)(1 + ky * c->k_w + kx) * LANES), acc);
            }
        }
        _mm512_mask_storeu_ps(out + (size_t)ox * C + c0, mask, finish(c, acc, lo, hi, c0));
    }
}

typedef struct {
    const spotter_dwconv_f32* conv;
    const float* input;
    float* output;
    int32_t rows_per_task;
} task_dw;

/// A task's output rows (over all batches), each row over every block of channels while its input
/// rows are in the cache.
TARGET_512 static void dw_task(void* opaque, size_t task) {
    const task_dw* t = (const task_dw*)opaque;
    const spotter_dwconv_f32* c = t->conv;
    const int32_t total = c->batches * c->out_h, taps = c->k_h * c->k_w;
    const int32_t first = (int32_t)task * t->rows_per_task;
    const int32_t last = first + t->rows_per_task < total ? first + t->rows_per_task : total;
    const size_t C = (size_t)c->channels, block_floats = (size_t)LANES * (size_t)(1 + taps);
    const int unrolled = c->k_h == 3 && c->k_w == 3;
    // Stride and dilation 1 along x: the columns whose three taps are all inside slide.
    const int sliding = unrolled && c->stride_w == 1 && c->dil_w == 1;
    int32_t inner_first = c->pad_left < c->out_w ? c->pad_left : c->out_w;
    int32_t inner_last = c->in_w - 2 + c->pad_left < c->out_w ? c->in_w - 2 + c->pad_left : c->out_w;
    if (inner_last < inner_first) inner_last = inner_first;
    const float* rows[c->k_h];
    for (int32_t r = first; r < last; r++) {
        const int32_t b = r / c->out_h, oy = r % c->out_h;
        const float* image = t->input + (size_t)b * (size_t)c->in_h * (size_t)c->in_w * C;
        for (int32_t ky = 0; ky < c->k_h; ky++) {
            const int32_t y = oy * c->stride_h - c->pad_top + ky * c->dil_h;
            rows[ky] = y < 0 || y >= c->in_h ? c->zero_row : image + (size_t)y * (size_t)c->in_w * C;
        }
        float* out = t->output + (size_t)r * (size_t)c->out_w * C;
        for (int32_t c0 = 0; c0 < c->channels;) {
            const float* block = c->packed + (size_t)(c0 / LANES) * block_floats;
            if (!unrolled) {
                dw_row_any(c, rows, out, c0, block);
                c0 += LANES;
            } else if (sliding) {
                dw_row_3x3(c, rows, out, c0, block, 0, 0, inner_first);
                dw_row_3x3_sliding(c, rows, out, c0, block, inner_first, inner_last);
                dw_row_3x3(c, rows, out, c0, block, 0, inner_last, c->out_w);
                c0 += LANES;
            } else if (c->channels - c0 > LANES) {
                dw_row_3x3(c, rows, out, c0, block, 1, 0, c->out_w);
                c0 += 2 * LANES;
            } else {
                dw_row_3x3(c, rows, out, c0, block, 0, 0, c->out_w);
                c0 += LANES;
            }
        }
    }
}

void spotter_dwconv_f32_run(const spotter_dwconv_f32* conv, const float* input, float* output, pthreadpool_t pool) {
    const int32_t rows = conv->batches * conv->out_h;
    const int32_t threads = pool ? (int32_t)pthreadpool_get_threads_count(pool) : 1;
    // About four tasks per thread, so that threads finish together.
    int32_t per_task = (rows + 4 * threads - 1) / (4 * threads);
    per_task = per_task < 1 ? 1 : per_task;
    task_dw context = {conv, input, output, per_task};
    pthreadpool_parallelize_1d(pool, dw_task, &context, (size_t)((rows + per_task - 1) / per_task), 0);
}
