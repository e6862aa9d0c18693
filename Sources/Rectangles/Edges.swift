import Imaging

/// A single-channel float picture, row-major without padding.
package struct Plane {
    package let width: Int
    package let height: Int
    package var pixels: [Float]

    /// A plane whose every pixel the caller writes before any is read (the storage is not zeroed).
    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        pixels = [Float](unsafeUninitializedCapacity: width * height) { _, count in count = width * height }
    }
}

/// Reads luma (BT.601 weights, 0...255) from any pixel format, at full resolution or box-averaged.
package struct Luma {
    let image: Image
    private let offsets: (r: Int, g: Int, b: Int)
    private let bytesPerPixel: Int

    /// The first plane's start and row stride in `image.data`, read once.
    private let start: Int
    private let rowStride: Int

    package init(_ image: Image) {
        self.image = image
        start = image.planeOffsets[0]
        rowStride = image.strides[0]
        bytesPerPixel = image.format.bytesPerPixel
        switch image.format {
        case .rgb24, .rgba: offsets = (0, 1, 2)
        case .bgr24, .bgra: offsets = (2, 1, 0)
        case .argb: offsets = (1, 2, 3)
        case .gray8, .nv12, .nv21, .i420: offsets = (0, 0, 0)
        }
    }

    /// Whether the picture has colour channels (grey and YUV pictures have luma alone).
    var hasColour: Bool { bytesPerPixel > 1 }

    var width: Int { image.width }
    var height: Int { image.height }

    /// Luma of the stored pixel at column `x`, row `y` (both clamped into the picture).
    func value(x: Int, y: Int) -> Float {
        let cx = min(max(x, 0), image.width - 1), cy = min(max(y, 0), image.height - 1)
        return pixel(start + cy * rowStride + cx * bytesPerPixel)
    }

    /// Luma of the pixel whose bytes start at `base` in the image's data.
    @inline(__always)
    private func pixel(_ base: Int) -> Float {
        if bytesPerPixel == 1 { return Float(image.data[base]) }
        let sum = 77 * Int(image.data[base + offsets.r]) + 150 * Int(image.data[base + offsets.g]) + 29 * Int(image.data[base + offsets.b])
        return Float(sum) / 256
    }

    /// Bilinear luma at continuous coordinates (pixel centres at `i + 0.5`).
    func sample(_ x: Double, _ y: Double) -> Float {
        let fx = x - 0.5, fy = y - 0.5
        let x0 = Rounding.floor(fx), y0 = Rounding.floor(fy)
        let ax = Float(fx - Double(x0)), ay = Float(fy - Double(y0))
        if x0 >= 0 && y0 >= 0 && x0 + 1 < image.width && y0 + 1 < image.height {
            // All four pixels inside: read them without clamping.
            let base = start + y0 * rowStride + x0 * bytesPerPixel, below = base + rowStride
            let top = pixel(base) * (1 - ax) + pixel(base + bytesPerPixel) * ax
            let bottom = pixel(below) * (1 - ax) + pixel(below + bytesPerPixel) * ax
            return top * (1 - ay) + bottom * ay
        }
        let top = value(x: x0, y: y0) * (1 - ax) + value(x: x0 + 1, y: y0) * ax
        let bottom = value(x: x0, y: y0 + 1) * (1 - ax) + value(x: x0 + 1, y: y0 + 1) * ax
        return top * (1 - ay) + bottom * ay
    }

    /// Bilinear red, green and blue at continuous coordinates (pixel centres at `i + 0.5`; pixels
    /// past the edges repeat the edge's). Pictures with colour only (``hasColour``).
    func colour(_ x: Double, _ y: Double) -> SIMD3<Float> {
        let fx = x - 0.5, fy = y - 0.5
        let fx0 = Rounding.floor(fx), fy0 = Rounding.floor(fy)
        let ax = Float(fx - Double(fx0)), ay = Float(fy - Double(fy0))
        let x0 = min(max(fx0, 0), image.width - 1), y0 = min(max(fy0, 0), image.height - 1)
        let x1 = min(max(fx0 + 1, 0), image.width - 1), y1 = min(max(fy0 + 1, 0), image.height - 1)
        @inline(__always) func at(_ x: Int, _ y: Int) -> SIMD3<Float> {
            let base = start + y * rowStride + x * bytesPerPixel
            return SIMD3(Float(image.data[base + offsets.r]), Float(image.data[base + offsets.g]), Float(image.data[base + offsets.b]))
        }
        let top = at(x0, y0) * (1 - ax) + at(x1, y0) * ax
        let bottom = at(x0, y1) * (1 - ax) + at(x1, y1) * ax
        return top * (1 - ay) + bottom * ay
    }

    /// Luma of a red, green and blue (the weights ``sample(_:_:)`` uses).
    static func luma(_ c: SIMD3<Float>) -> Float { (77 * c.x + 150 * c.y + 29 * c.z) / 256 }

    /// The largest factor ``downscaled(by:channels:)`` takes: 257 rows of bytes fill a 16-bit sum.
    static let largestFactor = 257

    /// The picture averaged over `factor` x `factor` blocks (the last partial row and column
    /// dropped): its luma, or with `channels`, red, green and blue as three planes (one for grey
    /// and YUV pictures, whose luma is what they have).
    package func downscaled(by factor: Int, channels: Bool = false) -> [Plane] {
        let ww = max(1, image.width / factor), wh = max(1, image.height / factor)
        let k = min(factor, image.width, image.height)
        let colour = channels && bytesPerPixel > 1
        // Every block of every plane is written below.
        var out = Plane(width: colour ? 0 : ww, height: colour ? 0 : wh)
        let (cw, ch) = colour ? (ww, wh) : (0, 0)
        var red = Plane(width: cw, height: ch), green = Plane(width: cw, height: ch)
        var blue = Plane(width: cw, height: ch)
        let stride = image.strides[0], start = image.planeOffsets[0], bpp = bytesPerPixel
        let (ro, go, bo) = offsets
        let scale = 1 / Float(k * k * (bpp == 1 ? 1 : 256)), channelScale = scale * 256
        precondition(k <= Self.largestFactor, "downscaling by \(k) would overflow the 16-bit column sums")
        // First every byte of the block's rows summed down the columns (one straight pass the
        // compiler vectorizes; 16-bit sums hold `largestFactor` rows of bytes), then those column
        // sums summed across each block per channel; weighted once per block.
        let usedBytes = ww * k * bpp
        let columns = UnsafeMutableBufferPointer<UInt16>.allocate(capacity: usedBytes)
        let blocks = UnsafeMutableBufferPointer<Int32>.allocate(capacity: usedBytes)
        defer { columns.deallocate(); blocks.deallocate() }
        image.data.withUnsafeBufferPointer { src in
            out.pixels.withUnsafeMutableBufferPointer { dst in
                red.pixels.withUnsafeMutableBufferPointer { r in
                    green.pixels.withUnsafeMutableBufferPointer { g in
                        blue.pixels.withUnsafeMutableBufferPointer { b in
                            for oy in 0..<wh {
                                let first = src.baseAddress! + start + oy * k * stride
                                // Two or three rows at a time: one store per column per pass.
                                var dy = 1
                                if k >= 3 {
                                    let second = first + stride, third = first + 2 * stride
                                    for i in 0..<usedBytes { columns[i] = UInt16(first[i]) &+ UInt16(second[i]) &+ UInt16(third[i]) }
                                    dy = 3
                                } else {
                                    for i in 0..<usedBytes { columns[i] = UInt16(first[i]) }
                                }
                                while dy + 1 < k {
                                    let row = first + dy * stride, next = row + stride
                                    for i in 0..<usedBytes { columns[i] &+= UInt16(row[i]) &+ UInt16(next[i]) }
                                    dy += 2
                                }
                                if dy < k {
                                    let row = first + dy * stride
                                    for i in 0..<usedBytes { columns[i] &+= UInt16(row[i]) }
                                }
                                let line = oy * ww
                                if bpp == 1 {
                                    for ox in 0..<ww {
                                        var sum: Int32 = 0, p = ox * k
                                        for _ in 0..<k { sum &+= Int32(columns[p]); p += 1 }
                                        dst[line + ox] = Float(sum) * scale
                                    }
                                    continue
                                }
                                // Each channel's sum over a block, at every position of the row at once
                                // (k shifted copies added: straight loops the compiler vectorizes), then
                                // read at the blocks' starts. Sums of k columns of at most k bytes each fit
                                // 32 bits; 16 would overflow past a factor of 16.
                                let span = usedBytes - (k - 1) * bpp
                                var dx = 1
                                if k >= 3 {
                                    let two = 2 * bpp
                                    for i in 0..<span { blocks[i] = Int32(columns[i]) &+ Int32(columns[i &+ bpp]) &+ Int32(columns[i &+ two]) }
                                    dx = 3
                                } else {
                                    for i in 0..<span { blocks[i] = Int32(columns[i]) }
                                }
                                while dx < k {
                                    let shift = dx * bpp
                                    for i in 0..<span { blocks[i] &+= Int32(columns[i &+ shift]) }
                                    dx += 1
                                }
                                let blockBytes = k * bpp
                                if colour {
                                    for ox in 0..<ww {
                                        let p = ox &* blockBytes, o = line &+ ox
                                        r[o] = Float(blocks[p &+ ro]) * channelScale
                                        g[o] = Float(blocks[p &+ go]) * channelScale
                                        b[o] = Float(blocks[p &+ bo]) * channelScale
                                    }
                                } else {
                                    for ox in 0..<ww {
                                        let p = ox * blockBytes
                                        dst[line + ox] = Float(77 * Int64(blocks[p + ro]) + 150 * Int64(blocks[p + go]) + 29 * Int64(blocks[p + bo])) * scale
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return colour ? [red, green, blue] : [out]
    }
}

/// Thin edges of a working-scale picture: smoothing, Sobel gradients, non-maximum suppression along
/// the gradient and hysteresis between two thresholds (in grey levels per pixel).
struct EdgeMap {
    let width: Int
    let height: Int
    /// Gradient components (grey levels per pixel) after smoothing.
    var gx: [Float]
    var gy: [Float]
    /// 1 where a thin edge passed hysteresis.
    var isEdge: [UInt8]

    static let highThreshold: Float = 4
    static let lowThreshold: Float = 2

    /// Edges of one plane, or of several (colour channels): at each pixel the gradient of the
    /// channel that changes most, so a boundary between two colours of equal luma is still one.
    init(_ planes: [Plane]) {
        let plane = planes[0]
        width = plane.width
        height = plane.height
        let w = plane.width, h = plane.height
        var gx: [Float], gy: [Float], magnitude: [Float]
        if w >= 3 && h >= 3 {
            // Every pixel is written: the border here, the inside by the first plane's gradients.
            gx = Plane(width: w, height: h).pixels
            gy = Plane(width: w, height: h).pixels
            magnitude = Plane(width: w, height: h).pixels
            Self.zeroBorder(&gx, width: w, height: h)
            Self.zeroBorder(&gy, width: w, height: h)
            Self.zeroBorder(&magnitude, width: w, height: h)
            Self.smoothedGradients(planes, gx: &gx, gy: &gy, magnitude: &magnitude)
        } else {
            gx = [Float](repeating: 0, count: w * h)
            gy = gx
            magnitude = gx
        }
        isEdge = Self.thinEdges(squaredMagnitude: magnitude, gx: gx, gy: gy, width: w, height: h)
        self.gx = gx
        self.gy = gy
    }

    /// The first and last rows and columns of a `width` x `height` plane set to 0.
    static func zeroBorder(_ values: inout [Float], width w: Int, height h: Int) {
        for x in 0..<w { values[x] = 0; values[(h - 1) * w + x] = 0 }
        for y in 0..<h { values[y * w] = 0; values[y * w + w - 1] = 0 }
    }

    /// Sobel gradients of one row (from its neighbours `up` and `down`), kept where this channel's
    /// squared magnitude beats the one stored, or all of them for the `first` channel (over
    /// whatever was stored). Eight pixels at a time in SIMD vectors (the compiler does not
    /// vectorize the conditional stores itself), the row's last few one by one.
    @inline(__always)
    static func sobelRow(up: UnsafePointer<Float>, row: UnsafePointer<Float>, down: UnsafePointer<Float>,
                         gx: UnsafeMutablePointer<Float>, gy: UnsafeMutablePointer<Float>, magnitude: UnsafeMutablePointer<Float>,
                         width w: Int, first: Bool) {
        typealias Vector = SIMD8<Float>
        func load(_ pointer: UnsafePointer<Float>) -> Vector { UnsafeRawPointer(pointer).loadUnaligned(as: Vector.self) }
        func store(_ vector: Vector, _ pointer: UnsafeMutablePointer<Float>) { UnsafeMutableRawPointer(pointer).storeBytes(of: vector, as: Vector.self) }
        var x = 1
        while x + Vector.scalarCount < w {
            let ul = load(up + x - 1), uc = load(up + x), ur = load(up + x + 1)
            let rl = load(row + x - 1), rr = load(row + x + 1)
            let dl = load(down + x - 1), dc = load(down + x), dr = load(down + x + 1)
            let dx = ((ur + 2 * rr + dr) - (ul + 2 * rl + dl)) * 0.125
            let dy = ((dl + 2 * dc + dr) - (ul + 2 * uc + ur)) * 0.125
            let squared = dx * dx + dy * dy
            if first {
                store(dx, gx + x)
                store(dy, gy + x)
                store(squared, magnitude + x)
                x += Vector.scalarCount
                continue
            }
            let stronger = squared .> load(magnitude + x)
            store(load(gx + x).replacing(with: dx, where: stronger), gx + x)
            store(load(gy + x).replacing(with: dy, where: stronger), gy + x)
            store(load(magnitude + x).replacing(with: squared, where: stronger), magnitude + x)
            x += Vector.scalarCount
        }
        while x < w - 1 {
            let l = x - 1, r = x + 1
            let dx = ((up[r] + 2 * row[r] + down[r]) - (up[l] + 2 * row[l] + down[l])) * 0.125
            let dy = ((down[l] + 2 * down[x] + down[r]) - (up[l] + 2 * up[x] + up[r])) * 0.125
            // Squared magnitudes compared; the root taken once at the end.
            let squared = dx * dx + dy * dy
            if first || squared > magnitude[x] {
                gx[x] = dx
                gy[x] = dy
                magnitude[x] = squared
            }
            x += 1
        }
    }

    /// Each plane smoothed by [1 2 1] / 4 in both directions (edges clamped), then its Sobel
    /// gradients kept where they beat the planes before (``sobelRow(up:row:down:gx:gy:magnitude:width:first:)``).
    /// Row by row through rings of three rows per plane: the smoothed planes are never stored whole.
    static func smoothedGradients(_ planes: [Plane], gx: inout [Float], gy: inout [Float], magnitude: inout [Float]) {
        let w = planes[0].width, h = planes[0].height, count = planes.count
        precondition(w >= 3 && h >= 3 && planes.allSatisfy { $0.width == w && $0.height == h && $0.pixels.count == w * h }
                     && gx.count == w * h && gy.count == w * h && magnitude.count == w * h)
        // Per plane: three rows smoothed across, then three smoothed both ways; row r in slot r % 3.
        let rings = UnsafeMutableBufferPointer<Float>.allocate(capacity: count * 6 * w)
        defer { rings.deallocate() }
        let base = rings.baseAddress!
        @inline(__always) func across(_ plane: Int, _ r: Int) -> UnsafeMutablePointer<Float> { base + (plane * 6 + r % 3) * w }
        @inline(__always) func smooth(_ plane: Int, _ r: Int) -> UnsafeMutablePointer<Float> { base + (plane * 6 + 3 + r % 3) * w }
        for (index, plane) in planes.enumerated() {
            plane.pixels.withUnsafeBufferPointer { p in Self.smoothAcross(p.baseAddress!, into: across(index, 0), width: w) }
        }
        gx.withUnsafeMutableBufferPointer { gxs in
            gy.withUnsafeMutableBufferPointer { gys in
                magnitude.withUnsafeMutableBufferPointer { m in
                    for r in 0..<h {
                        for (index, plane) in planes.enumerated() {
                            if r + 1 < h {
                                plane.pixels.withUnsafeBufferPointer { p in
                                    Self.smoothAcross(p.baseAddress! + (r + 1) * w, into: across(index, r + 1), width: w)
                                }
                            }
                            let up = across(index, max(r - 1, 0)), row = across(index, r), down = across(index, min(r + 1, h - 1))
                            let out = smooth(index, r)
                            for x in 0..<w { out[x] = (up[x] + 2 * row[x] + down[x]) * 0.25 }
                        }
                        guard r >= 2 else { continue }
                        let y = r - 1, offset = y * w
                        for index in 0..<count {
                            Self.sobelRow(up: smooth(index, y - 1), row: smooth(index, y), down: smooth(index, y + 1),
                                          gx: gxs.baseAddress! + offset, gy: gys.baseAddress! + offset, magnitude: m.baseAddress! + offset,
                                          width: w, first: index == 0)
                        }
                    }
                }
            }
        }
    }

    /// One row smoothed by [1 2 1] / 4, the two end pixels clamped (the loop between them has no branches).
    @inline(__always)
    static func smoothAcross(_ p: UnsafePointer<Float>, into a: UnsafeMutablePointer<Float>, width w: Int) {
        a[0] = (3 * p[0] + p[1]) / 4
        a[w - 1] = (p[w - 2] + 3 * p[w - 1]) / 4
        for x in 1..<(w - 1) { a[x] = (p[x &- 1] + 2 * p[x] + p[x &+ 1]) * 0.25 }
    }

    /// Non-maximum suppression across the edge, then hysteresis from strong pixels through weak ones,
    /// on squared gradient magnitudes (the thresholds squared: the same order, no roots).
    static func thinEdges(squaredMagnitude m: [Float], gx: [Float], gy: [Float], width w: Int, height h: Int) -> [UInt8] {
        var state = [UInt8](repeating: 0, count: w * h)   // 0 none, 1 weak, 2 strong
        guard w >= 3 && h >= 3, m.count >= w * h, gx.count >= w * h, gy.count >= w * h else { return state }
        // Strong pixels waiting to spread: each pixel is pushed at most once (when it turns strong),
        // so the stack never holds more than the picture's pixels.
        let stack = UnsafeMutableBufferPointer<Int32>.allocate(capacity: w * h)
        defer { stack.deallocate() }
        var top = 0
        let around = SIMD8<Int>(-w - 1, -w, -w + 1, -1, 1, w - 1, w, w + 1)
        let low = lowThreshold * lowThreshold, high = highThreshold * highThreshold
        // Pixels 1...w-2 of rows 1...h-2 only, so every neighbour read below is inside the arrays.
        m.withUnsafeBufferPointer { m in
            gx.withUnsafeBufferPointer { gx in
                gy.withUnsafeBufferPointer { gy in
                    state.withUnsafeMutableBufferPointer { state in
                        let (mp, gxp, gyp, sp, pending) = (m.baseAddress!, gx.baseAddress!, gy.baseAddress!, state.baseAddress!, stack.baseAddress!)
                        for y in 1..<(h - 1) {
                            let row = y * w
                            var x = 1
                            while x + 8 <= w - 1 {
                                let strong = suppressEight(mp + row + x, gxp + row + x, gyp + row + x, sp + row + x, width: w, low: low, high: high)
                                var bits = strong
                                while bits != 0 {
                                    pending[top] = Int32(row + x + bits.trailingZeroBitCount)
                                    top += 1
                                    bits &= bits - 1
                                }
                                x += 8
                            }
                            while x < w - 1 {
                                let i = row + x, v = mp[i]
                                x += 1
                                guard v >= low else { continue }
                                let step = direction(gxp[i], gyp[i], width: w)
                                guard v > mp[i - step] && v >= mp[i + step] else { continue }
                                if v >= high { sp[i] = 2; pending[top] = Int32(i); top += 1 } else { sp[i] = 1 }
                            }
                        }
                        // Hysteresis: only inner pixels are ever marked, so their neighbours are inside.
                        while top > 0 {
                            top -= 1
                            let i = Int(pending[top])
                            for k in 0..<8 {
                                let j = i &+ around[k]
                                if sp[j] == 1 {
                                    sp[j] = 2
                                    pending[top] = Int32(j)
                                    top += 1
                                }
                            }
                        }
                        // Strong (2) becomes an edge (1); weak (1) and none (0) become 0.
                        for i in 0..<state.count { sp[i] = sp[i] &>> 1 }
                    }
                }
            }
        }
        return state
    }

    /// The neighbour offset across the edge at a pixel with gradient (gx, gy): along x, along y, or
    /// one of the diagonals (within 22.5 degrees of each).
    @inline(__always)
    static func direction(_ gx: Float, _ gy: Float, width w: Int) -> Int {
        let ax = abs(gx), ay = abs(gy)
        if ax > 2.414 * ay { return 1 }
        if ay > 2.414 * ax { return w }
        return gx * gy > 0 ? w + 1 : w - 1
    }

    /// Non-maximum suppression of eight consecutive pixels at once, as the scalar loop decides
    /// each: writes their states (0, 1 weak, 2 strong) and returns the strong ones as bits.
    @inline(__always)
    static func suppressEight(_ m: UnsafePointer<Float>, _ gx: UnsafePointer<Float>, _ gy: UnsafePointer<Float>,
                              _ state: UnsafeMutablePointer<UInt8>, width w: Int, low: Float, high: Float) -> UInt8 {
        typealias V = SIMD8<Float>
        func load(_ p: UnsafePointer<Float>) -> V { UnsafeRawPointer(p).loadUnaligned(as: V.self) }
        let v = load(m)
        let candidates = v .>= V(repeating: low)
        if !any(candidates) { return 0 }
        let gxs = load(gx), gys = load(gy)
        let ax = gxs.replacing(with: -gxs, where: gxs .< 0), ay = gys.replacing(with: -gys, where: gys .< 0)
        let alongX = ax .> 2.414 * ay, alongY = ay .> 2.414 * ax, rising = gxs * gys .> 0
        let diagonalBefore = load(m - w - 1).replacing(with: load(m - w + 1), where: .!rising)
        let diagonalAfter = load(m + w + 1).replacing(with: load(m + w - 1), where: .!rising)
        let before = diagonalBefore.replacing(with: load(m - w), where: alongY).replacing(with: load(m - 1), where: alongX)
        let after = diagonalAfter.replacing(with: load(m + w), where: alongY).replacing(with: load(m + 1), where: alongX)
        let kept = candidates .& (v .> before) .& (v .>= after)
        let strong = kept .& (v .>= V(repeating: high))
        let zero = SIMD8<Int32>(repeating: 0)
        let states = zero.replacing(with: 1, where: kept).replacing(with: 2, where: strong)
        UnsafeMutableRawPointer(state).storeBytes(of: SIMD8<UInt8>(truncatingIfNeeded: states), as: SIMD8<UInt8>.self)
        return UInt8(truncatingIfNeeded: zero.replacing(with: SIMD8(1, 2, 4, 8, 16, 32, 64, 128), where: strong).wrappedSum())
    }
}
