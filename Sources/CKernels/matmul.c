// Products of two activation matrices (attention: BATCH_MATMUL, and FULLY_CONNECTED whose weights
// are an activation), one output row at a time as a sum of B's rows scaled by A's values:
// out[i][j] = sum over p < k of a(i, p) * b[p][j], with a(i, p) = a[i * a_row + p * a_column]. The
// loop over j is contiguous, so the compiler vectorizes it for the target (AVX2 here: eight int32 or
// float lanes) with no horizontal sums; the float sum over p keeps its order.
#include "spotter_kernels.h"

// Columns go in blocks of MATMUL_BLOCK, each summed over all of K in a local array the compiler
// keeps in registers, and stored once. Summing into the output row itself reloaded and stored it
// for every p, and its speed then depended on where that row (on the caller's stack) lay: perf put
// the time on those loads and stores, and attention-yolo-int8 took 0.86 or 1.05 ms depending on
// the build (4 KiB aliasing with B's rows, most likely).
#define MATMUL_BLOCK 64
#define MATMUL_ROWS(T, X)                                                                \
    for (size_t i = 0; i < rows; i++) {                                                  \
        T* o = out + i * n;                                                              \
        size_t j0 = 0;                                                                   \
        for (; j0 + MATMUL_BLOCK <= n; j0 += MATMUL_BLOCK) {                             \
            T acc[MATMUL_BLOCK] = {0};                                                   \
            for (size_t p = 0; p < k; p++) {                                             \
                const T x = X;                                                           \
                const __typeof__(*b)* row = b + p * n + j0;                              \
                for (size_t j = 0; j < MATMUL_BLOCK; j++) acc[j] += x * (T)row[j];       \
            }                                                                            \
            for (size_t j = 0; j < MATMUL_BLOCK; j++) o[j0 + j] = acc[j];                \
        }                                                                                \
        for (size_t j = j0; j < n; j++) o[j] = 0;                                        \
        for (size_t p = 0; p < k && j0 < n; p++) {                                       \
            const T x = X;                                                               \
            const __typeof__(*b)* row = b + p * n;                                       \
            for (size_t j = j0; j < n; j++) o[j] += x * (T)row[j];                       \
        }                                                                                \
    }
#define MATMUL_ROWS_S8 MATMUL_ROWS(int32_t, (int32_t)a[i * a_row + p * a_column] - a_zero)

__attribute__((target("avx2,fma"))) static void matmul_rows_s8_avx2(
    const int8_t* a, size_t a_row, size_t a_column, int32_t a_zero, const int16_t* b, int32_t* out, size_t rows, size_t n, size_t k) {
    MATMUL_ROWS_S8
}

static void matmul_rows_s8_plain(
    const int8_t* a, size_t a_row, size_t a_column, int32_t a_zero, const int16_t* b, int32_t* out, size_t rows, size_t n, size_t k) {
    MATMUL_ROWS_S8
}

void spotter_matmul_rows_s8(const int8_t* a, size_t a_row, size_t a_column, int32_t a_zero, const int16_t* b, int32_t* out,
                            size_t rows, size_t n, size_t k) {
    if (spotter_has_avx2_fma()) matmul_rows_s8_avx2(a, a_row, a_column, a_zero, b, out, rows, n, k);
    else matmul_rows_s8_plain(a, a_row, a_column, a_zero, b, out, rows, n, k);
}

#define MATMUL_ROWS_F32 MATMUL_ROWS(float, a[i * a_row + p * a_column])

__attribute__((target("avx2,fma"))) static void matmul_rows_f32_avx2(
    const float* a, size_t a_row, size_t a_column, const float* b, float* out, size_t rows, size_t n, size_t k) {
    MATMUL_ROWS_F32
}

static void matmul_rows_f32_plain(const float* a, size_t a_row, size_t a_column, const float* b, float* out, size_t rows, size_t n, size_t k) {
    MATMUL_ROWS_F32
}

void spotter_matmul_rows_f32(const float* a, size_t a_row, size_t a_column, const float* b, float* out, size_t rows, size_t n, size_t k) {
    if (spotter_has_avx2_fma()) matmul_rows_f32_avx2(a, a_row, a_column, b, out, rows, n, k);
    else matmul_rows_f32_plain(a, a_row, a_column, b, out, rows, n, k);
}
