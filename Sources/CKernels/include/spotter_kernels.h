// Hand-written SIMD kernels that Swift cannot express: Swift has no per-function CPU target
// features, and enabling AVX2 or AVX-512 for a whole target needs unsafeFlags. Each kernel checks
// the CPU at run time (spotter_has_vnni, spotter_has_avx2_fma, spotter_has_avx512f) and is only called
// where it returns 1.
#ifndef SPOTTER_KERNELS_H
#define SPOTTER_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <pthreadpool.h>

/// Output channels per packed weight block.
#define SPOTTER_CONV_NR 32

/// Processors in this process's CPU affinity mask (taskset, containers), or -1.
int spotter_affinity_cpu_count(void);

/// glibc: two heaps for all threads (`MALLOC_ARENA_MAX` in the environment takes precedence).
void spotter_keep_heap_compact(void);

/// glibc: gives the free pages of every heap back to the system (malloc_trim).
void spotter_release_free_memory(void);

/// 1 when the CPU and OS support AVX-512 F/BW/VL with VNNI, else 0.
int spotter_has_vnni(void);

/// Filter rows per receptive field that spotter_conv_run reads in place, at most.
#define SPOTTER_CONV_MAX_SEGMENTS 16

/// An 8-bit convolution as a GEMM on VNNI: uint8 (TFLite's asymmetric per-tensor scheme) or int8
/// (weights with zero point 0, per-channel scales). The GEMM's A rows (receptive fields) are read in
/// place where they can be: a 1x1 layer's input rows (`direct`); with `row_stride`, each filter row in
/// the input (its taps are consecutive: no dilation along x), copied only at the edges; otherwise
/// whole im2col rows.
///
/// `row_stride` 0: k is packed densely (k4 = k rounded up to 4). Otherwise each filter row's
/// k_w * in_c bytes are packed padded with zero weights to `row_stride` bytes (that length rounded
/// up to 4; k4 = k_h * row_stride, k_h at most SPOTTER_CONV_MAX_SEGMENTS) and the kernel reads
/// `row_stride` bytes from each filter row's start: the bytes past the row meet zero weights (an RGB
/// layer's 9-byte rows are read as 12 instead of being copied).
///
/// VNNI multiplies unsigned bytes by signed ones. The A bytes (input or im2col) are read XOR `a_flip`:
/// 0 for uint8, 0x80808080 for int8 (no other value), which makes each int8 x the unsigned x + 128. Weights are packed
/// by the caller as [n block][k/4][32 channels][4 bytes] of int8: w - 128 for uint8 weights, w for
/// int8 ones; zero for k past the kernel and channels past out_c. Accumulators are exact:
///   acc = dot(a, packed) + col_factor[n] * sum_k(x) + col_const[n]
/// uint8: col_factor = 128 - w_zero, col_const = bias - x_zero * sum_k(w - w_zero);
/// int8: col_factor = 0 (row sums are skipped), col_const = bias - (128 + x_zero) * sum_k(w).
/// Padded taps read x_zero. The output is requantized as XNNPACK (and so LiteRT's default CPU path) does:
///   out = max(min(rint(float(acc) * scale[n]), out_max - out_zero) + out_zero, out_min)
/// Each task's copies (im2col rows, or edge pixels' filter rows; 8 to 64 rows) live on its stack, at
/// most SPOTTER_CONV_MAX_TASK_BYTES plus one filter row; callers keep k4 <= SPOTTER_CONV_MAX_TASK_BYTES / 8.
typedef struct spotter_conv {
    int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t k_h, k_w, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int32_t k;         ///< k_h * k_w * in_c
    int32_t k4;        ///< k rounded up to a multiple of 4
    int32_t direct;    ///< 1: 1x1, stride 1, no padding, in_c % 4 == 0: the input is the GEMM's A matrix
    int32_t row_stride; ///< 0, or the padded filter row length in bytes (see above)
    int32_t in_zero;   ///< input zero point
    int32_t a_flip;    ///< XORed into every 4 A bytes: 0 (uint8) or 0x80808080 (int8)
    int32_t out_zero, out_min, out_max;
    const int8_t* packed;        ///< (out_c rounded up to 32) * k4 bytes
    const int32_t* col_factor;   ///< per channel, padded to a multiple of 32
    const int32_t* col_const;
    const float* scale;          ///< input_scale * w_scale[n] / output_scale per channel
    /// NULL for an 8-bit output. Otherwise the output is float (hybrid weights over an input
    /// quantized at run time): float(acc + col_const[n]) * scale[n] + out_bias[n] clamped to
    /// [out_min_f, out_max_f], with scale[n] = input_scale * w_scale[n]; out_bias padded as col_const.
    const float* out_bias;
    float out_min_f, out_max_f;
    /// Float output only: NULL, or a PReLU applied to each output after the clamp, as
    /// spotter_prelu_f32 computes it (alpha and scale padded as col_const), then clamped to
    /// [prelu_min, prelu_max].
    const float* prelu_alpha;
    const float* prelu_scale;
    float prelu_min, prelu_max;
    /// 8-bit output only: NULL, or 256 bytes each output byte is looked up in after it is stored
    /// (a SiLU after the layer); needs AVX-512 VBMI (spotter_has_vbmi).
    const uint8_t* out_table;
} spotter_conv;

/// Bytes of im2col rows one task of spotter_conv_run keeps on its stack, at most.
#define SPOTTER_CONV_MAX_TASK_BYTES (96 * 1024)

/// Runs the convolution; rows of the output are split across the pool's threads (pool may be NULL).
/// `output` holds bytes, or floats when conv->out_bias is set.
void spotter_conv_run(const spotter_conv* conv, const uint8_t* input, void* output, pthreadpool_t pool);

/// Runs a 1x1 convolution that reads its input in place (conv->direct) from `count` tensors (1 to
/// SPOTTER_CONV_MAX_SEGMENTS) whose channel concatenation it is: part s has channels[s] channels (a
/// multiple of 4) per pixel at parts[s], and the channels add up to conv->in_c. `count` 0 reads
/// parts[0] as the whole input.
void spotter_conv_run_parts(const spotter_conv* conv, const uint8_t* const* parts, const int32_t* channels, int32_t count,
                            void* output, pthreadpool_t pool);

/// The smallest and largest of `count` floats (count > 0), on AVX-512 (VNNI machines); spans of
/// the floats are split across the pool's threads (pool may be NULL).
void spotter_min_max_f32(const float* x, size_t count, float* min, float* max, pthreadpool_t pool);

/// y = clamp(rint(x * inverse_scale) + zero, -128, 127) for `count` floats, on AVX-512, rounding to
/// nearest even (a NaN, or a product beyond int32, gives -128 or 127: never out of range); spans
/// split across the pool's threads.
void spotter_quantize_s8(const float* x, int8_t* y, size_t count, float inverse_scale, int32_t zero, pthreadpool_t pool);

/// Whether the CPU has AVX-512 VBMI (byte permutes), which spotter_conv's out_table needs.
int spotter_has_vbmi(void);

/// y = x * sigmoid(x) (SiLU) for `count` floats (y may be x), in blocks of 64 KiB across the pool's
/// threads; within about two units in the last place of the exact value. AVX-512F
/// (spotter_has_avx512f).
void spotter_silu_f32(const float* x, float* y, size_t count, pthreadpool_t pool);

/// output[i] = table[input[i]] for `count` bytes, in blocks of 64 KiB across the pool's threads
/// (64 bytes per step with AVX-512 VBMI where the CPU has it).
void spotter_lookup_bytes(const uint8_t* table, const uint8_t* input, uint8_t* output, size_t count, pthreadpool_t pool);

/// PReLU as TensorFlow spells it, `max(x, 0) + ((x - |x|) * alpha) * scale` clamped to [lo, hi],
/// over `rows` rows of `channels` floats (alpha and scale one per channel), on AVX2.
void spotter_prelu_f32(const float* x, float* y, size_t rows, size_t channels, const float* alpha, const float* scale,
                       float lo, float hi);

/// 1 when the CPU and OS support AVX2 and FMA, else 0.
int spotter_has_avx2_fma(void);

/// A float32 NHWC convolution (TFLite's CONV_2D: OHWI weights, one group) on AVX2 and FMA, tiles of
/// 6 pixels by 16 channels, each filter row (each tap when dilated along x) read through a pointer
/// into the input, to zeros, or to a copy where the row hangs over an edge.
typedef struct spotter_conv_f32 {
    int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t k_h, k_w, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    float out_min, out_max;      ///< the fused activation's clamp
    const float* packed;         ///< made by spotter_conv_f32_pack
    const float* zero;           ///< k_w * in_c zeros, read for filter rows in the padding
    /// NULL, or a PReLU applied to each output after the clamp, as spotter_prelu_f32 computes it:
    /// alpha and scale each readable for out_c rounded up to a multiple of 32 values, then the
    /// clamp to [prelu_min, prelu_max].
    const float* prelu_alpha;
    const float* prelu_scale;
    float prelu_min, prelu_max;
    /// NULL, or made by spotter_conv_bf16_pack: the products then take inputs and weights rounded
    /// to bfloat16 and sum them in float32 (needs spotter_has_avx512_bf16).
    const uint16_t* packed_bf16;
    /// With packed_bf16: spotter_conv_bf16_rounded_count(conv) uint16s the input is rounded into
    /// at each run (none for a 1x1 layer, whose tiles round their own pixels).
    uint16_t* rounded_input;
} spotter_conv_f32;

/// Floats spotter_conv_f32_pack writes: blocks of 16 channels (the last of 8 when at most 8 remain),
/// each 16 biases then k_h * k_w * in_c rows of 16 weights, zero past out_c.
size_t spotter_conv_f32_packed_count(const spotter_conv_f32* conv);

/// Packs OHWI `weights` and `bias` (NULL: zeros) for the kernel.
void spotter_conv_f32_pack(const spotter_conv_f32* conv, const float* weights, const float* bias, float* packed);

/// 1 when the CPU and OS support AVX-512 with BF16 (`vdpbf16ps`), else 0.
int spotter_has_avx512_bf16(void);

/// uint16s spotter_conv_bf16_pack writes: per block of 16 channels (a last block of at most 8 that
/// follows a block of 16 is 8 wide), the block's float biases, then per segment (a filter row, or a tap when dilated along x) its values in
/// pairs (a zero after an odd count), each pair one 32-bit lane per channel.
size_t spotter_conv_bf16_packed_count(const spotter_conv_f32* conv);

/// uint16s of spotter_conv_f32.rounded_input: the input's values, or 0 for a 1x1 layer.
size_t spotter_conv_bf16_rounded_count(const spotter_conv_f32* conv);

/// Packs OHWI `weights` rounded to bfloat16 (to nearest, ties to even) and `bias` (NULL: zeros).
void spotter_conv_bf16_pack(const spotter_conv_f32* conv, const float* weights, const float* bias, uint16_t* packed);

/// Runs the convolution; tiles of output pixels are split across the pool's threads (pool may be NULL).
void spotter_conv_f32_run(const spotter_conv_f32* conv, const float* input, float* output, pthreadpool_t pool);

/// An 8-bit NHWC convolution (TFLite's CONV_2D on uint8 with per-tensor, or int8 with per-channel
/// quantization) on AVX2: exact int32 sums of (x - x_zero) * (w - w_zero) plus the bias, requantized
/// as XNNPACK does (and so LiteRT's default CPU path):
///   out = max(rint(min(float(acc) * scale[n], out_max - out_zero)) + out_zero, out_min)
typedef struct spotter_conv_q8 {
    int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t k_h, k_w, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int32_t is_signed;           ///< 1: int8 tensors, 0: uint8
    int32_t in_zero, out_zero, out_min, out_max;
    const int16_t* packed;       ///< made by spotter_conv_q8_pack
    const int32_t* bias;         ///< per channel, out_c rounded up to 16 (zeros past out_c)
    const float* scale;          ///< input_scale * w_scale[n] / output_scale, rounded up to 16 likewise
} spotter_conv_q8;

/// int16 values spotter_conv_q8_pack writes: per block of 16 channels, (k + 1) / 2 pairs of k, each
/// holding both weights of every channel (w - w_zero), zero past k and out_c.
size_t spotter_conv_q8_packed_count(const spotter_conv_q8* conv);

/// Packs OHWI `weights` (int8 when is_signed, else uint8) with per-channel `weight_zero`.
void spotter_conv_q8_pack(const spotter_conv_q8* conv, const void* weights, const int32_t* weight_zero, int16_t* packed);

/// Runs the convolution; tiles of output pixels are split across the pool's threads (pool may be NULL).
void spotter_conv_q8_run(const spotter_conv_q8* conv, const void* input, void* output, pthreadpool_t pool);

/// 1 when the CPU and OS support AVX-512F, else 0.
int spotter_has_avx512f(void);

/// Longest row spotter_softmax_q8_16rows takes.
#define SPOTTER_SOFTMAX_MAX_DEPTH 64

/// 8-bit SOFTMAX over rows of `depth` (at most SPOTTER_SOFTMAX_MAX_DEPTH) values, 16 rows at a time
/// (rows past the last multiple of 16 are left to the caller), on AVX-512F. Per row, as the scalar
/// kernel: e = table[255 - (max - x)] for each value, their sum in order, then
/// clamp(round_half_away(e * (1 / (sum * output_scale))) + output_zero, lo, hi).
void spotter_softmax_q8_16rows(const void* input, void* output, size_t rows, size_t depth, int is_signed,
                               const float* table, float output_scale, int32_t output_zero, int32_t lo, int32_t hi);

/// Rows of y = clamp(a + x) over the first `inner` of `outer` channels and clamp(a + 0) over the
/// rest (ADD of a tensor and another zero-padded along its channels), with XNNPACK's clamp: the
/// maximum with lo, then the minimum with hi. AVX-512F (spotter_has_avx512f).
void spotter_padded_add_f32(const float* a, const float* x, float* y, size_t rows, size_t inner, size_t outer, float lo, float hi);

/// A float32 NHWC depthwise convolution (TFLite's DEPTHWISE_CONV_2D with depth multiplier 1: a
/// [1, k_h, k_w, channels] filter) on AVX-512F (spotter_has_avx512f): per output pixel and block of
/// 16 channels, the bias plus each tap's product in filter order (row by row), then the clamp.
typedef struct spotter_dwconv_f32 {
    int32_t batches, in_h, in_w, channels, out_h, out_w;
    int32_t k_h, k_w, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    float out_min, out_max;      ///< the fused activation's clamp
    const float* packed;         ///< made by spotter_dwconv_f32_pack
    const float* zero_row;       ///< in_w * channels zeros, read for filter rows in the padding
    /// NULL, or a PReLU applied to each output after the clamp, as spotter_prelu_f32 computes it:
    /// alpha and scale each readable for `channels` rounded up to a multiple of 16, then the clamp
    /// to [prelu_min, prelu_max].
    const float* prelu_alpha;
    const float* prelu_scale;
    float prelu_min, prelu_max;
} spotter_dwconv_f32;

/// Floats spotter_dwconv_f32_pack writes: per block of 16 channels, 16 biases then k_h * k_w
/// vectors of 16 weights, zero past `channels`.
size_t spotter_dwconv_f32_packed_count(const spotter_dwconv_f32* conv);

/// Packs the [1, k_h, k_w, channels] `weights` and `bias` (NULL: zeros) for the kernel.
void spotter_dwconv_f32_pack(const spotter_dwconv_f32* conv, const float* weights, const float* bias, float* packed);

/// Runs the convolution; output rows are split across the pool's threads (pool may be NULL).
void spotter_dwconv_f32_run(const spotter_dwconv_f32* conv, const float* input, float* output, pthreadpool_t pool);

/// Output rows [first, last) of a [rows, columns] byte matrix transposed: dst[c * rows + r] =
/// src[r * columns + c], in 16x16 blocks (SSE2).
void spotter_transpose_bytes(const uint8_t* src, uint8_t* dst, size_t rows, size_t columns, size_t first, size_t last);

/// Rows of a product of two activation matrices (attention's BATCH_MATMUL, FULLY_CONNECTED with
/// activation weights): out[i * n + j] = sum over p < k of a(i, p) * b[p * n + j] for i < rows,
/// j < n, with a(i, p) = a[i * a_row + p * a_column] (either layout of A, read in place). int8: A less
/// `a_zero`, B given as int16 values already less their zero point; exact int32 sums (|a - a_zero| and
/// |b| at most 255: k below 2^15). float: summed over p in order.
void spotter_matmul_rows_s8(const int8_t* a, size_t a_row, size_t a_column, int32_t a_zero, const int16_t* b, int32_t* out,
                            size_t rows, size_t n, size_t k);
void spotter_matmul_rows_f32(const float* a, size_t a_row, size_t a_column, const float* b, float* out, size_t rows, size_t n, size_t k);

#endif
