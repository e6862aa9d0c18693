import Foundation
import TFLiteFormat

/// RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR on NHWC tensors, following TFLite's reference kernels:
/// float interpolation for float32 and uint8 (rounded to nearest), 10-bit fixed point for int8.
final class Resize: Kernel {
    let input, output: Int
    let type: TensorType
    let bilinear: Bool
    let options: ResizeOptions
    let batches, inHeight, inWidth, depth, outHeight, outWidth: Int

    init(_ ctx: PrepareContext, bilinear: Bool, options: ResizeOptions) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        type = ctx.type(input)
        guard type == ctx.type(output), [.float32, .uint8, .int8].contains(type) else { throw ctx.unsupported() }
        try ctx.requireRank(input, 4)
        let size = try ctx.constant(ctx.input(1), as: Int32.self)
        guard size.count == 2, size[0] > 0, size[1] > 0 else { throw ctx.fail("size must hold two positive values, got \(size)") }
        let shape = ctx.shape(input)
        (batches, inHeight, inWidth, depth) = (shape[0], shape[1], shape[2], shape[3])
        (outHeight, outWidth) = (Int(size[0]), Int(size[1]))
        if type != .float32 {
            guard ctx.quantization(input) == ctx.quantization(output) else {
                throw ctx.fail("input and output quantization must be equal")
            }
        }
        self.bilinear = bilinear
        self.options = options
        try ctx.setShape(output, [batches, outHeight, outWidth, depth])
    }

    private func scale(_ input: Int, _ output: Int) -> Float {
        options.alignCorners && output > 1 ? Float(input - 1) / Float(output - 1) : Float(input) / Float(output)
    }

    /// TFLite's `ComputeInterpolationValues`.
    private func interpolation(_ value: Int, _ scale: Float, _ size: Int) -> (Float, Int, Int) {
        let scaled = options.halfPixelCenters ? (Float(value) + 0.5) * scale - 0.5 : Float(value) * scale
        let lower = max(Int(scaled.rounded(.down)), 0)
        let upper = min(Int(scaled.rounded(.up)), size - 1)
        return (scaled, lower, upper)
    }

    /// TFLite's `GetNearestNeighbor`.
    private func nearest(_ value: Int, _ inputSize: Int, _ outputSize: Int) -> Int {
        let s = scale(inputSize, outputSize)
        let offset: Float = options.halfPixelCenters ? 0.5 : 0
        let raw = options.alignCorners
            ? Int(((Float(value) + offset) * s).rounded(.toNearestOrAwayFromZero))
            : Int(((Float(value) + offset) * s).rounded(.down))
        let result = min(raw, inputSize - 1)
        return options.halfPixelCenters ? max(0, result) : result
    }

    func run(_ memory: TensorMemory) {
        let src = memory.raw(input), dst = memory.raw(output)
        let size = type.byteSize!
        if !bilinear {
            for b in 0..<batches {
                for y in 0..<outHeight {
                    let iy = nearest(y, inHeight, outHeight)
                    for x in 0..<outWidth {
                        let ix = nearest(x, inWidth, outWidth)
                        let from = ((b * inHeight + iy) * inWidth + ix) * depth * size
                        let to = ((b * outHeight + y) * outWidth + x) * depth * size
                        (dst + to).copyMemory(from: src + from, byteCount: depth * size)
                    }
                }
            }
            return
        }
        switch type {
        case .float32:
            bilinearFloat(src.assumingMemoryBound(to: Float.self), dst.assumingMemoryBound(to: Float.self), value: { $0 }, { $0 })
        case .uint8:
            bilinearFloat(src.assumingMemoryBound(to: UInt8.self), dst.assumingMemoryBound(to: UInt8.self), value: { Float($0) }, { UInt8(clamping: Int($0.rounded(.toNearestOrAwayFromZero))) })
        default: bilinearInteger(src.assumingMemoryBound(to: Int8.self), dst.assumingMemoryBound(to: Int8.self))
        }
    }

    private func bilinearFloat<T>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>, value: (T) -> Float, _ convert: (Float) -> T) {
        let hs = scale(inHeight, outHeight), ws = scale(inWidth, outWidth)
        for b in 0..<batches {
            for y in 0..<outHeight {
                let (iy, y0, y1) = interpolation(y, hs, inHeight)
                for x in 0..<outWidth {
                    let (ix, x0, x1) = interpolation(x, ws, inWidth)
                    let dy = iy - Float(y0), dx = ix - Float(x0)
                    for c in 0..<depth {
                        func at(_ yy: Int, _ xx: Int) -> Float { value(src[((b * inHeight + yy) * inWidth + xx) * depth + c]) }
                        let result = at(y0, x0) * (1 - dy) * (1 - dx) + at(y1, x0) * dy * (1 - dx)
                            + at(y0, x1) * (1 - dy) * dx + at(y1, x1) * dy * dx
                        dst[((b * outHeight + y) * outWidth + x) * depth + c] = convert(result)
                    }
                }
            }
        }
    }

    private func bilinearInteger<T: FixedWidthInteger>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>) {
        func scale10(_ input: Int, _ output: Int) -> Int {
            options.alignCorners && output > 1
                ? ((1 << 10) * (input - 1) + (output - 1) / 2) / (output - 1)
                : ((1 << 10) * input + output / 2) / output
        }
        func values(_ value: Int, _ scale: Int, _ size: Int) -> (Int, Int, Int) {
            let scaled = options.halfPixelCenters ? value * scale + scale / 2 - (1 << 9) : value * scale
            return (scaled, max(scaled / (1 << 10), 0), min((scaled + (1 << 10) - 1) / (1 << 10), size - 1))
        }
        let hs = scale10(inHeight, outHeight), ws = scale10(inWidth, outWidth)
        for b in 0..<batches {
            for y in 0..<outHeight {
                let (iy, y0, y1) = values(y, hs, inHeight)
                for x in 0..<outWidth {
                    let (ix, x0, x1) = values(x, ws, inWidth)
                    let fy = iy - (1 << 10) * y0, fx = ix - (1 << 10) * x0
                    for c in 0..<depth {
                        func at(_ yy: Int, _ xx: Int) -> Int64 { Int64(src[((b * inHeight + yy) * inWidth + xx) * depth + c]) }
                        let total = at(y0, x0) * Int64((1 << 10) - fy) * Int64((1 << 10) - fx)
                            + at(y1, x0) * Int64(fy) * Int64((1 << 10) - fx)
                            + at(y0, x1) * Int64((1 << 10) - fy) * Int64(fx)
                            + at(y1, x1) * Int64(fy) * Int64(fx)
                        let round: Int64 = total > 0 ? (1 << 19) : -(1 << 19)
                        dst[((b * outHeight + y) * outWidth + x) * depth + c] = T(truncatingIfNeeded: (total + round) / (1 << 20))
                    }
                }
            }
        }
    }
}
