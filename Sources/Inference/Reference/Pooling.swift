import TFLiteFormat

/// AVERAGE_POOL_2D and MAX_POOL_2D on float32, uint8 and int8.
final class Pooling: Kernel {
    enum Mode { case average, max }

    let mode: Mode
    let type: TensorType
    let geometry: WindowGeometry
    let input, output: Int
    let intRange: (min: Int32, max: Int32)
    let floatRange: (min: Float, max: Float)

    init(_ ctx: PrepareContext, mode: Mode, options: Pool2DOptions) throws {
        self.mode = mode
        input = ctx.input(0)
        output = ctx.output(0)
        type = ctx.type(input)
        geometry = try WindowGeometry(pooling: ctx, options: options)
        try ctx.setShape(output, geometry.outputShape)
        floatRange = FixedPoint.activationRange(options.activation)
        if type == .float32 {
            intRange = (0, 0)
        } else {
            let o = try ctx.quantized(output)
            intRange = FixedPoint.activationRange(options.activation, scale: o.scale, zeroPoint: o.zeroPoint, type: type)
        }
    }

    func run(_ memory: TensorMemory) {
        switch type {
        case .float32: pool(memory.typed(input, Float.self), memory.typed(output, Float.self))
        case .uint8: pool(memory.typed(input, UInt8.self), memory.typed(output, UInt8.self))
        default: pool(memory.typed(input, Int8.self), memory.typed(output, Int8.self))
        }
    }

    private func pool<T: FixedWidthInteger>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>) {
        let g = geometry
        window { b, oy, ox, c, ys, xs, out in
            var acc: Int32 = mode == .max ? Int32(T.min) : 0
            for y in ys {
                for x in xs {
                    let value = Int32(src[((b * g.inputHeight + y) * g.inputWidth + x) * g.inputChannels + c])
                    acc = mode == .max ? Swift.max(acc, value) : acc + value
                }
            }
            if mode == .average {
                let count = Int32(ys.count * xs.count)
                if T.isSigned {
                    acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count
                } else {
                    acc = (acc + count / 2) / count
                }
            }
            dst[out] = T(truncatingIfNeeded: Swift.min(Swift.max(acc, intRange.min), intRange.max))
        }
    }

    private func pool(_ src: UnsafeMutablePointer<Float>, _ dst: UnsafeMutablePointer<Float>) {
        let g = geometry
        window { b, oy, ox, c, ys, xs, out in
            var acc: Float = mode == .max ? -.greatestFiniteMagnitude : 0
            for y in ys {
                for x in xs {
                    let value = src[((b * g.inputHeight + y) * g.inputWidth + x) * g.inputChannels + c]
                    acc = mode == .max ? Swift.max(acc, value) : acc + value
                }
            }
            if mode == .average { acc /= Float(ys.count * xs.count) }
            dst[out] = Swift.min(Swift.max(acc, floatRange.min), floatRange.max)
        }
    }

    /// Visits every output element with the input rows and columns its window covers.
    @inline(__always)
    private func window(_ body: (Int, Int, Int, Int, Range<Int>, Range<Int>, Int) -> Void) {
        let g = geometry
        var out = 0
        for b in 0..<g.batches {
            for oy in 0..<g.outputHeight {
                let y0 = oy * g.strideHeight - g.padTop
                let ys = Swift.max(0, y0)..<Swift.min(g.inputHeight, y0 + g.filterHeight)
                for ox in 0..<g.outputWidth {
                    let x0 = ox * g.strideWidth - g.padLeft
                    let xs = Swift.max(0, x0)..<Swift.min(g.inputWidth, x0 + g.filterWidth)
                    for c in 0..<g.outputChannels {
                        body(b, oy, ox, c, ys, xs, out)
                        out += 1
                    }
                }
            }
        }
    }
}
