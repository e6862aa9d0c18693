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

TARGET void spotter_warp_affine_u8(const uint8_t* src, size_t src_count, int32_t width, int32_t height, int32_t stride,
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
