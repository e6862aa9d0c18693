#include "spotter_imaging.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

// Only the fused multiply-adds written as such: row positions are a product and a sum in double,
// as in OpenCV and in the portable Swift warp.
#pragma clang fp contract(off)

#define TARGET __attribute__((target("avx2,fma")))

int spotter_warp_affine_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/// AVX-512 with VBMI's byte permutes, for the rows of axis-aligned maps.
static int has_vbmi(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
}

typedef struct {
    const uint8_t* src;
    int32_t width, height, stride, channels;
    uint8_t fill;
} source;

/// One destination pixel sampled at (sx, sy), checking every neighbour.
static TARGET void warp_pixel(const source* s, float sx, float sy, uint8_t* out) {
    const int32_t ch = s->channels;
    if (!(fabsf(sx) < 1e9f && fabsf(sy) < 1e9f)) {
        for (int32_t c = 0; c < ch; c++) out[c] = s->fill;
        return;
    }
    const float fx = floorf(sx), fy = floorf(sy);
    const int32_t ix = (int32_t)fx, iy = (int32_t)fy;
    const float alpha = sx - fx, beta = sy - fy;
    if (ix < -1 || iy < -1 || ix >= s->width || iy >= s->height) {
        for (int32_t c = 0; c < ch; c++) out[c] = s->fill;
        return;
    }
    for (int32_t c = 0; c < ch; c++) {
        float p[4];
        for (int32_t k = 0; k < 4; k++) {
            const int32_t px = ix + (k & 1), py = iy + (k >> 1);
            const int inside = px >= 0 && py >= 0 && px < s->width && py < s->height;
            p[k] = inside ? (float)s->src[(size_t)py * (size_t)s->stride + (size_t)px * (size_t)ch + (size_t)c] : (float)s->fill;
        }
        const float top = fmaf(alpha, p[1] - p[0], p[0]), bottom = fmaf(alpha, p[3] - p[2], p[2]);
        const float value = nearbyintf(fmaf(beta, bottom - top, top));
        out[c] = (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
    }
}

/// Channel c of four gathered neighbours, blended and rounded to int32.
static TARGET __m256i blend(__m256i g00, __m256i g01, __m256i g10, __m256i g11, int c, __m256 alpha, __m256 beta) {
    const __m256i byte = _mm256_set1_epi32(0xff);
    const __m256 p00 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(g00, 8 * c), byte));
    const __m256 p01 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(g01, 8 * c), byte));
    const __m256 p10 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(g10, 8 * c), byte));
    const __m256 p11 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(g11, 8 * c), byte));
    const __m256 top = _mm256_fmadd_ps(alpha, _mm256_sub_ps(p01, p00), p00);
    const __m256 bottom = _mm256_fmadd_ps(alpha, _mm256_sub_ps(p11, p10), p10);
    // Round half to even (the default rounding mode), then into 0...255.
    const __m256i v = _mm256_cvtps_epi32(_mm256_fmadd_ps(beta, _mm256_sub_ps(bottom, top), top));
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_setzero_si256()), byte);
}

/// Any map: eight pixels a step, their neighbours gathered.
TARGET static void warp_gathering(const uint8_t* src, size_t src_count, int32_t width, int32_t height, int32_t stride,
                                  int32_t channels, const spotter_warp_map* map, uint8_t fill,
                                  uint8_t* dst, int32_t dst_width, int32_t dst_height) {
    const source s = {src, width, height, stride, channels, fill};
    const int32_t ch = channels;
    // A lane is gathered when its four neighbours are inside and each 4-byte read at the
    // bottom-right neighbour ends within the buffer: offset + stride + ch + 4 <= src_count.
    const int64_t reach = (int64_t)src_count - stride - ch - 4;
    const __m256i last_read = _mm256_set1_epi32(reach < 0 ? -1 : (int32_t)reach);
    const __m256i w1 = _mm256_set1_epi32(width - 1), h1 = _mm256_set1_epi32(height - 1);
    const __m256i vstride = _mm256_set1_epi32(stride), vch = _mm256_set1_epi32(ch), minus1 = _mm256_set1_epi32(-1);
    const __m256 m0 = _mm256_set1_ps(map->m0), m3 = _mm256_set1_ps(map->m3);
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), limit = _mm256_set1_ps(1e9f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const int* base = (const int*)src;
    for (int32_t y = 0; y < dst_height; y++) {
        const float row_x = (float)((double)y * map->b + map->tx), row_y = (float)((double)y * map->d + map->ty);
        const __m256 vrow_x = _mm256_set1_ps(row_x), vrow_y = _mm256_set1_ps(row_y);
        uint8_t* out = dst + (size_t)y * (size_t)dst_width * (size_t)ch;
        int32_t x = 0;
        for (; x + 8 <= dst_width; x += 8) {
            const __m256 xs = _mm256_add_ps(_mm256_set1_ps((float)x), iota);
            const __m256 sx = _mm256_fmadd_ps(m0, xs, vrow_x), sy = _mm256_fmadd_ps(m3, xs, vrow_y);
            const __m256 near = _mm256_and_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, sx), limit, _CMP_LT_OQ),
                                              _mm256_cmp_ps(_mm256_andnot_ps(sign, sy), limit, _CMP_LT_OQ));
            const __m256 fx = _mm256_floor_ps(sx), fy = _mm256_floor_ps(sy);
            const __m256i ix = _mm256_cvttps_epi32(_mm256_and_ps(fx, near)), iy = _mm256_cvttps_epi32(_mm256_and_ps(fy, near));
            const __m256i offset = _mm256_add_epi32(_mm256_mullo_epi32(iy, vstride), _mm256_mullo_epi32(ix, vch));
            __m256i inside = _mm256_and_si256(_mm256_cmpgt_epi32(ix, minus1), _mm256_cmpgt_epi32(iy, minus1));
            inside = _mm256_and_si256(inside, _mm256_and_si256(_mm256_cmpgt_epi32(w1, ix), _mm256_cmpgt_epi32(h1, iy)));
            inside = _mm256_and_si256(inside, _mm256_andnot_si256(_mm256_cmpgt_epi32(offset, last_read), _mm256_castps_si256(near)));
            uint8_t* o = out + (size_t)x * (size_t)ch;
            if (_mm256_movemask_ps(_mm256_castsi256_ps(inside)) != 0xff) {
                float xs_[8], ys_[8];
                _mm256_storeu_ps(xs_, sx);
                _mm256_storeu_ps(ys_, sy);
                for (int k = 0; k < 8; k++) warp_pixel(&s, xs_[k], ys_[k], o + k * ch);
                continue;
            }
            const __m256 alpha = _mm256_sub_ps(sx, fx), beta = _mm256_sub_ps(sy, fy);
            const __m256i below = _mm256_add_epi32(offset, vstride);
            const __m256i g00 = _mm256_i32gather_epi32(base, offset, 1), g10 = _mm256_i32gather_epi32(base, below, 1);
            int32_t packed[8];
            if (ch == 3) {
                const __m256i g01 = _mm256_i32gather_epi32(base, _mm256_add_epi32(offset, vch), 1);
                const __m256i g11 = _mm256_i32gather_epi32(base, _mm256_add_epi32(below, vch), 1);
                const __m256i r = blend(g00, g01, g10, g11, 0, alpha, beta);
                const __m256i g = blend(g00, g01, g10, g11, 1, alpha, beta);
                const __m256i b = blend(g00, g01, g10, g11, 2, alpha, beta);
                _mm256_storeu_si256((__m256i*)packed, _mm256_or_si256(r, _mm256_or_si256(_mm256_slli_epi32(g, 8), _mm256_slli_epi32(b, 16))));
                for (int k = 0; k < 8; k++) memcpy(o + 3 * k, &packed[k], 3);
            } else {
                const __m256i v = blend(g00, _mm256_srli_epi32(g00, 8), g10, _mm256_srli_epi32(g10, 8), 0, alpha, beta);
                _mm256_storeu_si256((__m256i*)packed, v);
                for (int k = 0; k < 8; k++) o[k] = (uint8_t)packed[k];
            }
        }
        for (; x < dst_width; x++) {
            warp_pixel(&s, fmaf(map->m0, (float)x, row_x), fmaf(map->m3, (float)x, row_y), out + (size_t)x * (size_t)ch);
        }
    }
}

#define TARGET_VBMI __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vbmi")))
/// Widest destination the axis-aligned path takes (its column tables live on the stack).
#define MAX_COLUMNS 2048

/// 16 bytes `index` of `bytes` (64 of them) as floats.
TARGET_VBMI static inline __m512 pick(__m512i bytes, __m128i index) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(_mm512_permutexvar_epi8(_mm512_castsi128_si512(index), bytes))));
}

/// RGB24 under a map without rotation or shear (b = c = 0, the face pipeline's region): a source
/// column per destination column and a source row per destination row, the same for the whole
/// picture. Sixteen pixels whose neighbours span at most 64 bytes of a row are read with one
/// (masked) load per row and arranged with byte permutes instead of gathers; every other pixel
/// takes warp_pixel. The positions and the blend are warp_gathering's, so are the bytes.
TARGET_VBMI static void warp_rows_rgb(const uint8_t* src, int32_t width, int32_t height, int32_t stride,
                                      const spotter_warp_map* map, uint8_t fill, uint8_t* dst, int32_t dst_width, int32_t dst_height) {
    const source s = {src, width, height, stride, 3, fill};
    const float row_x = (float)((double)0 * map->b + map->tx);
    float sx[MAX_COLUMNS], alpha[MAX_COLUMNS];
    int32_t ix[MAX_COLUMNS];
    for (int32_t x = 0; x < dst_width; x++) {
        sx[x] = fmaf(map->m0, (float)x, row_x);
        const int near = fabsf(sx[x]) < 1e9f;
        const float fx = near ? floorf(sx[x]) : 0;
        ix[x] = (int32_t)fx;
        alpha[x] = sx[x] - fx;
        if (!near) ix[x] = -2;  // never inside
    }
    // Groups of 16 columns whose neighbours all lie inside the picture and span at most 64 bytes.
    const int32_t groups = dst_width / 16;
    int32_t first[MAX_COLUMNS / 16];
    __mmask64 reads[MAX_COLUMNS / 16];  // the bytes of a row the group reads: (hi - lo) * 3 + 6
    __m128i offsets[MAX_COLUMNS / 16];
    for (int32_t g = 0; g < groups; g++) {
        int32_t lo = ix[16 * g], hi = lo;
        for (int k = 1; k < 16; k++) { lo = ix[16 * g + k] < lo ? ix[16 * g + k] : lo; hi = ix[16 * g + k] > hi ? ix[16 * g + k] : hi; }
        const int32_t bytes = (hi - lo) * 3 + 6;
        first[g] = lo >= 0 && hi <= width - 2 && bytes <= 64 ? lo : -1;
        reads[g] = bytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (bytes > 0 ? bytes : 0)) - 1);
        offsets[g] = _mm512_cvtepi32_epi8(_mm512_mullo_epi32(_mm512_sub_epi32(_mm512_loadu_si512(ix + 16 * g), _mm512_set1_epi32(lo)),
                                                            _mm512_set1_epi32(3)));
    }
    // Byte k * 4 + c of 16 packed RGB0 words, for c < 3: 48 bytes of RGB24.
    uint8_t pack_bytes[64] = {0};
    for (int k = 0; k < 16; k++) for (int c = 0; c < 3; c++) pack_bytes[3 * k + c] = (uint8_t)(4 * k + c);
    const __m512i pack = _mm512_loadu_si512(pack_bytes);
    const __m512i zero = _mm512_setzero_si512(), top_value = _mm512_set1_epi32(255);
    for (int32_t y = 0; y < dst_height; y++) {
        const float row_y = (float)((double)y * map->d + map->ty);
        // Column positions are those of row 0 (b = 0); the row position is one for the whole row
        // (c = 0: fma(0, x, row_y) is row_y).
        const float sy = fmaf(map->m3, 0.0f, row_y);
        uint8_t* out = dst + (size_t)y * (size_t)dst_width * 3;
        const int near = fabsf(sy) < 1e9f;
        const float fy = near ? floorf(sy) : 0;
        const int32_t iy = (int32_t)fy;
        const int rows_inside = near && iy >= 0 && iy < height - 1;
        const __m512 beta = _mm512_set1_ps(sy - fy);
        int32_t x = 0;
        for (int32_t g = 0; g < groups; g++) {
            if (!rows_inside || first[g] < 0) continue;
            // Pixels before this group (an edge, or a group that did not qualify) one at a time.
            for (; x < 16 * g; x++) warp_pixel(&s, sx[x], sy, out + 3 * (size_t)x);
            const uint8_t* top = src + (size_t)iy * (size_t)stride + (size_t)first[g] * 3;
            const __m512i t = _mm512_maskz_loadu_epi8(reads[g], top), b = _mm512_maskz_loadu_epi8(reads[g], top + stride);
            const __m512 a = _mm512_loadu_ps(alpha + 16 * g);
            __m512i rgb = zero;
            for (int c = 0; c < 3; c++) {
                const __m128i left = _mm_add_epi8(offsets[g], _mm_set1_epi8((char)c)), right = _mm_add_epi8(offsets[g], _mm_set1_epi8((char)(3 + c)));
                const __m512 p00 = pick(t, left), p01 = pick(t, right), p10 = pick(b, left), p11 = pick(b, right);
                const __m512 upper = _mm512_fmadd_ps(a, _mm512_sub_ps(p01, p00), p00);
                const __m512 lower = _mm512_fmadd_ps(a, _mm512_sub_ps(p11, p10), p10);
                __m512i v = _mm512_cvtps_epi32(_mm512_fmadd_ps(beta, _mm512_sub_ps(lower, upper), upper));
                v = _mm512_min_epi32(_mm512_max_epi32(v, zero), top_value);
                rgb = _mm512_or_si512(rgb, _mm512_slli_epi32(v, 8 * c));
            }
            _mm512_mask_storeu_epi8(out + 3 * (size_t)x, (((__mmask64)1 << 48) - 1), _mm512_permutexvar_epi8(pack, rgb));
            x += 16;
        }
        for (; x < dst_width; x++) warp_pixel(&s, sx[x], sy, out + 3 * (size_t)x);
    }
}

void spotter_warp_affine_u8(const uint8_t* src, size_t src_count, int32_t width, int32_t height, int32_t stride,
                            int32_t channels, const spotter_warp_map* map, uint8_t fill,
                            uint8_t* dst, int32_t dst_width, int32_t dst_height, int gather_only) {
    if (!gather_only && has_vbmi() && channels == 3 && map->m3 == 0 && map->b == 0 && dst_width <= MAX_COLUMNS) {
        warp_rows_rgb(src, width, height, stride, map, fill, dst, dst_width, dst_height);
    } else {
        warp_gathering(src, src_count, width, height, stride, channels, map, fill, dst, dst_width, dst_height);
    }
}
