extension Image {
    /// This image in another pixel format (BT.601 for YUV formats, in ``yuvRange``).
    ///
    /// Alpha is dropped when converting to formats without it and set to 255 when adding it.
    /// Chroma is averaged over 2x2 blocks when converting to NV12, NV21 or I420.
    public func converted(to target: PixelFormat, yuvRange range: YUVRange? = nil) -> Image {
        let tight = strides == Image.planeLayout(width: width, height: height, format: format).map(\.rowBytes)
        if target == format && (range == nil || range == yuvRange) && tight {
            return self
        }
        let rgb = format == .rgb24 && tight ? self : toRGB()
        return target == .rgb24 ? rgb : rgb.fromRGB(to: target, range: range ?? yuvRange)
    }

    /// Decodes any format to tightly packed RGB24.
    private func toRGB() -> Image {
        var out = Image(width: width, height: height, format: .rgb24)
        out.data.withUnsafeMutableBufferPointer { dst in
            data.withUnsafeBufferPointer { src in
                if format.isYUV {
                    decodeYUV(src, dst)
                } else {
                    decodePacked(src, dst)
                }
            }
        }
        return out
    }

    private func decodePacked(_ src: UnsafeBufferPointer<UInt8>, _ dst: UnsafeMutableBufferPointer<UInt8>) {
        // Offsets of R, G, B within a pixel.
        let (r, g, b): (Int, Int, Int)
        switch format {
        case .bgr24, .bgra: (r, g, b) = (2, 1, 0)
        case .argb: (r, g, b) = (1, 2, 3)
        default: (r, g, b) = (0, 1, 2)
        }
        let bpp = format.bytesPerPixel, stride = strides[0]
        for y in 0..<height {
            var s = y * stride, d = y * width * 3
            for _ in 0..<width {
                if format == .gray8 {
                    dst[d] = src[s]; dst[d + 1] = src[s]; dst[d + 2] = src[s]
                } else {
                    dst[d] = src[s + r]; dst[d + 1] = src[s + g]; dst[d + 2] = src[s + b]
                }
                s += bpp
                d += 3
            }
        }
    }

    private func decodeYUV(_ src: UnsafeBufferPointer<UInt8>, _ dst: UnsafeMutableBufferPointer<UInt8>) {
        // Fixed-point BT.601 coefficients (x256) for video and full range.
        let video = yuvRange == .video
        let (cy, crv, cgu, cgv, cbu): (Int32, Int32, Int32, Int32, Int32) = video ? (298, 409, 100, 208, 516) : (256, 359, 88, 183, 454)
        let yOffset: Int32 = video ? 16 : 0
        @inline(__always) func clamp(_ v: Int32) -> UInt8 { UInt8(clamping: v >> 8) }
        for y in 0..<height {
            let row = planeOffsets[0] + y * strides[0]
            let cy0 = y / 2
            for x in 0..<width {
                let cx = x / 2
                let u: Int32, v: Int32
                switch format {
                case .nv12:
                    let c = planeOffsets[1] + cy0 * strides[1] + 2 * cx
                    (u, v) = (Int32(src[c]), Int32(src[c + 1]))
                case .nv21:
                    let c = planeOffsets[1] + cy0 * strides[1] + 2 * cx
                    (v, u) = (Int32(src[c]), Int32(src[c + 1]))
                default:
                    u = Int32(src[planeOffsets[1] + cy0 * strides[1] + cx])
                    v = Int32(src[planeOffsets[2] + cy0 * strides[2] + cx])
                }
                let luma: Int32 = Int32(src[row + x]) - yOffset
                let l: Int32 = cy * luma + 128
                let du: Int32 = u - 128, dv: Int32 = v - 128
                let d = (y * width + x) * 3
                let red: Int32 = l + crv * dv
                let green: Int32 = l - cgu * du - cgv * dv
                let blue: Int32 = l + cbu * du
                dst[d] = clamp(red)
                dst[d + 1] = clamp(green)
                dst[d + 2] = clamp(blue)
            }
        }
    }

    /// Encodes this RGB24 image to `target`.
    private func fromRGB(to target: PixelFormat, range: YUVRange) -> Image {
        var out = Image(width: width, height: height, format: target)
        out.yuvRange = range
        let rgb = data
        if !target.isYUV {
            let bpp = target.bytesPerPixel
            for i in 0..<(width * height) {
                let (r, g, b) = (rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2])
                let d = i * bpp
                switch target {
                case .gray8: out.data[d] = UInt8(Color(red: r, green: g, blue: b).luma)
                case .bgr24: out.data[d] = b; out.data[d + 1] = g; out.data[d + 2] = r
                case .rgba: out.data[d] = r; out.data[d + 1] = g; out.data[d + 2] = b; out.data[d + 3] = 255
                case .bgra: out.data[d] = b; out.data[d + 1] = g; out.data[d + 2] = r; out.data[d + 3] = 255
                case .argb: out.data[d] = 255; out.data[d + 1] = r; out.data[d + 2] = g; out.data[d + 3] = b
                default: out.data[d] = r; out.data[d + 1] = g; out.data[d + 2] = b
                }
            }
            return out
        }
        let video = range == .video
        func luma(_ r: Int, _ g: Int, _ b: Int) -> UInt8 {
            let weighted: Int = video ? 66 * r + 129 * g + 25 * b : 77 * r + 150 * g + 29 * b
            return UInt8(clamping: (weighted + 128) >> 8 + (video ? 16 : 0))
        }
        for i in 0..<(width * height) { out.data[i] = luma(Int(rgb[3 * i]), Int(rgb[3 * i + 1]), Int(rgb[3 * i + 2])) }
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        for cy in 0..<ch {
            for cx in 0..<cw {
                var r = 0, g = 0, b = 0, n = 0
                for y in (2 * cy)..<min(2 * cy + 2, height) {
                    for x in (2 * cx)..<min(2 * cx + 2, width) {
                        let s = 3 * (y * width + x)
                        r += Int(rgb[s]); g += Int(rgb[s + 1]); b += Int(rgb[s + 2]); n += 1
                    }
                }
                (r, g, b) = ((r + n / 2) / n, (g + n / 2) / n, (b + n / 2) / n)
                let uWeighted: Int = video ? -38 * r - 74 * g + 112 * b : -43 * r - 85 * g + 128 * b
                let vWeighted: Int = video ? 112 * r - 94 * g - 18 * b : 128 * r - 107 * g - 21 * b
                let u = (uWeighted + 128) >> 8 + 128, v = (vWeighted + 128) >> 8 + 128
                let (uu, vv) = (UInt8(clamping: u), UInt8(clamping: v))
                switch target {
                case .nv12:
                    out.data[out.planeOffsets[1] + cy * out.strides[1] + 2 * cx] = uu
                    out.data[out.planeOffsets[1] + cy * out.strides[1] + 2 * cx + 1] = vv
                case .nv21:
                    out.data[out.planeOffsets[1] + cy * out.strides[1] + 2 * cx] = vv
                    out.data[out.planeOffsets[1] + cy * out.strides[1] + 2 * cx + 1] = uu
                default:
                    out.data[out.planeOffsets[1] + cy * out.strides[1] + cx] = uu
                    out.data[out.planeOffsets[2] + cy * out.strides[2] + cx] = vv
                }
            }
        }
        return out
    }
}
