/// How a picture is fitted to a model's input size.
public enum ResizeMode: String, Sendable, CaseIterable, Codable {
    /// Stretch the whole picture to the input (how the shared SSD model was trained).
    case stretch
    /// Cut the largest centered region with the input's aspect ratio, then resize it.
    case centerCrop
    /// Fit the whole picture inside the input, keeping its aspect ratio, and pad the rest.
    case letterbox
}

/// Resampling filter.
public enum ResizeFilter: String, Sendable, Codable {
    /// Bilinear with half-pixel centers (OpenCV's INTER_LINEAR, TFLite's half_pixel_centers).
    case bilinear
    /// Average over the covered source area (OpenCV's INTER_AREA); best for large reductions.
    case area
}

extension Image {
    /// The stored pixels turned upright for display; packed formats only (convert YUV first).
    public func oriented(_ orientation: Orientation) -> Image {
        precondition(!format.isYUV, "orient packed images; convert \(format) first")
        guard orientation != .up else { return self }
        let upright = orientation.uprightSize(size)
        let inverse = orientation.map(from: size).inverted
        let bpp = format.bytesPerPixel
        var out = Image(width: upright.width, height: upright.height, format: format)
        out.data.withUnsafeMutableBufferPointer { dst in
            data.withUnsafeBufferPointer { src in
                for y in 0..<upright.height {
                    for x in 0..<upright.width {
                        let p = inverse.apply(x: Double(x) + 0.5, y: Double(y) + 0.5)
                        let s = Int(p.y) * strides[0] + Int(p.x) * bpp, d = (y * upright.width + x) * bpp
                        for k in 0..<bpp { dst[d + k] = src[s + k] }
                    }
                }
            }
        }
        return out
    }

    /// The pixels inside `x..<x+width`, `y..<y+height`; packed formats only.
    public func cropped(x: Int, y: Int, width w: Int, height h: Int) -> Image {
        precondition(!format.isYUV && x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= width && y + h <= height, "crop outside the image")
        let bpp = format.bytesPerPixel
        var out = Image(width: w, height: h, format: format)
        for row in 0..<h {
            let s = (y + row) * strides[0] + x * bpp
            out.data.replaceSubrange((row * w * bpp)..<((row + 1) * w * bpp), with: data[s..<(s + w * bpp)])
        }
        return out
    }

    /// The image resampled to `target`; packed formats only.
    ///
    /// Bilinear follows OpenCV's `INTER_LINEAR` fixed-point arithmetic for 8-bit images (11-bit
    /// coefficients, its vectorized vertical pass), so pictures prepared here match OpenCV's.
    public func resized(to target: Size, filter: ResizeFilter = .bilinear) -> Image {
        precondition(!format.isYUV, "resize packed images; convert \(format) first")
        if target == size { return self }
        if filter == .bilinear { return resizedLikeOpenCV(to: target) }
        let bpp = format.bytesPerPixel
        let xs = filter == .bilinear ? Self.bilinearTaps(width, target.width) : Self.areaTaps(width, target.width)
        let ys = filter == .bilinear ? Self.bilinearTaps(height, target.height) : Self.areaTaps(height, target.height)
        // Horizontal pass into float rows, then vertical pass.
        var rows = [Float](repeating: 0, count: height * target.width * bpp)
        data.withUnsafeBufferPointer { src in
            rows.withUnsafeMutableBufferPointer { rows in
                for y in 0..<height {
                    let line = y * strides[0], out = y * target.width * bpp
                    for (x, taps) in xs.enumerated() {
                        for k in 0..<bpp {
                            var sum: Float = 0
                            for tap in taps { sum += Float(src[line + tap.index * bpp + k]) * tap.weight }
                            rows[out + x * bpp + k] = sum
                        }
                    }
                }
            }
        }
        var result = Image(width: target.width, height: target.height, format: format)
        let rowLength = target.width * bpp
        result.data.withUnsafeMutableBufferPointer { dst in
            rows.withUnsafeBufferPointer { rows in
                for (y, taps) in ys.enumerated() {
                    for i in 0..<rowLength {
                        var sum: Float = 0
                        for tap in taps { sum += rows[tap.index * rowLength + i] * tap.weight }
                        dst[y * rowLength + i] = UInt8(clamping: Rounding.floor(sum + 0.5))
                    }
                }
            }
        }
        return result
    }

    /// OpenCV's INTER_LINEAR for 8-bit data: coefficients `saturate_cast<short>(w * 2048)`, an
    /// exact horizontal pass into int rows, then `((r0 >> 4) * b0 >> 16) + ((r1 >> 4) * b1 >> 16)`
    /// rounded by `(v + 2) >> 2`.
    private func resizedLikeOpenCV(to target: Size) -> Image {
        let bpp = format.bytesPerPixel
        if width == 2 * target.width && height == 2 * target.height { return halved() }
        // Columns clamp their coefficient at the edges; rows keep it and clamp only the row index.
        func coefficients(_ source: Int, _ target: Int, clampWeights: Bool) -> [(index: Int, w0: Int32, w1: Int32)] {
            let scale = Double(source) / Double(target)
            return (0..<target).map { i in
                var f = Float((Double(i) + 0.5) * scale - 0.5)
                var s = Int(f.rounded(.down))
                f -= Float(s)
                if clampWeights, s < 0 { (s, f) = (0, 0) }
                if clampWeights, s >= source - 1 { (s, f) = (source - 1, 0) }
                return (s, Int32(((1 - f) * 2048).rounded(.toNearestOrEven)), Int32((f * 2048).rounded(.toNearestOrEven)))
            }
        }
        let xs = coefficients(width, target.width, clampWeights: true), ys = coefficients(height, target.height, clampWeights: false)
        let rowLength = target.width * bpp
        // Per output value: the two source byte offsets within a row and their weights.
        var left = [Int](repeating: 0, count: rowLength), right = [Int](repeating: 0, count: rowLength)
        var w0 = [Int32](repeating: 0, count: rowLength), w1 = [Int32](repeating: 0, count: rowLength)
        for (x, c) in xs.enumerated() {
            for k in 0..<bpp {
                left[x * bpp + k] = c.index * bpp + k
                right[x * bpp + k] = min(c.index + 1, width - 1) * bpp + k
                w0[x * bpp + k] = c.w0
                w1[x * bpp + k] = c.w1
            }
        }
        // Horizontal passes into two rows kept by source row index: output rows run down the
        // picture, so each source row is computed once (at most twice when rows are far apart).
        var cache = [Int32](repeating: 0, count: 2 * rowLength)
        var cached = (-1, -1)
        var result = Image(width: target.width, height: target.height, format: format)
        data.withUnsafeBufferPointer { src in
            cache.withUnsafeMutableBufferPointer { cache in
                left.withUnsafeBufferPointer { left in
                    right.withUnsafeBufferPointer { right in
                        w0.withUnsafeBufferPointer { w0 in
                            w1.withUnsafeBufferPointer { w1 in
                                result.data.withUnsafeMutableBufferPointer { dst in
                                    /// The horizontal pass of source row `y`, computed into a slot unless kept.
                                    func row(_ y: Int, avoiding other: Int) -> UnsafeMutablePointer<Int32> {
                                        if cached.0 == y { return cache.baseAddress! }
                                        if cached.1 == y { return cache.baseAddress! + rowLength }
                                        let slot = cached.0 == other ? 1 : 0
                                        if slot == 0 { cached.0 = y } else { cached.1 = y }
                                        let line = src.baseAddress! + y * strides[0]
                                        let out = cache.baseAddress! + slot * rowLength
                                        for i in 0..<rowLength {
                                            out[i] = Int32(line[left[i]]) &* w0[i] &+ Int32(line[right[i]]) &* w1[i]
                                        }
                                        return out
                                    }
                                    for (y, c) in ys.enumerated() {
                                        let top = min(max(c.index, 0), height - 1), bottom = min(max(c.index + 1, 0), height - 1)
                                        let r0 = row(top, avoiding: bottom), r1 = row(bottom, avoiding: top)
                                        let out = dst.baseAddress! + y * rowLength
                                        for i in 0..<rowLength {
                                            let a = (Int32(Int16(clamping: r0[i] >> 4)) &* c.w0) >> 16
                                            let b = (Int32(Int16(clamping: r1[i] >> 4)) &* c.w1) >> 16
                                            out[i] = UInt8(clamping: (Int32(Int16(clamping: a &+ b)) &+ 2) >> 2)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return result
    }

    /// Exactly half the size: the formula above with weights of 1024 each reduces to the rounded
    /// mean of each 2x2 block, `(a + b + c + d + 2) >> 2` (OpenCV takes its INTER_AREA fast path
    /// here, with the same result).
    private func halved() -> Image {
        let bpp = format.bytesPerPixel, stride = strides[0]
        let target = Size(width: width / 2, height: height / 2), rowLength = target.width * bpp
        var result = Image(width: target.width, height: target.height, format: format)
        data.withUnsafeBufferPointer { src in
            result.data.withUnsafeMutableBufferPointer { dst in
                for y in 0..<target.height {
                    let top = src.baseAddress! + 2 * y * stride, bottom = top + stride, out = dst.baseAddress! + y * rowLength
                    for x in 0..<target.width {
                        for k in 0..<bpp {
                            let i = 2 * x * bpp + k
                            let sum = UInt16(top[i]) + UInt16(top[i + bpp]) + UInt16(bottom[i]) + UInt16(bottom[i + bpp])
                            out[x * bpp + k] = UInt8((sum + 2) >> 2)
                        }
                    }
                }
            }
        }
        return result
    }

    struct Tap {
        var index: Int
        var weight: Float
    }

    /// Two taps per output sample at half-pixel centers, clamped at the edges.
    static func bilinearTaps(_ source: Int, _ target: Int) -> [[Tap]] {
        let scale = Double(source) / Double(target)
        return (0..<target).map { i in
            let position = (Double(i) + 0.5) * scale - 0.5
            let base = Int(position.rounded(.down))
            let fraction = Float(position - Double(base))
            let i0 = min(max(base, 0), source - 1), i1 = min(max(base + 1, 0), source - 1)
            return [Tap(index: i0, weight: 1 - fraction), Tap(index: i1, weight: fraction)]
        }
    }

    /// The source samples each output sample covers, weighted by overlap (falls back to bilinear
    /// when enlarging).
    static func areaTaps(_ source: Int, _ target: Int) -> [[Tap]] {
        guard target < source else { return bilinearTaps(source, target) }
        let scale = Double(source) / Double(target)
        return (0..<target).map { i in
            let start = Double(i) * scale, end = start + scale
            var taps: [Tap] = []
            var j = Int(start.rounded(.down))
            while Double(j) < end && j < source {
                let overlap = min(end, Double(j + 1)) - max(start, Double(j))
                if overlap > 1e-9 { taps.append(Tap(index: j, weight: Float(overlap / scale))) }
                j += 1
            }
            return taps
        }
    }
}

/// A picture prepared for a model: RGB24 pixels of the input size, and the map from the upright
/// picture's coordinates to the input's.
public struct PreparedImage: Sendable {
    public var pixels: Image
    /// Upright picture pixels to model input pixels; its inverse maps boxes back exactly.
    public var uprightToInput: AffineMap
    /// Stored (as given) pixels to upright picture pixels.
    public var storedToUpright: AffineMap
    /// Size of the upright picture.
    public var uprightSize: Size
}

extension Image {
    /// Converts to RGB24, turns upright, and fits to `target` with `mode`.
    ///
    /// - Parameters:
    ///   - orientation: how the stored pixels must be turned to be displayed (EXIF semantics).
    ///   - fill: the RGB value of letterbox bars.
    public func prepared(for target: Size, mode: ResizeMode = .stretch, orientation: Orientation = .up,
                         filter: ResizeFilter = .bilinear, fill: (UInt8, UInt8, UInt8) = (0, 0, 0)) -> PreparedImage {
        let upright = converted(to: .rgb24).oriented(orientation)
        let w = Double(upright.width), h = Double(upright.height)
        let tw = Double(target.width), th = Double(target.height)
        let pixels: Image, map: AffineMap
        switch mode {
        case .stretch:
            pixels = upright.resized(to: target, filter: filter)
            map = .scale(tw / w, th / h)
        case .centerCrop:
            let cw = min(upright.width, Int((h * tw / th).rounded())), ch = min(upright.height, Int((w * th / tw).rounded()))
            let x0 = (upright.width - cw) / 2, y0 = (upright.height - ch) / 2
            pixels = upright.cropped(x: x0, y: y0, width: cw, height: ch).resized(to: target, filter: filter)
            map = AffineMap.scale(1, 1, translate: -Double(x0), -Double(y0)).then(.scale(tw / Double(cw), th / Double(ch)))
        case .letterbox:
            let s = min(tw / w, th / h)
            let inner = Size(width: max(1, Int((w * s).rounded())), height: max(1, Int((h * s).rounded())))
            let ox = (target.width - inner.width) / 2, oy = (target.height - inner.height) / 2
            let scaled = upright.resized(to: inner, filter: filter)
            var canvas = Image(width: target.width, height: target.height, format: .rgb24)
            let rowBytes = inner.width * 3
            canvas.data.withUnsafeMutableBufferPointer { dst in
                if fill != (0, 0, 0) {
                    for i in 0..<(target.width * target.height) { (dst[3 * i], dst[3 * i + 1], dst[3 * i + 2]) = fill }
                }
                scaled.data.withUnsafeBufferPointer { src in
                    for row in 0..<inner.height {
                        let d = ((oy + row) * target.width + ox) * 3
                        UnsafeMutableRawPointer(dst.baseAddress! + d).copyMemory(from: src.baseAddress! + row * rowBytes, byteCount: rowBytes)
                    }
                }
            }
            pixels = canvas
            map = .scale(Double(inner.width) / w, Double(inner.height) / h, translate: Double(ox), Double(oy))
        }
        return PreparedImage(pixels: pixels, uprightToInput: map, storedToUpright: orientation.map(from: size),
                             uprightSize: upright.size)
    }
}
