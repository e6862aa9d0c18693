#include "spotter_kernels.h"

#include <immintrin.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define MR 8

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

/// Writes im2col rows [row_begin, row_end): each output pixel's receptive field, x_zero in padding,
/// zero in the k4 tail.
static void im2col_rows(const spotter_conv* c, const uint8_t* input, int32_t row_begin, int32_t row_end) {
    const int32_t pixels = c->out_h * c->out_w;
    for (int32_t row = row_begin; row < row_end; row++) {
        uint8_t* dst = c->im2col + (size_t)row * c->k4;
        const int32_t b = row / pixels, oy = (row % pixels) / c->out_w, ox = row % c->out_w;
        const int32_t y0 = oy * c->stride_h - c->pad_top, x0 = ox * c->stride_w - c->pad_left;
        for (int32_t ky = 0; ky < c->k_h; ky++) {
            const int32_t y = y0 + ky * c->dil_h;
            for (int32_t kx = 0; kx < c->k_w; kx++) {
                const int32_t x = x0 + kx * c->dil_w;
                if (y < 0 || y >= c->in_h || x < 0 || x >= c->in_w) {
                    memset(dst, c->in_zero, (size_t)c->in_c);
                } else {
                    memcpy(dst, input + (((size_t)b * c->in_h + y) * c->in_w + x) * c->in_c, (size_t)c->in_c);
                }
                dst += c->in_c;
            }
        }
        memset(dst, 0, (size_t)(c->k4 - c->k));
    }
}

typedef struct {
    const spotter_conv* conv;
    const uint8_t* input;
    uint8_t* output;
    int32_t rows;
} task_context;

#define ROWS_PER_TASK 64

TARGET static void conv_task(void* opaque, size_t task) {
    const task_context* t = (const task_context*)opaque;
    const spotter_conv* c = t->conv;
    const int32_t begin = (int32_t)task * ROWS_PER_TASK;
    const int32_t end = begin + ROWS_PER_TASK < t->rows ? begin + ROWS_PER_TASK : t->rows;
    const uint8_t* a;
    int32_t lda;
    if (c->direct) {
        a = t->input;
        lda = c->in_c;
    } else {
        im2col_rows(c, t->input, begin, end);
        a = c->im2col;
        lda = c->k4;
    }
    int32_t sums[ROWS_PER_TASK];
    for (int32_t r = begin; r < end; r++) sums[r - begin] = row_sum(a + (size_t)r * lda, c->k);

    const int32_t blocks = (c->out_c + SPOTTER_CONV_NR - 1) / SPOTTER_CONV_NR;
    const int32_t quads = c->k4 / 4;
    const __m512i out_zero = _mm512_set1_epi32(c->out_zero);
    const __m512i out_min = _mm512_set1_epi32(c->out_min);
    const __m512 out_max_less_zero = _mm512_set1_ps((float)(c->out_max - c->out_zero));
    for (int32_t nb = 0; nb < blocks; nb++) {
        const int8_t* b = c->packed + (size_t)nb * quads * 4 * SPOTTER_CONV_NR;
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
        for (int32_t m = begin; m < end; m += MR) {
            const uint8_t* rows[MR];
            for (int r = 0; r < MR; r++) {
                int32_t row = m + r < end ? m + r : end - 1;
                rows[r] = a + (size_t)row * lda;
            }
            __m512i acc[MR][2];
            for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
            const int8_t* bq = b;
            for (int32_t q = 0; q < quads; q++, bq += 4 * SPOTTER_CONV_NR) {
                const __m512i b0 = _mm512_loadu_si512(bq), b1 = _mm512_loadu_si512(bq + 64);
                for (int r = 0; r < MR; r++) {
                    int32_t word;
                    memcpy(&word, rows[r] + 4 * q, 4);
                    const __m512i av = _mm512_set1_epi32(word);
                    acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, b0);
                    acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, b1);
                }
            }
            for (int r = 0; r < MR && m + r < end; r++) {
                const __m512i sum = _mm512_set1_epi32(sums[m + r - begin]);
                uint8_t* out = t->output + (size_t)(m + r) * c->out_c + n0;
                for (int h = 0; h < 2; h++) {
                    if (!store_mask[h]) continue;
                    __m512i v = _mm512_add_epi32(acc[r][h], _mm512_add_epi32(_mm512_mullo_epi32(factor[h], sum), constant[h]));
                    __m512 f = _mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), scale[h]), out_max_less_zero);
                    v = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), out_zero);
                    v = _mm512_max_epi32(v, out_min);
                    _mm_mask_storeu_epi8(out + 16 * h, store_mask[h], _mm512_cvtepi32_epi8(v));
                }
            }
        }
    }
}

void spotter_conv_run(const spotter_conv* conv, const uint8_t* input, uint8_t* output, pthreadpool_t pool) {
    task_context context = {conv, input, output, conv->batches * conv->out_h * conv->out_w};
    const size_t tasks = (size_t)((context.rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK);
    pthreadpool_parallelize_1d(pool, conv_task, &context, tasks, 0);
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

void spotter_lookup_bytes(const uint8_t* table, const uint8_t* input, uint8_t* output, size_t count, pthreadpool_t pool) {
    lookup_context context = {table, input, output};
    pthreadpool_parallelize_1d_tile_1d(pool, lookup_task, &context, count, 1 << 16, 0);
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
