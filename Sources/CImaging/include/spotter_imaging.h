// The affine warp's kernel. OpenCV's warpAffine computes each sample position and each bilinear
// blend with fused multiply-adds; Swift cannot emit FMA or AVX2 gathers without unsafeFlags, and
// emulating FMA in double made the warp the slowest step of the face pipeline. Called only where
// spotter_warp_affine_available() returns 1.
#ifndef SPOTTER_IMAGING_H
#define SPOTTER_IMAGING_H

#include <stddef.h>
#include <stdint.h>

/// 1 when the CPU and OS support AVX2 and FMA, else 0.
int spotter_warp_affine_available(void);

/// Where each destination pixel samples the source: x_src = fma(m0, x, row_x(y)),
/// y_src = fma(m3, x, row_y(y)), with row_x(y) = (float)(y * b + tx) and row_y(y) = (float)(y * d + ty)
/// computed in double (OpenCV's M_x and M_y), m0 and m3 the inverse map's a and c as floats.
typedef struct {
    float m0, m3;
    double b, d, tx, ty;
} spotter_warp_map;

/// Bilinear warp of an 8-bit picture with 1 or 3 interleaved channels: each channel blends as
/// fma(beta, bottom - top, top) with top = fma(alpha, p01 - p00, p00), rounded half to even.
/// Neighbours outside the source, and positions at or beyond 1e9 (or not a number), read `fill`.
/// `src_count` is the number of readable bytes at `src` (below 2^31); `dst` is packed rows of
/// dst_width * channels bytes. Eight pixels a step with their neighbours gathered; for RGB24 under
/// maps without rotation or shear (b = c = 0), on CPUs with AVX-512 VBMI, sixteen a step with one
/// load per source row and byte permutes (the same bytes), unless `gather_only` (tests compare them).
void spotter_warp_affine_u8(const uint8_t* src, size_t src_count, int32_t width, int32_t height, int32_t stride,
                            int32_t channels, const spotter_warp_map* map, uint8_t fill,
                            uint8_t* dst, int32_t dst_width, int32_t dst_height, int gather_only);

#endif
