#include "spotter_kernels.h"

#include <immintrin.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define MR 8
#define MAX_ROWS_PER_TASK 64
#define MAX_SEGMENTS SPOTTER_CONV_MAX_SEGMENTS

int spotter_has_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

/// Sum of the first `k` bytes of a row.
TARGET static inline int32_t row_sum(const uint8_t* row, int32_t k) {
    __m512i total = _mm512_setzero_si512();
    int32_t i = 0;
    for (; i + 64 <= k; i += 64) {
        total = _mm512_add_epi64(total, _mm512_sad_epu8(_mm512_loadu_si512(row + i), _mm512_setzero_si512()));
    }
    if (i < k) {
        __m512i tail = _mm512_maskz_loadu_epi8((__mmask64)((~0ull) >> (64 - (k - i))), row + i);
        total = _mm512_add_epi64(total, _mm512_sad_epu8(tail, _mm512_setzero_si512()));
    }
    return (int32_t)_mm512_reduce_add_epi64(total);
}

/// Copies `n` bytes (at most 64) with one masked load and store: no call, nothing read or written
/// past the `n` bytes.
TARGET static inline void copy_short(uint8_t* dst, const uint8_t* src, size_t n) {
    const __mmask64 mask = n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
    _mm512_mask_storeu_epi8(dst, mask, _mm512_maskz_loadu_epi8(mask, src));
}

/// Sets `n` bytes (at most 64) to `value` with one masked store.
TARGET static inline void fill_short(uint8_t* dst, uint8_t value, size_t n) {
    const __mmask64 mask = n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
    _mm512_mask_storeu_epi8(dst, mask, _mm512_set1_epi8((char)value));
}

/// `n` bytes from `src`, or `value` when `src` is NULL; up to 64 bytes as one masked move (a first
/// layer's 3x3 filter row on RGB is 9 bytes, which a call to memcpy cost more than copying).
TARGET static inline void put(uint8_t* dst, const uint8_t* src, uint8_t value, size_t n) {
    if (n <= 64) {
        if (src) copy_short(dst, src, n); else fill_short(dst, value, n);
    } else {
        if (src) memcpy(dst, src, n); else memset(dst, value, n);
    }
}

/// Writes one filter row of a receptive field (k_w * in_c bytes) to `dst`: the taps of input row `y`
/// of image `b` from column `x0` on, x_zero for taps (or a whole row) in the padding.
TARGET static inline __attribute__((always_inline)) void filter_row(const spotter_conv* c, const uint8_t* input, int32_t b, int32_t y, int32_t x0, uint8_t* dst) {
    const size_t field_row = (size_t)c->k_w * c->in_c;
    if (y < 0 || y >= c->in_h) {
        put(dst, NULL, c->in_zero, field_row);
    } else if (c->dil_w == 1 && x0 >= 0 && x0 + c->k_w <= c->in_w) {
        // The filter row's taps are consecutive pixels: one copy.
        put(dst, input + (((size_t)b * c->in_h + y) * c->in_w + x0) * c->in_c, 0, field_row);
    } else {
        for (int32_t kx = 0; kx < c->k_w; kx++, dst += c->in_c) {
            const int32_t x = x0 + kx * c->dil_w;
            const uint8_t* src = x < 0 || x >= c->in_w ? NULL : input + (((size_t)b * c->in_h + y) * c->in_w + x) * c->in_c;
            put(dst, src, c->in_zero, (size_t)c->in_c);
        }
    }
}

/// Steps output pixel coordinates (image `b`, row `oy`, column `ox`) to the next pixel.
static inline void next_pixel(const spotter_conv* c, int32_t* b, int32_t* oy, int32_t* ox) {
    if (++*ox == c->out_w) {
        *ox = 0;
        if (++*oy == c->out_h) { *oy = 0; ++*b; }
    }
}

/// Writes im2col rows [row_begin, row_end) to `dst`: each output pixel's receptive field, x_zero in
/// padding, zero in the k4 tail.
TARGET static void im2col_rows(const spotter_conv* c, const uint8_t* input, int32_t row_begin, int32_t row_end, uint8_t* dst) {
    const int32_t pixels = c->out_h * c->out_w;
    const size_t field_row = (size_t)c->k_w * c->in_c, tail = (size_t)(c->k4 - c->k);
    // Coordinates of the first row, then stepped row by row (no division per row).
    int32_t b = row_begin / pixels, oy = (row_begin % pixels) / c->out_w, ox = row_begin % c->out_w;
    for (int32_t row = row_begin; row < row_end; row++, next_pixel(c, &b, &oy, &ox)) {
        const int32_t y0 = oy * c->stride_h - c->pad_top, x0 = ox * c->stride_w - c->pad_left;
        for (int32_t ky = 0; ky < c->k_h; ky++, dst += field_row) filter_row(c, input, b, y0 + ky * c->dil_h, x0, dst);
        if (tail) fill_short(dst, 0, tail);
        dst += tail;
    }
}

/// Points `segments` (filter row by filter row, MAX_ROWS_PER_TASK apart) at each filter row of the
/// receptive fields of rows [row_begin, row_end): into the input where its row_stride bytes lie
/// inside the input row, at `padding` (row_stride bytes of x_zero) where it lies wholly above or
/// below, else at a copy in `border` (row r's at r * k4, filter rows row_stride apart, zero past
/// the taps). Needs no dilation along x.
TARGET static void point_rows(const spotter_conv* c, const uint8_t* input, int32_t row_begin, int32_t row_end,
                              const uint8_t** segments, uint8_t* border, const uint8_t* padding) {
    const int32_t pixels = c->out_h * c->out_w;
    const size_t field_row = (size_t)c->k_w * c->in_c, stride = (size_t)c->row_stride;
    // The last column whose row_stride bytes from its start stay inside the input row.
    const size_t row_bytes = (size_t)c->in_w * c->in_c;
    const int32_t last_x = row_bytes >= stride ? (int32_t)((row_bytes - stride) / (size_t)c->in_c) : -1;
    int32_t b = row_begin / pixels, oy = (row_begin % pixels) / c->out_w, ox = row_begin % c->out_w;
    // The last output column whose filter rows all lie inside the input row.
    const int32_t last_inside = last_x < 0 ? -1 : (last_x + c->pad_left) / c->stride_w;
    const size_t step = (size_t)c->stride_w * c->in_c;
    const __m512i steps = _mm512_setr_epi64(0, (long long)step, 2 * (long long)step, 3 * (long long)step, 4 * (long long)step,
                                            5 * (long long)step, 6 * (long long)step, 7 * (long long)step);
    const uint8_t* lines[c->k_h];  // the input rows the current output row reads, NULL in the padding
    for (int32_t r = 0; r < row_end - row_begin; r++, next_pixel(c, &b, &oy, &ox)) {
        const int32_t y0 = oy * c->stride_h - c->pad_top, x0 = ox * c->stride_w - c->pad_left;
        if (r == 0 || ox == 0) {
            for (int32_t ky = 0; ky < c->k_h; ky++) {
                const int32_t y = y0 + ky * c->dil_h;
                lines[ky] = y < 0 || y >= c->in_h ? NULL : input + ((size_t)b * c->in_h + y) * c->in_w * c->in_c;
            }
        }
        if (x0 >= 0 && x0 <= last_x) {
            // The run of pixels of this output row (and task) that lie inside: pointers a step apart.
            int32_t run = (last_inside < c->out_w ? last_inside : c->out_w - 1) - ox + 1;
            if (run > row_end - row_begin - r) run = row_end - row_begin - r;
            const size_t offset = (size_t)x0 * c->in_c;
            for (int32_t ky = 0; ky < c->k_h; ky++) {
                // Eight pointers a store: p, p + step, ... (or the padding row eight times).
                const uint8_t** dst = segments + ky * MAX_ROWS_PER_TASK + r;
                const uint8_t* p = lines[ky] ? lines[ky] + offset : padding;
                const __m512i lanes = lines[ky] ? steps : _mm512_setzero_si512();
                const __m512i advance = _mm512_set1_epi64(lines[ky] ? (long long)(8 * step) : 0);
                __m512i pointers = _mm512_add_epi64(_mm512_set1_epi64((long long)(uintptr_t)p), lanes);
                for (int32_t i = 0; i < run; i += 8, pointers = _mm512_add_epi64(pointers, advance)) {
                    const __mmask8 live = run - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (run - i)) - 1);
                    _mm512_mask_storeu_epi64((void*)(dst + i), live, pointers);
                }
            }
            // The loop's step moves past the run's last pixel.
            r += run - 1;
            ox += run - 1;
            continue;
        }
        for (int32_t ky = 0; ky < c->k_h; ky++) {
            uint8_t* dst = border + (size_t)r * c->k4 + (size_t)ky * stride;
            filter_row(c, input, b, y0 + ky * c->dil_h, x0, dst);
            if (stride > field_row) fill_short(dst + field_row, 0, stride - field_row);
            segments[ky * MAX_ROWS_PER_TASK + r] = dst;
        }
    }
}

static void lookup_span_vbmi(const uint8_t* table, const uint8_t* input, uint8_t* output, size_t count);

typedef struct {
    const spotter_conv* conv;
    const uint8_t* input;
    void* output;
    int32_t rows;
    int32_t rows_per_task;
    /// 0, or a 1x1 layer's input as the channel concatenation of part_count tensors (spotter_conv_run_parts).
    int32_t part_count;
    const uint8_t* const* parts;
    const int32_t* part_channels;
} task_context;

/// 4 bytes at `p` in every lane, XOR `flip` (0 or 0x80808080 in every lane): a load that broadcasts,
/// then the XOR on the vector. With the XOR on a general register, the word moved from it to the
/// vector unit: two micro-ops, and the slowest step of a 16-channel layer's loop.
TARGET static inline __attribute__((always_inline)) __m512i broadcast_word(const uint8_t* p, __m512i flip) {
    int32_t word;
    memcpy(&word, p, 4);
    return _mm512_xor_si512(_mm512_set1_epi32(word), flip);
}

/// Output rows per task for a receptive field of k4 bytes: a multiple of MR, at most 64, their im2col
/// rows at most SPOTTER_CONV_MAX_TASK_BYTES.
static int32_t task_rows(int32_t k4) {
    int32_t rows = (int32_t)(SPOTTER_CONV_MAX_TASK_BYTES / k4) / MR * MR;
    return rows > MAX_ROWS_PER_TASK ? MAX_ROWS_PER_TASK : rows;
}

/// Requantizes and stores one output row's block of channels (`halves` of 16) from its two
/// accumulators: bytes as XNNPACK's fp32 scheme computes them, or floats for a hybrid layer.
TARGET static inline __attribute__((always_inline)) void store_row(const task_context* t, int32_t row, int32_t n0, const int halves,
                                                                   __m512i acc0, __m512i acc1, int32_t row_sum, const int32_t flip,
                                                                   const __m512i* factor, const __m512i* constant, const __m512* scale,
                                                                   const __mmask16* store_mask, __m512i out_zero, __m512i out_min,
                                                                   __m512 out_max_less_zero) {
    const spotter_conv* c = t->conv;
    const __m512i sum = _mm512_set1_epi32(flip ? 0 : row_sum);
    const size_t offset = (size_t)row * c->out_c + n0;
    const __m512i acc[2] = {acc0, acc1};
    if (c->out_bias) {
        // Float output: the sums scaled by both scales, the float bias added, clamped.
        float* out = (float*)t->output + offset;
        for (int h = 0; h < halves; h++) {
            if (!store_mask[h]) continue;
            const __m512i v = _mm512_add_epi32(acc[h], _mm512_add_epi32(_mm512_mullo_epi32(factor[h], sum), constant[h]));
            __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), scale[h], _mm512_loadu_ps(c->out_bias + n0 + 16 * h));
            f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(c->out_min_f)), _mm512_set1_ps(c->out_max_f));
            if (c->prelu_alpha) {
                // spotter_prelu_f32's operations: max(f, 0) + ((f - |f|) * alpha) * scale, clamped.
                const __m512 magnitude = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(0x7fffffff)));
                const __m512 negative = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(f, magnitude), _mm512_loadu_ps(c->prelu_alpha + n0 + 16 * h)),
                                                      _mm512_loadu_ps(c->prelu_scale + n0 + 16 * h));
                f = _mm512_add_ps(_mm512_max_ps(f, _mm512_setzero_ps()), negative);
                f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(c->prelu_min)), _mm512_set1_ps(c->prelu_max));
            }
            _mm512_mask_storeu_ps(out + 16 * h, store_mask[h], f);
        }
        return;
    }
    uint8_t* out = (uint8_t*)t->output + offset;
    for (int h = 0; h < halves; h++) {
        if (!store_mask[h]) continue;
        __m512i v = _mm512_add_epi32(acc[h], _mm512_add_epi32(_mm512_mullo_epi32(factor[h], sum), constant[h]));
        __m512 f = _mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), scale[h]), out_max_less_zero);
        v = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), out_zero);
        v = _mm512_max_epi32(v, out_min);
        _mm_mask_storeu_epi8(out + 16 * h, store_mask[h], _mm512_cvtepi32_epi8(v));
    }
}

/// One block of 32 channels over a task's rows, MR rows a tile. Each row's receptive field is
/// `count` segments, segment s `quads[s]` groups of 4 bytes: `segments[s * MAX_ROWS_PER_TASK + r]`
/// is segment s of row r (the weights run through the segments in order). `halves` (a constant in each
/// instance) is 2, or 1 for a block whose channels end in its first 16: the second half's products
/// are then not computed at all (a first layer's 16 channels, YOLO's 80-class heads).
TARGET static inline __attribute__((always_inline)) void block_tiles(const task_context* t, int32_t begin, int32_t end,
                                                                     const uint8_t* const* segments, int32_t count, const int32_t* quads,
                                                                     const int32_t* sums, const int8_t* b, int32_t n0,
                                                                     const int32_t flip, const int halves, const __m512i* factor,
                                                                     const __m512i* constant, const __m512* scale, const __mmask16* store_mask) {
    const spotter_conv* c = t->conv;
    const __m512i out_zero = _mm512_set1_epi32(c->out_zero);
    const __m512i out_min = _mm512_set1_epi32(c->out_min);
    const __m512 out_max_less_zero = _mm512_set1_ps((float)(c->out_max - c->out_zero));
    __m512i flip_vector = _mm512_set1_epi32(flip);
    // Opaque to the compiler, which otherwise narrows the XOR to the scalar before the broadcast.
    if (flip) __asm__("" : "+v"(flip_vector));
    for (int32_t m = 0; m < end - begin; m += MR) {
        // Named accumulators: as an array across the loop over segments, the compiler stored
        // every one of them after each product.
        __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        __m512i a40 = a00, a41 = a00, a50 = a00, a51 = a00, a60 = a00, a61 = a00, a70 = a00, a71 = a00;
        const int8_t* bq = b;
        for (int32_t s = 0; s < count; s++) {
            const uint8_t* rows[MR];
            for (int r = 0; r < MR; r++) rows[r] = segments[s * MAX_ROWS_PER_TASK + m + r];
            for (int32_t q = 0; q < quads[s]; q++, bq += 4 * SPOTTER_CONV_NR) {
                const __m512i b0 = _mm512_loadu_si512(bq), b1 = halves == 2 ? _mm512_loadu_si512(bq + 64) : b0;
#define PRODUCTS(R)                                                                     \
                {                                                                       \
                    const __m512i av = broadcast_word(rows[R] + 4 * q, flip_vector);    \
                    a##R##0 = _mm512_dpbusd_epi32(a##R##0, av, b0);                     \
                    if (halves == 2) a##R##1 = _mm512_dpbusd_epi32(a##R##1, av, b1);    \
                }
                PRODUCTS(0) PRODUCTS(1) PRODUCTS(2) PRODUCTS(3) PRODUCTS(4) PRODUCTS(5) PRODUCTS(6) PRODUCTS(7)
#undef PRODUCTS
            }
        }
        // Row by row with the named accumulators: gathered into an array, they went through the stack.
#define STORE_ROW(R)                                                                                          \
        if (R < end - begin - m) store_row(t, begin + m + R, n0, halves, a##R##0, a##R##1, sums[m + R], flip, factor, \
                                           constant, scale, store_mask, out_zero, out_min, out_max_less_zero);
        STORE_ROW(0) STORE_ROW(1) STORE_ROW(2) STORE_ROW(3) STORE_ROW(4) STORE_ROW(5) STORE_ROW(6) STORE_ROW(7)
#undef STORE_ROW
    }
}

/// One task's rows; `flip` (and so whether row sums are needed) is a constant in each of the two
/// instances below, so the unsigned kernel's loop has no XOR.
///
/// The A rows are read where they are: a 1x1 layer's input rows directly; with filter rows whose
/// taps are a multiple of 4 bytes and consecutive (no dilation along x), each filter row in the
/// input (a copy only for pixels at the edges); otherwise whole im2col rows copied to the stack.
TARGET static inline __attribute__((always_inline)) void conv_task(void* opaque, size_t task, const int32_t flip) {
    const task_context* t = (const task_context*)opaque;
    const spotter_conv* c = t->conv;
    const int32_t begin = (int32_t)task * t->rows_per_task;
    const int32_t end = begin + t->rows_per_task < t->rows ? begin + t->rows_per_task : t->rows;
    // At most MAX_SEGMENTS filter rows: the task keeps a pointer per row and filter row on its stack.
    const int segmented = !c->direct && c->row_stride > 0 && c->dil_w == 1 && c->k_h <= MAX_SEGMENTS;
    const int32_t count = t->part_count ? t->part_count : segmented ? c->k_h : 1;
    const int32_t length = c->direct ? c->in_c : segmented ? c->row_stride : c->k4;
    // Per segment: groups of 4 bytes, and bytes that are taps (the rest meet zero weights and stay
    // out of the row sums).
    int32_t quads[MAX_SEGMENTS], taps[MAX_SEGMENTS];
    for (int32_t s = 0; s < count; s++) {
        quads[s] = t->part_count ? t->part_channels[s] / 4 : length / 4;
        taps[s] = t->part_count ? t->part_channels[s] : c->direct ? c->in_c : segmented ? c->k_w * c->in_c : c->k;
    }
    // im2col rows, or the copies of edge pixels' filter rows, on the task's stack (at most
    // SPOTTER_CONV_MAX_TASK_BYTES).
    // With segments, a filter row of x_zero bytes follows the rows for those wholly in the padding.
    uint8_t columns[c->direct ? 1 : (size_t)(end - begin) * c->k4 + (segmented ? (size_t)length : 0)];
    const uint8_t* segments[count * MAX_ROWS_PER_TASK];
    if (t->part_count) {
        // Each part's pixels are its channels apart; the weights follow the parts' channels in order.
        for (int32_t s = 0; s < count; s++) {
            for (int32_t r = 0; r < end - begin; r++) {
                segments[s * MAX_ROWS_PER_TASK + r] = t->parts[s] + (size_t)(begin + r) * (size_t)t->part_channels[s];
            }
        }
    } else if (c->direct) {
        for (int32_t r = 0; r < end - begin; r++) segments[r] = t->input + (size_t)(begin + r) * c->in_c;
    } else if (segmented) {
        uint8_t* padding = columns + (size_t)(end - begin) * c->k4;
        memset(padding, c->in_zero, (size_t)length);
        point_rows(c, t->input, begin, end, segments, columns, padding);
    } else {
        im2col_rows(c, t->input, begin, end, columns);
        for (int32_t r = 0; r < end - begin; r++) segments[r] = columns + (size_t)r * c->k4;
    }
    // A last tile of fewer than MR rows repeats the last row (its products are not stored).
    for (int32_t s = 0; s < count; s++) {
        for (int32_t r = end - begin; r % MR; r++) segments[s * MAX_ROWS_PER_TASK + r] = segments[s * MAX_ROWS_PER_TASK + end - begin - 1];
    }
    int32_t sums[MAX_ROWS_PER_TASK];
    if (!flip) {
        for (int32_t r = 0; r < end - begin; r++) {
            sums[r] = 0;
            for (int32_t s = 0; s < count; s++) sums[r] += row_sum(segments[s * MAX_ROWS_PER_TASK + r], taps[s]);
        }
    }

    const int32_t blocks = (c->out_c + SPOTTER_CONV_NR - 1) / SPOTTER_CONV_NR;
    for (int32_t nb = 0; nb < blocks; nb++) {
        const int8_t* b = c->packed + (size_t)nb * (size_t)c->k4 * SPOTTER_CONV_NR;
        const int32_t n0 = nb * SPOTTER_CONV_NR;
        __m512i factor[2], constant[2];
        __m512 scale[2];
        for (int h = 0; h < 2; h++) {
            factor[h] = _mm512_loadu_si512(c->col_factor + n0 + 16 * h);
            constant[h] = _mm512_loadu_si512(c->col_const + n0 + 16 * h);
            scale[h] = _mm512_loadu_ps(c->scale + n0 + 16 * h);
        }
        const int32_t valid = c->out_c - n0;
        const __mmask16 store_mask[2] = {
            valid >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (valid > 0 ? valid : 0)) - 1),
            valid >= 32 ? (__mmask16)0xFFFF : (valid > 16 ? (__mmask16)((1u << (valid - 16)) - 1) : (__mmask16)0),
        };
        if (valid > 16) {
            block_tiles(t, begin, end, segments, count, quads, sums, b, n0, flip, 2, factor, constant, scale, store_mask);
        } else {
            block_tiles(t, begin, end, segments, count, quads, sums, b, n0, flip, 1, factor, constant, scale, store_mask);
        }
    }
    if (c->out_table) {
        // The task's output rows are contiguous and still in L1: the table is applied there, not in
        // another pass over the whole tensor.
        uint8_t* out = (uint8_t*)t->output + (size_t)begin * c->out_c;
        lookup_span_vbmi(c->out_table, out, out, (size_t)(end - begin) * c->out_c);
    }
}

/// A task of a signed 1x1 layer with 16 input channels and one output channel (YOLOv8's box
/// distribution weighted by 0..15): four pixels a 64-byte load, each lane of `vpdpbusd` the products
/// of four channels, added up across lanes; 16 pixels then requantize as one vector. The general
/// tiles spend a 16-channel block on the one channel.
TARGET static void conv_task_dot16(void* opaque, size_t task) {
    const task_context* t = (const task_context*)opaque;
    const spotter_conv* c = t->conv;
    const int32_t begin = (int32_t)task * t->rows_per_task;
    const int32_t end = begin + t->rows_per_task < t->rows ? begin + t->rows_per_task : t->rows;
    // The 16 weights as the first block packed them (lane 0, groups of 4 bytes 32 lanes apart), four times.
    int8_t w[64];
    for (int q = 0; q < 4; q++) memcpy(w + 4 * q, c->packed + (size_t)q * 4 * SPOTTER_CONV_NR, 4);
    for (int r = 1; r < 4; r++) memcpy(w + 16 * r, w, 16);
    const __m512i weights = _mm512_loadu_si512(w), flip = _mm512_set1_epi32(c->a_flip);
    // The one channel's requantization in every lane, for store_row (the lanes are pixels here).
    const __m512i factor[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    const __m512i constant[2] = {_mm512_set1_epi32(c->col_const[0]), _mm512_setzero_si512()};
    const __m512 scale[2] = {_mm512_set1_ps(c->scale[0]), _mm512_setzero_ps()};
    const __m512i out_zero = _mm512_set1_epi32(c->out_zero), out_min = _mm512_set1_epi32(c->out_min);
    const __m512 out_max_less_zero = _mm512_set1_ps((float)(c->out_max - c->out_zero));
    // Lane 4L + k of the sums holds pixel 4k + L: back to pixel order.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    uint8_t* out = (uint8_t*)t->output;
    for (int32_t p0 = begin; p0 < end; p0 += 16) {
        const int32_t n = end - p0 < 16 ? end - p0 : 16;
        __m512i a[4];
        for (int k = 0; k < 4; k++) {
            const int32_t pixels = n - 4 * k < 0 ? 0 : (n - 4 * k > 4 ? 4 : n - 4 * k);
            const __mmask64 live = pixels == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * pixels)) - 1);
            const __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi8(live, t->input + (size_t)(p0 + 4 * k) * 16), flip);
            a[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, weights);
        }
        const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
        const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
        const __m512i sums = _mm512_add_epi32(_mm512_unpacklo_epi64(u, v), _mm512_unpackhi_epi64(u, v));
        // One output channel: "row" p0's 16 lanes are pixels p0 ... p0 + 15, one byte apart.
        const __mmask16 store_mask[2] = {n == 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1), 0};
        store_row(t, p0, 0, 1, _mm512_permutexvar_epi32(order, sums), _mm512_setzero_si512(), 0, (int32_t)0x80808080, factor, constant,
                  scale, store_mask, out_zero, out_min, out_max_less_zero);
    }
    if (c->out_table) lookup_span_vbmi(c->out_table, out + begin, out + begin, (size_t)(end - begin));
}

TARGET static void conv_task_unsigned(void* opaque, size_t task) { conv_task(opaque, task, 0); }
TARGET static void conv_task_signed(void* opaque, size_t task) { conv_task(opaque, task, (int32_t)0x80808080); }

void spotter_conv_run(const spotter_conv* conv, const uint8_t* input, void* output, pthreadpool_t pool) {
    spotter_conv_run_parts(conv, &input, &conv->in_c, 0, output, pool);
}

void spotter_conv_run_parts(const spotter_conv* conv, const uint8_t* const* parts, const int32_t* channels, int32_t count,
                            void* output, pthreadpool_t pool) {
    task_context context = {conv, parts[0], output, conv->batches * conv->out_h * conv->out_w,
                            conv->direct ? MAX_ROWS_PER_TASK : task_rows(conv->k4), count, parts, channels};
    const size_t tasks = (size_t)((context.rows + context.rows_per_task - 1) / context.rows_per_task);
    const int dot16 = count == 0 && conv->direct && conv->in_c == 16 && conv->out_c == 1 && conv->a_flip && !conv->out_bias;
    pthreadpool_parallelize_1d(pool, dot16 ? conv_task_dot16 : conv->a_flip ? conv_task_signed : conv_task_unsigned, &context, tasks, 0);
}

TARGET static void min_max_span(const float* x, size_t count, float* min, float* max) {
    __m512 low = _mm512_set1_ps(x[0]), high = low;
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        low = _mm512_min_ps(low, v);
        high = _mm512_max_ps(high, v);
    }
    if (i < count) {
        // The tail's missing lanes take x[0], which is already counted.
        const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(x[0]), (__mmask16)((1u << (count - i)) - 1), x + i);
        low = _mm512_min_ps(low, v);
        high = _mm512_max_ps(high, v);
    }
    *min = _mm512_reduce_min_ps(low);
    *max = _mm512_reduce_max_ps(high);
}

TARGET static void quantize_span(const float* x, int8_t* y, size_t count, float inverse_scale, int32_t zero) {
    const __m512 scale = _mm512_set1_ps(inverse_scale);
    const __m512i offset = _mm512_set1_epi32(zero), lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127);
    for (size_t i = 0; i < count; i += 16) {
        const __mmask16 live = count - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (count - i)) - 1);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, x + i), scale);
        // NaN converts to INT32_MIN and clamps to -128; its product is meaningless anyway.
        __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), offset);
        q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
        _mm_mask_storeu_epi8(y + i, live, _mm512_cvtepi32_epi8(q));
    }
}

/// Spans of a tensor split across a pool's threads: at most SPANS, each at least 16 KiB of floats.
#define SPANS 8
typedef struct {
    const float* x;
    int8_t* y;
    size_t count, span;
    float inverse_scale;
    int32_t zero;
    float mins[SPANS], maxs[SPANS];
} span_task;

static size_t spans(size_t count, size_t* span) {
    const size_t minimum = 4096;
    size_t n = count / minimum;
    n = n < 1 ? 1 : n > SPANS ? SPANS : n;
    *span = (count + n - 1) / n;
    return (count + *span - 1) / *span;
}

static void min_max_task(void* opaque, size_t i) {
    span_task* t = (span_task*)opaque;
    const size_t begin = i * t->span, end = begin + t->span < t->count ? begin + t->span : t->count;
    min_max_span(t->x + begin, end - begin, &t->mins[i], &t->maxs[i]);
}

static void quantize_task(void* opaque, size_t i) {
    span_task* t = (span_task*)opaque;
    const size_t begin = i * t->span, end = begin + t->span < t->count ? begin + t->span : t->count;
    quantize_span(t->x + begin, t->y + begin, end - begin, t->inverse_scale, t->zero);
}

void spotter_min_max_f32(const float* x, size_t count, float* min, float* max, pthreadpool_t pool) {
    span_task t = {.x = x, .count = count};
    const size_t n = spans(count, &t.span);
    pthreadpool_parallelize_1d(pool, min_max_task, &t, n, 0);
    *min = t.mins[0];
    *max = t.maxs[0];
    for (size_t i = 1; i < n; i++) {
        *min = t.mins[i] < *min ? t.mins[i] : *min;
        *max = t.maxs[i] > *max ? t.maxs[i] : *max;
    }
}

void spotter_quantize_s8(const float* x, int8_t* y, size_t count, float inverse_scale, int32_t zero, pthreadpool_t pool) {
    span_task t = {.x = x, .y = y, .count = count, .inverse_scale = inverse_scale, .zero = zero};
    const size_t n = spans(count, &t.span);
    pthreadpool_parallelize_1d(pool, quantize_task, &t, n, 0);
}

typedef struct {
    const uint8_t* table;
    const uint8_t* input;
    uint8_t* output;
} lookup_context;

static void lookup_task(void* opaque, size_t start, size_t count) {
    const lookup_context* t = (const lookup_context*)opaque;
    // Locals, so that stores through the byte pointer need not reload them.
    const uint8_t* restrict table = t->table;
    const uint8_t* restrict input = t->input + start;
    uint8_t* restrict output = t->output + start;
    for (size_t i = 0; i < count; i++) output[i] = table[input[i]];
}

#define TARGET_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

int spotter_has_vbmi(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
}

/// output[i] = table[input[i]] for `count` bytes (input may be output), 64 at a time: two 128-entry
/// permutes (bit 6 picks the half of each), bit 7 picks the result.
TARGET_VBMI static void lookup_span_vbmi(const uint8_t* table, const uint8_t* input, uint8_t* output, size_t count) {
    const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
    const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
    for (size_t i = 0; i < count; i += 64) {
        const __mmask64 live = count - i >= 64 ? ~(__mmask64)0 : (~(__mmask64)0) >> (64 - (count - i));
        const __m512i index = _mm512_maskz_loadu_epi8(live, input + i);
        const __m512i low = _mm512_permutex2var_epi8(t0, index, t1), high = _mm512_permutex2var_epi8(t2, index, t3);
        _mm512_mask_storeu_epi8(output + i, live, _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high));
    }
}

static void lookup_task_vbmi(void* opaque, size_t start, size_t count) {
    const lookup_context* t = (const lookup_context*)opaque;
    lookup_span_vbmi(t->table, t->input + start, t->output + start, count);
}

void spotter_lookup_bytes(const uint8_t* table, const uint8_t* input, uint8_t* output, size_t count, pthreadpool_t pool) {
    lookup_context context = {table, input, output};
    pthreadpool_parallelize_1d_tile_1d(pool, spotter_has_vbmi() ? lookup_task_vbmi : lookup_task, &context, count, 1 << 16, 0);
}

/// y = clamp(max(x, 0) + ((x - |x|) * alpha[c]) * scale[c]) with the float operations of XNNPACK's
/// clamp, abs, subtract, multiply and add (maxps, sign bit cleared, then min after max).
__attribute__((target("avx2,fma"))) void spotter_prelu_f32(const float* x, float* y, size_t rows, size_t channels,
                                                           const float* alpha, const float* scale, float lo, float hi) {
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    const __m256 low = _mm256_set1_ps(lo), high = _mm256_set1_ps(hi);
    const size_t whole = channels / 8 * 8;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(channels - whole)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (size_t r = 0; r < rows; r++, x += channels, y += channels) {
        for (size_t c = 0; c < channels; c += 8) {
            const int full = c < whole;
            const __m256 v = full ? _mm256_loadu_ps(x + c) : _mm256_maskload_ps(x + c, mask);
            const __m256 a = full ? _mm256_loadu_ps(alpha + c) : _mm256_maskload_ps(alpha + c, mask);
            const __m256 s = full ? _mm256_loadu_ps(scale + c) : _mm256_maskload_ps(scale + c, mask);
            const __m256 negative = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(v, _mm256_andnot_ps(sign, v)), a), s);
            __m256 sum = _mm256_add_ps(_mm256_max_ps(v, zero), negative);
            sum = _mm256_min_ps(_mm256_max_ps(sum, low), high);
            if (full) _mm256_storeu_ps(y + c, sum); else _mm256_maskstore_ps(y + c, mask, sum);
        }
    }
}

int spotter_has_avx512f(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

/// A row's output for 16 rows at once: exp * inverse (1 / (sum * output scale)) rounded half away
/// from zero (the probability is not negative), offset by the zero point and clamped.
__attribute__((target("avx512f"))) static inline __m512i softmax_output(__m512 e, __m512 inverse, __m512i zero, __m512i low, __m512i high) {
    const __m512 p = _mm512_mul_ps(e, inverse);
    __m512i rounded = _mm512_cvttps_epi32(p);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(p, _mm512_cvtepi32_ps(rounded)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    rounded = _mm512_mask_add_epi32(rounded, up, rounded, _mm512_set1_epi32(1));
    return _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(rounded, zero), low), high);
}

/// spotter_softmax_q8_16rows for rows of a multiple of 4 bytes: each row's 4-byte words gathered
/// into the lanes (never past a row's end), the bytes taken out of them by shifts, and the results
/// packed back into words and scattered; the same arithmetic, in the same order.
__attribute__((target("avx512f"))) static void softmax_q8_16rows_by_words(const uint8_t* in, uint8_t* out, size_t rows, size_t depth,
                                                                        int is_signed, const float* table, float output_scale,
                                                                        int32_t output_zero, int32_t lo, int32_t hi) {
    const size_t words = depth / 4;
    __m512i gathered[SPOTTER_SOFTMAX_MAX_DEPTH / 4];
    __m512 exps[SPOTTER_SOFTMAX_MAX_DEPTH];
    const __m512i offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32((int32_t)depth));
    const __m512i zero = _mm512_set1_epi32(output_zero), low = _mm512_set1_epi32(lo), high = _mm512_set1_epi32(hi);
    const __m512i byte = _mm512_set1_epi32(0xFF);
    // Byte c of each lane's word as an int32, sign-extended for int8.
#define BYTE_OF(WORD, C) (is_signed ? _mm512_srai_epi32(_mm512_slli_epi32(WORD, 24 - 8 * (C)), 24) \
                                    : _mm512_and_si512(_mm512_srli_epi32(WORD, 8 * (C)), byte))
    for (size_t r0 = 0; r0 + 16 <= rows; r0 += 16) {
        const uint8_t* block = in + r0 * depth;
        __m512i maximum = _mm512_set1_epi32(is_signed ? -128 : 0);
        for (size_t w = 0; w < words; w++) {
            gathered[w] = _mm512_i32gather_epi32(_mm512_add_epi32(offsets, _mm512_set1_epi32((int32_t)(4 * w))), block, 1);
            for (int c = 0; c < 4; c++) maximum = _mm512_max_epi32(maximum, BYTE_OF(gathered[w], c));
        }
        __m512 sum = _mm512_setzero_ps();
        for (size_t w = 0; w < words; w++) {
            for (int c = 0; c < 4; c++) {
                // 0 ... 255: the distance from the maximum counted down from the table's end.
                const __m512i index = _mm512_sub_epi32(_mm512_set1_epi32(255), _mm512_sub_epi32(maximum, BYTE_OF(gathered[w], c)));
                const __m512 e = _mm512_i32gather_ps(index, table, 4);
                exps[4 * w + (size_t)c] = e;
                sum = _mm512_add_ps(sum, e);
            }
        }
        const __m512 inverse = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(sum, _mm512_set1_ps(output_scale)));
        uint8_t* dst = out + r0 * depth;
        for (size_t w = 0; w < words; w++) {
            __m512i packed = _mm512_setzero_si512();
            for (int c = 0; c < 4; c++) {
                const __m512i v = softmax_output(exps[4 * w + (size_t)c], inverse, zero, low, high);
                packed = _mm512_or_si512(packed, _mm512_slli_epi32(_mm512_and_si512(v, byte), 8 * c));
            }
            _mm512_i32scatter_epi32(dst, _mm512_add_epi32(offsets, _mm512_set1_epi32((int32_t)(4 * w))), packed, 1);
        }
    }
#undef BYTE_OF
}

/// Sixteen rows at a time, one per lane, each summed in its own order (the scalar order).
/// spotter_softmax_q8_16rows for rows of 16 bytes (YOLOv8's box distributions), with VBMI and no
/// gathers or scatters. A block of 16 rows is four 64-byte loads, permuted into four registers Q_w
/// where byte 16L + 4k + i holds row 4L + i, column 4w + k. In that layout a row's maximum is two
/// rotations within 128-bit lanes; each byte's table index looks up the four bytes of its float in
/// four 256-byte planes of the table; and interleaving the four results puts column 4w + k of all
/// 16 rows in one register, row r in lane r, as the arithmetic below needs. The bytes go back by
/// packing and the inverse permutes. The same arithmetic, in the same order.
TARGET_VBMI static void softmax_q8_16rows_depth16(const uint8_t* in, uint8_t* out, size_t rows, int is_signed, const float* table,
                                                  float output_scale, int32_t output_zero, int32_t lo, int32_t hi) {
    uint8_t to_columns[4][64], to_rows[4][64], planes[4][256];
    for (int w = 0; w < 4; w++) {
        for (int p = 0; p < 64; p++) {
            // Row 4L + i, column 4w + k is byte 16 i + 4w + k of load L (bit 6: the second of two).
            const int L = p / 16, k = (p % 16) / 4, i = p % 4;
            to_columns[w][p] = (uint8_t)((L % 2) * 64 + 16 * i + 4 * w + k);
        }
    }
    for (int K = 0; K < 4; K++) {
        for (int p = 0; p < 64; p++) {
            // Store K's byte 16 a + j (row 4K + a, column j) is byte 16K + 4 (j % 4) + a of Q_{j / 4}.
            const int a = p / 16, j = p % 16;
            to_rows[K][p] = (uint8_t)(((j / 4) % 2) * 64 + 16 * K + 4 * (j % 4) + a);
        }
    }
    for (int e = 0; e < 256; e++) {
        uint32_t bits;
        memcpy(&bits, table + e, 4);
        for (int b = 0; b < 4; b++) planes[b][e] = (uint8_t)(bits >> (8 * b));
    }
    __m512i plane[4][4], index_columns[4], index_rows[4];
    for (int b = 0; b < 4; b++) {
        for (int q = 0; q < 4; q++) plane[b][q] = _mm512_loadu_si512(planes[b] + 64 * q);
        index_columns[b] = _mm512_loadu_si512(to_columns[b]);
        index_rows[b] = _mm512_loadu_si512(to_rows[b]);
    }
    const __mmask64 upper_loads = 0xFFFFFFFF00000000ull, upper_columns = 0xFF00FF00FF00FF00ull;
    const __m512i zero = _mm512_set1_epi32(output_zero), low = _mm512_set1_epi32(lo), high = _mm512_set1_epi32(hi);
    const __m512i ones = _mm512_set1_epi8(-1);
    for (size_t r0 = 0; r0 + 16 <= rows; r0 += 16) {
        const uint8_t* block = in + r0 * 16;
        const __m512i b0 = _mm512_loadu_si512(block), b1 = _mm512_loadu_si512(block + 64);
        const __m512i b2 = _mm512_loadu_si512(block + 128), b3 = _mm512_loadu_si512(block + 192);
        __m512i q[4];
        for (int w = 0; w < 4; w++) {
            q[w] = _mm512_mask_blend_epi8(upper_loads, _mm512_permutex2var_epi8(b0, index_columns[w], b1),
                                          _mm512_permutex2var_epi8(b2, index_columns[w], b3));
        }
        __m512i m = is_signed ? _mm512_max_epi8(_mm512_max_epi8(q[0], q[1]), _mm512_max_epi8(q[2], q[3]))
                              : _mm512_max_epu8(_mm512_max_epu8(q[0], q[1]), _mm512_max_epu8(q[2], q[3]));
        m = is_signed ? _mm512_max_epi8(m, _mm512_alignr_epi8(m, m, 8)) : _mm512_max_epu8(m, _mm512_alignr_epi8(m, m, 8));
        m = is_signed ? _mm512_max_epi8(m, _mm512_alignr_epi8(m, m, 4)) : _mm512_max_epu8(m, _mm512_alignr_epi8(m, m, 4));
        __m512 exps[16];
        __m512 sum = _mm512_setzero_ps();
        for (int w = 0; w < 4; w++) {
            // 255 - (maximum - x): the distance from the maximum (0 ... 255) counted down from the table's end.
            const __m512i index = _mm512_xor_si512(_mm512_sub_epi8(m, q[w]), ones);
            const __mmask64 upper = _mm512_movepi8_mask(index);
            __m512i part[4];
            for (int b = 0; b < 4; b++) {
                part[b] = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(plane[b][0], index, plane[b][1]),
                                                 _mm512_permutex2var_epi8(plane[b][2], index, plane[b][3]));
            }
            const __m512i u0 = _mm512_unpacklo_epi8(part[0], part[1]), u1 = _mm512_unpackhi_epi8(part[0], part[1]);
            const __m512i v0 = _mm512_unpacklo_epi8(part[2], part[3]), v1 = _mm512_unpackhi_epi8(part[2], part[3]);
            exps[4 * w + 0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(u0, v0));
            exps[4 * w + 1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(u0, v0));
            exps[4 * w + 2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(u1, v1));
            exps[4 * w + 3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(u1, v1));
        }
        for (int j = 0; j < 16; j++) sum = _mm512_add_ps(sum, exps[j]);
        const __m512 inverse = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(sum, _mm512_set1_ps(output_scale)));
        __m512i packed[4];
        for (int w = 0; w < 4; w++) {
            __m512i v[4];
            for (int k = 0; k < 4; k++) {
                v[k] = softmax_output(exps[4 * w + k], inverse, zero, low, high);
            }
            // Every value is within the output type, so the packs never saturate: byte 16L + 4k + i is v[k]'s lane 4L + i.
            const __m512i a = _mm512_packs_epi32(v[0], v[1]), b = _mm512_packs_epi32(v[2], v[3]);
            packed[w] = is_signed ? _mm512_packs_epi16(a, b) : _mm512_packus_epi16(a, b);
        }
        uint8_t* dst = out + r0 * 16;
        for (int K = 0; K < 4; K++) {
            _mm512_storeu_si512(dst + 64 * K, _mm512_mask_blend_epi8(upper_columns, _mm512_permutex2var_epi8(packed[0], index_rows[K], packed[1]),
                                                                     _mm512_permutex2var_epi8(packed[2], index_rows[K], packed[3])));
        }
    }
}

__attribute__((target("avx512f"))) void spotter_softmax_q8_16rows(const void* input, void* output, size_t rows, size_t depth,
                                                                 int is_signed, const float* table, float output_scale,
                                                                 int32_t output_zero, int32_t lo, int32_t hi) {
    const uint8_t* in = (const uint8_t*)input;
    uint8_t* out = (uint8_t*)output;
    float exps[SPOTTER_SOFTMAX_MAX_DEPTH * 16];
    int32_t lanes[16];
    if (depth == 16 && spotter_has_vbmi()) {
        softmax_q8_16rows_depth16(in, out, rows, is_signed, table, output_scale, output_zero, lo, hi);
        return;
    }
    if (depth % 4 == 0) {
        softmax_q8_16rows_by_words(in, out, rows, depth, is_signed, table, output_scale, output_zero, lo, hi);
        return;
    }
    for (size_t r0 = 0; r0 + 16 <= rows; r0 += 16) {
        const uint8_t* block = in + r0 * depth;
        __m512i maximum = _mm512_set1_epi32(is_signed ? -128 : 0);
        for (size_t j = 0; j < depth; j++) {
            for (int l = 0; l < 16; l++) lanes[l] = is_signed ? (int8_t)block[l * depth + j] : block[l * depth + j];
            maximum = _mm512_max_epi32(maximum, _mm512_loadu_si512(lanes));
        }
        __m512 sum = _mm512_setzero_ps();
        for (size_t j = 0; j < depth; j++) {
            for (int l = 0; l < 16; l++) lanes[l] = is_signed ? (int8_t)block[l * depth + j] : block[l * depth + j];
            // 0 ... 255: the distance from the maximum counted down from the table's end.
            const __m512i index = _mm512_sub_epi32(_mm512_set1_epi32(255), _mm512_sub_epi32(maximum, _mm512_loadu_si512(lanes)));
            const __m512 e = _mm512_i32gather_ps(index, table, 4);
            _mm512_storeu_ps(exps + j * 16, e);
            sum = _mm512_add_ps(sum, e);
        }
        const __m512 inverse = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(sum, _mm512_set1_ps(output_scale)));
        const __m512i zero = _mm512_set1_epi32(output_zero), low = _mm512_set1_epi32(lo), high = _mm512_set1_epi32(hi);
        uint8_t* dst = out + r0 * depth;
        for (size_t j = 0; j < depth; j++) {
            const __m512i v = softmax_output(_mm512_loadu_ps(exps + j * 16), inverse, zero, low, high);
            _mm512_storeu_si512(lanes, v);
            for (int l = 0; l < 16; l++) dst[l * depth + j] = (uint8_t)lanes[l];
        }
    }
}

__attribute__((target("avx512f"))) void spotter_padded_add_f32(const float* a, const float* x, float* y, size_t rows, size_t inner,
                                                             size_t outer, float lo, float hi) {
    const __m512 low = _mm512_set1_ps(lo), high = _mm512_set1_ps(hi), zero = _mm512_setzero_ps();
    for (size_t r = 0; r < rows; r++, a += outer, x += inner, y += outer) {
        for (size_t c = 0; c < outer; c += 16) {
            const __mmask16 all = outer - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (outer - c)) - 1);
            const __mmask16 summed = c >= inner ? 0 : inner - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (inner - c)) - 1);
            // x's lanes past `inner` read as zero: conv + 0.
            const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(all, a + c), summed ? _mm512_maskz_loadu_ps(summed, x + c) : zero);
            _mm512_mask_storeu_ps(y + c, all, _mm512_min_ps(_mm512_max_ps(v, low), high));
        }
    }
}

/// Transposes one 16x16 block of bytes (rows `src_stride` apart) into `dst` (rows `dst_stride`
/// apart): four rounds of interleaving row i with row i + 8. SSE2 instructions; the AVX-512 build
/// of the same code has 32 vector registers, so the 32 rows of a round never go through the stack
/// (4-7x faster).
#define TRANSPOSE_BYTES(NAME, ATTRIBUTES)                                                                   \
    ATTRIBUTES static void NAME(const uint8_t* src, uint8_t* dst, size_t rows, size_t columns, size_t first, \
                                size_t last) {                                                              \
        const size_t whole_rows = rows / 16 * 16;                                                           \
        size_t c = first;                                                                                   \
        for (; c + 16 <= last; c += 16) {                                                                   \
            for (size_t r0 = 0; r0 < whole_rows; r0 += 16) {                                                \
                __m128i r[16], t[16];                                                                       \
                for (int i = 0; i < 16; i++) r[i] = _mm_loadu_si128((const __m128i*)(src + (r0 + (size_t)i) * columns + c)); \
                for (int round = 0; round < 4; round++) {                                                   \
                    for (int i = 0; i < 8; i++) {                                                           \
                        t[2 * i] = _mm_unpacklo_epi8(r[i], r[i + 8]);                                       \
                        t[2 * i + 1] = _mm_unpackhi_epi8(r[i], r[i + 8]);                                   \
                    }                                                                                       \
                    memcpy(r, t, sizeof(r));                                                                \
                }                                                                                           \
                for (int i = 0; i < 16; i++) _mm_storeu_si128((__m128i*)(dst + (c + (size_t)i) * rows + r0), r[i]); \
            }                                                                                               \
            for (size_t r = whole_rows; r < rows; r++) {                                                    \
                for (size_t k = 0; k < 16; k++) dst[(c + k) * rows + r] = src[r * columns + c + k];        \
            }                                                                                               \
        }                                                                                                   \
        for (; c < last; c++) {                                                                             \
            for (size_t r = 0; r < rows; r++) dst[c * rows + r] = src[r * columns + c];                     \
        }                                                                                                   \
    }

TRANSPOSE_BYTES(transpose_bytes_sse2, )
TRANSPOSE_BYTES(transpose_bytes_avx512, __attribute__((target("avx512f,avx512vl,avx512bw"))))

void spotter_transpose_bytes(const uint8_t* src, uint8_t* dst, size_t rows, size_t columns, size_t first, size_t last) {
    __builtin_cpu_init();
    const int wide = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
    (wide ? transpose_bytes_avx512 : transpose_bytes_sse2)(src, dst, rows, columns, first, last);
}
