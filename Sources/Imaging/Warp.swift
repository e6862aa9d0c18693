internal import CImaging

extension Image {
    /// The picture transformed by `map` into a `size` picture, as OpenCV's `warpAffine` (5.x) with
    /// `INTER_LINEAR` and a constant border computes it: `map` takes source pixel positions to
    /// destination ones (pixel centres at integer coordinates); each destination pixel samples the
    /// source at the inverse map's position, in float32 with fused multiply-adds, bilinearly, rounded
    /// half to even. Neighbours outside the source read `fill`. RGB24 or GRAY8 only.
    public func warpedAffine(_ map: AffineMap, to size: Size, fill: UInt8 = 0) -> Image {
        warpedAffine(map, to: size, fill: fill, path: .fastest)
    }

    /// Which of the warp's implementations runs (tests compare them).
    package enum WarpPath {
        /// The kernel's fastest path for the map and CPU, else the portable Swift warp.
        case fastest
        /// The kernel, gathering every pixel's neighbours (no row path for axis-aligned maps).
        case gathering
        /// The portable Swift warp.
        case portable
    }

    /// Whether this machine runs the warp's AVX2 kernel (else the portable Swift one).
    package static let warpHasKernel = spotter_warp_affine_available() != 0

    /// `warpedAffine` on the given path. The portable path emulates each fused multiply-add in
    /// double, which rounds twice: it can differ from a true fused multiply-add (OpenCV's, the
    /// kernel's) in rare ties.
    package func warpedAffine(_ map: AffineMap, to size: Size, fill: UInt8, path: WarpPath) -> Image {
        precondition(format == .rgb24 || format == .gray8, "warp RGB24 or GRAY8 pictures; convert \(format) first")
        // The inverse as OpenCV computes it (in double, multiplying by 1/determinant).
        let r = 1 / (map.a * map.d - map.b * map.c)
        let ia = map.d * r, ib = -map.b * r, ic = -map.c * r, id = map.a * r
        let itx = -ia * map.tx - ib * map.ty, ity = -ic * map.tx - id * map.ty
        if path != .portable, Self.warpHasKernel, data.count < Int(Int32.max), size.width < Int(Int32.max) / 4 {
            var out = Image(width: size.width, height: size.height, format: format)
            var inverse = spotter_warp_map(m0: Float(ia), m3: Float(ic), b: ib, d: id, tx: itx, ty: ity)
            out.data.withUnsafeMutableBufferPointer { dst in
                data.withUnsafeBufferPointer { src in
                    spotter_warp_affine_u8(src.baseAddress, src.count, Int32(width), Int32(height), Int32(strides[0]),
                                           Int32(format.bytesPerPixel), &inverse, fill, dst.baseAddress,
                                           Int32(size.width), Int32(size.height), path == .gathering ? 1 : 0)
                }
            }
            return out
        }
        let channels = format.bytesPerPixel, stride = strides[0]
        var out = Image(width: size.width, height: size.height, format: format)
        let (w, h, fillValue) = (width, height, Float(fill))
        let (m0, m3) = (Float(ia), Float(ic))
        // OpenCV's fused multiply-adds, computed in Double (the float product is exact there) and
        // rounded once to Float: without -mfma, Float.addingProduct is a libm call per use.
        @inline(__always) func fused(_ a: Float, _ b: Float, _ c: Float) -> Float { Float(Double(a) * Double(b) + Double(c)) }
        out.data.withUnsafeMutableBufferPointer { dst in
            data.withUnsafeBufferPointer { src in
                func at(_ px: Int, _ py: Int, _ c: Int) -> Float {
                    px >= 0 && py >= 0 && px < w && py < h ? Float(src[py * stride + px * channels + c]) : fillValue
                }
                for y in 0..<size.height {
                    // Per row in double, then float: OpenCV's M_x and M_y.
                    let rowX = Float(Double(y) * ib + itx), rowY = Float(Double(y) * id + ity)
                    for x in 0..<size.width {
                        let sx = fused(m0, Float(x), rowX), sy = fused(m3, Float(x), rowY)
                        let d = (y * size.width + x) * channels
                        // Far outside (or not a number): the fill, before converting to Int.
                        guard abs(sx) < 1e9, abs(sy) < 1e9 else {
                            for c in 0..<channels { dst[d + c] = fill }
                            continue
                        }
                        // Not Float.rounded: five libm calls per pixel made the warp several times slower.
                        let ix = Rounding.floor(sx), iy = Rounding.floor(sy)
                        let alpha = sx - Float(ix), beta = sy - Float(iy)
                        if ix < -1 || iy < -1 || ix >= w || iy >= h {
                            for c in 0..<channels { dst[d + c] = fill }
                            continue
                        }
                        let inside = ix < w - 1 && iy < h - 1 && ix >= 0 && iy >= 0
                        for c in 0..<channels {
                            let p00, p01, p10, p11: Float
                            if inside {
                                let s = iy * stride + ix * channels + c
                                (p00, p01) = (Float(src[s]), Float(src[s + channels]))
                                (p10, p11) = (Float(src[s + stride]), Float(src[s + stride + channels]))
                            } else {
                                (p00, p01, p10, p11) = (at(ix, iy, c), at(ix + 1, iy, c), at(ix, iy + 1, c), at(ix + 1, iy + 1, c))
                            }
                            let top = fused(alpha, p01 - p00, p00), bottom = fused(alpha, p11 - p10, p10)
                            let value = Rounding.nearestEven(fused(beta, bottom - top, top))
                            dst[d + c] = UInt8(min(max(value, 0), 255))
                        }
                    }
                }
            }
        }
        return out
    }
}
