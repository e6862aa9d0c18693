internal import CKernels
import Foundation
import TFLiteFormat

/// An 8-bit operator computed through a 256-entry table built at load (LOGISTIC on uint8/int8,
/// as TFLite's `PopulateLookupTable`).
final class LookupTable: Kernel {
    let input, output: Int
    let count: Int
    let table: [UInt8]

    init(_ ctx: PrepareContext, transform: (Float) -> Float) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        let type = ctx.type(input)
        guard type == ctx.type(output), type == .uint8 || type == .int8 else { throw ctx.unsupported() }
        try ctx.setShape(output, ctx.shape(input))
        count = ctx.shape(input).reduce(1, *)
        let i = try ctx.quantized(input), o = try ctx.quantized(output)
        let (minValue, maxValue) = type.integerRange
        let inverse = 1 / o.scale
        var table = [UInt8](repeating: 0, count: 256)
        for value in minValue...maxValue {
            let real = i.scale * Float(value - i.zeroPoint)
            let quantized = Int32(saturating: Int64(Int32(saturating: transform(real) * inverse)) + Int64(o.zeroPoint))
            table[Int(UInt8(truncatingIfNeeded: value))] = UInt8(truncatingIfNeeded: min(max(quantized, minValue), maxValue))
        }
        self.table = table
    }

    func run(_ memory: TensorMemory) {
        let src = memory.typed(input, UInt8.self), dst = memory.typed(output, UInt8.self)
        table.withUnsafeBufferPointer { table in
            for i in 0..<count { dst[i] = table[Int(src[i])] }
        }
    }
}

/// A float32 elementwise function.
final class FloatUnary: Kernel {
    let input, output: Int
    let count: Int
    let function: (Float) -> Float

    init(_ ctx: PrepareContext, _ function: @escaping (Float) -> Float) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        guard ctx.type(input) == .float32, ctx.type(output) == .float32 else { throw ctx.unsupported() }
        try ctx.setShape(output, ctx.shape(input))
        count = ctx.shape(input).reduce(1, *)
        self.function = function
    }

    func run(_ memory: TensorMemory) {
        let src = memory.typed(input, Float.self), dst = memory.typed(output, Float.self)
        for i in 0..<count { dst[i] = function(src[i]) }
    }

    static func logistic(_ x: Float) -> Float { 1 / (1 + exp(-x)) }
    static func hardSwish(_ x: Float) -> Float { x * min(6, max(0, x + 3)) / 6 }
}

/// L2_NORMALIZATION on float32 along the last axis, as TFLite's reference kernel: each vector
/// divided by its L2 norm, the norm at least 1e-6.
final class L2Normalization: Kernel {
    let input, output: Int
    let outer, depth: Int

    init(_ ctx: PrepareContext) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        let shape = ctx.shape(input)
        guard let last = shape.last, last > 0 else { throw ctx.fail("needs an input with a last axis") }
        try ctx.setShape(output, shape)
        depth = last
        outer = shape.reduce(1, *) / last
    }

    func run(_ memory: TensorMemory) {
        let src = memory.typed(input, Float.self), dst = memory.typed(output, Float.self)
        for o in 0..<outer {
            let base = o * depth
            var squares: Float = 0
            for i in 0..<depth { squares += src[base + i] * src[base + i] }
            let norm = max(squares.squareRoot(), 1e-6)
            for i in 0..<depth { dst[base + i] = src[base + i] / norm }
        }
    }
}

/// RELU and RELU6 on uint8/int8: rescale to the output quantization, then clamp (TFLite's `ReluX`).
final class QuantizedRelu<T: FixedWidthInteger & BitwiseCopyable>: Kernel {
    let input, output: Int
    let count: Int
    let inputZeroPoint: Int32, outputZeroPoint: Int32
    let multiplier: FixedPoint.Multiplier
    let range: (min: Int32, max: Int32)

    init(_ ctx: PrepareContext, upperBound: Float?) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        try ctx.setShape(output, ctx.shape(input))
        count = ctx.shape(input).reduce(1, *)
        let i = try ctx.quantized(input), o = try ctx.quantized(output)
        inputZeroPoint = i.zeroPoint
        outputZeroPoint = o.zeroPoint
        multiplier = FixedPoint.Multiplier(Double(i.scale / o.scale))
        let limits = (min: Int32(T.min), max: Int32(T.max))
        let low = max(limits.min, o.zeroPoint)
        let high = upperBound.map { min(limits.max, Int32(saturating: Int64(o.zeroPoint) + Int64(Int32(saturating: $0 / o.scale)))) } ?? limits.max
        range = (low, high)
    }

    // A generic class's methods are not specialized where the class is instantiated; these entry
    // points dispatch to code compiled for the concrete element type (4x faster).
    @_specialize(where T == Int8)
    @_specialize(where T == UInt8)
    func run(_ memory: TensorMemory) {
        let src = memory.typed(input, T.self), dst = memory.typed(output, T.self)
        for i in 0..<count {
            let value = outputZeroPoint &+ FixedPoint.multiply(Int32(src[i]) &- inputZeroPoint, multiplier)
            dst[i] = T(truncatingIfNeeded: min(max(value, range.min), range.max))
        }
    }
}

/// SOFTMAX over the last dimension. Float: `exp((x - max) * beta) / sum`. Quantized: a table of
/// `exp(-scale * beta * d)` for the 256 possible distances `d` from the row's maximum, as TFLite's
/// `PopulateSoftmaxLookupTable` and table-driven `Softmax`.
final class Softmax: RowKernel {
    let input, output: Int
    let type: TensorType
    let rows, depth: Int
    let beta: Float
    let table: [Float]
    let outputScale: Float
    let outputZeroPoint: Int32

    init(_ ctx: PrepareContext, beta: Float) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        type = ctx.type(input)
        guard type == ctx.type(output), [.float32, .uint8, .int8].contains(type) else { throw ctx.unsupported() }
        let shape = ctx.shape(input)
        guard let last = shape.last, last > 0 else { throw ctx.fail("softmax needs a non-empty last dimension, got \(shape)") }
        try ctx.setShape(output, shape)
        depth = last
        rows = shape.reduce(1, *) / last
        self.beta = beta
        if type == .float32 {
            table = []
            outputScale = 1
            outputZeroPoint = 0
        } else {
            let i = try ctx.quantized(input), o = try ctx.quantized(output)
            let scale = -i.scale * beta
            var table = [Float](repeating: 0, count: 256)
            for value in 0...255 { table[255 - value] = exp(scale * Float(value)) }
            self.table = table
            outputScale = o.scale
            outputZeroPoint = o.zeroPoint
        }
    }

    var rowCount: Int { rows }

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<rows) }

    /// Rows are independent: the XNNPACK backend runs ranges of them across its threads.
    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        switch type {
        case .float32: runFloat(memory.typed(input, Float.self), memory.typed(output, Float.self), range)
        case .uint8: runQuantized(memory.typed(input, UInt8.self), memory.typed(output, UInt8.self), range)
        default: runQuantized(memory.typed(input, Int8.self), memory.typed(output, Int8.self), range)
        }
    }

    private func runFloat(_ src: UnsafeMutablePointer<Float>, _ dst: UnsafeMutablePointer<Float>, _ range: Range<Int>) {
        for r in range {
            let x = src + r * depth, y = dst + r * depth
            var maximum = x[0]
            for j in 1..<depth { maximum = max(maximum, x[j]) }
            var sum: Float = 0
            for j in 0..<depth {
                y[j] = exp((x[j] - maximum) * beta)
                sum += y[j]
            }
            for j in 0..<depth { y[j] /= sum }
        }
    }

    private func runQuantized<T: FixedWidthInteger>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>, _ range: Range<Int>) {
        let limits = (min: Int32(T.min), max: Int32(T.max))
        table.withUnsafeBufferPointer { table in
            let table = table.baseAddress!
            var range = range
            if CPU.hasAVX512F, depth <= Int(SPOTTER_SOFTMAX_MAX_DEPTH), range.count >= 16 {
                // Whole groups of 16 rows on AVX-512 (the same arithmetic, row by row); the rest below.
                let whole = range.count / 16 * 16
                spotter_softmax_q8_16rows(src + range.lowerBound &* depth, dst + range.lowerBound &* depth, whole, depth,
                                          T.isSigned ? 1 : 0, table, outputScale, outputZeroPoint, limits.min, limits.max)
                range = (range.lowerBound + whole)..<range.upperBound
            }
            withUnsafeTemporaryAllocation(of: Float.self, capacity: depth) { exps in
                let exps = exps.baseAddress!
                for r in range {
                    let x = src + r &* depth, y = dst + r &* depth
                    var maximum = Int32(T.min)
                    for j in 0..<depth { maximum = max(maximum, Int32(x[j])) }
                    var sum: Float = 0
                    for j in 0..<depth {
                        // 0 ... 255: the distance from the maximum counted down from the table's end.
                        exps[j] = table[Int(255 &- (maximum &- Int32(x[j])))]
                        sum += exps[j]
                    }
                    let inverse = 1 / (sum * outputScale)
                    for j in 0..<depth {
                        // Rounded half away from zero (the probability is not negative), without libm.
                        let probability = exps[j] * inverse
                        // At most 2^30: an output scale a hostile file made tiny cannot overflow.
                        var rounded = Int32(probability < 1_073_741_824 ? probability : 1_073_741_824)
                        if probability - Float(rounded) >= 0.5 { rounded &+= 1 }
                        y[j] = T(truncatingIfNeeded: min(max(rounded &+ outputZeroPoint, limits.min), limits.max))
                    }
                }
            }
        }
    }
}

/// HARD_SWISH on uint8/int8 with TFLite's 16-bit fixed-point reference arithmetic.
final class QuantizedHardSwish<T: FixedWidthInteger & BitwiseCopyable>: Kernel {
    let input, output: Int
    let count: Int
    let inputZeroPoint: Int16, outputZeroPoint: Int16
    let outputMultiplier: Int16, outputExponent: Int
    let reluishMultiplier: Int16, reluishExponent: Int

    init(_ ctx: PrepareContext) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        try ctx.setShape(output, ctx.shape(input))
        count = ctx.shape(input).reduce(1, *)
        let i = try ctx.quantized(input), o = try ctx.quantized(output)
        inputZeroPoint = Int16(i.zeroPoint)
        outputZeroPoint = Int16(o.zeroPoint)
        let hiresInputScale = (1 / Float(128)) * i.scale
        let reluishScale = Float(3) / 32768
        let out = FixedPoint.Multiplier(Double(hiresInputScale / o.scale))
        let reluish = FixedPoint.Multiplier(Double(hiresInputScale / reluishScale))
        guard out.shift <= 0 else { throw ctx.fail("output scale too small for the fixed-point hard swish") }
        outputMultiplier = Self.downscale(out.significand)
        outputExponent = out.shift
        reluishMultiplier = Self.downscale(reluish.significand)
        reluishExponent = reluish.shift
    }

    static func downscale(_ multiplier: Int32) -> Int16 {
        let rounding: Int32 = 1 << 15
        if multiplier >= Int32.max - rounding { return Int16.max }
        return Int16((multiplier + rounding) >> 16)
    }

    static func roundingHighMul(_ a: Int16, _ b: Int16) -> Int16 {
        if a == b && a == Int16.min { return Int16.max }
        let product = Int32(a) * Int32(b)
        let nudge: Int32 = product >= 0 ? (1 << 14) : (1 - (1 << 14))
        return Int16(truncatingIfNeeded: (product + nudge) / (1 << 15))
    }

    static func highMul(_ a: Int16, _ b: Int16) -> Int16 {
        if a == b && a == Int16.min { return Int16.max }
        return Int16(truncatingIfNeeded: (Int32(a) * Int32(b)) / (1 << 15))
    }

    static func saturatingLeftShift(_ value: Int16, _ amount: Int) -> Int16 {
        Int16(clamping: Int32(value) * (Int32(1) << amount))
    }

    static func roundingDivideByPOT(_ x: Int16, _ exponent: Int) -> Int16 {
        let mask = Int16((Int32(1) << exponent) - 1)
        let remainder = x & mask
        let threshold = (mask >> 1) + (x < 0 ? 1 : 0)
        return (x >> Int16(exponent)) + (remainder > threshold ? 1 : 0)
    }

    // A generic class's methods are not specialized where the class is instantiated; these entry
    // points dispatch to code compiled for the concrete element type (4x faster).
    @_specialize(where T == Int8)
    @_specialize(where T == UInt8)
    func run(_ memory: TensorMemory) {
        let src = memory.typed(input, T.self), dst = memory.typed(output, T.self)
        for i in 0..<count {
            let value = Int16(truncatingIfNeeded: Int32(src[i]) - Int32(inputZeroPoint))
            let hires = Int16(truncatingIfNeeded: Int32(value) * (1 << 7))
            let preshift = Self.roundingHighMul(hires, outputMultiplier)
            var reluish = hires
            if reluishExponent > 0 { reluish = Self.saturatingLeftShift(reluish, reluishExponent - 1) }
            reluish = Self.roundingHighMul(reluish, reluishMultiplier)
            if reluishExponent > 0 { reluish = Self.saturatingLeftShift(reluish, 1) }
            if reluishExponent < 0 { reluish = Self.roundingDivideByPOT(reluish, -reluishExponent) }
            reluish = Int16((Int32(reluish) + (1 << 15)) >> 1)
            let product = Self.highMul(reluish, preshift)
            var result = Int32(Self.roundingDivideByPOT(product, -outputExponent)) + Int32(outputZeroPoint)
            result = min(max(result, Int32(T.min)), Int32(T.max))
            dst[i] = T(truncatingIfNeeded: result)
        }
    }
}

/// QUANTIZE (float to uint8/int8, or requantize between 8-bit types) and DEQUANTIZE (8- and 16-bit
/// integers, and float16).
final class Quantize: Kernel {
    enum Mode {
        case fromFloat(scale: Float, zeroPoint: Int32)
        /// Between 8-bit types: TFLite's fixed-point requantization of each of the 256 input bytes.
        case requantize(table: [UInt8])
        case toFloat(scale: Double, zeroPoint: Int32)
        case fromFloat16
    }

    let input, output: Int
    let count: Int
    let mode: Mode
    let inputType, outputType: TensorType

    init(_ ctx: PrepareContext, dequantize: Bool) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        inputType = ctx.type(input)
        outputType = ctx.type(output)
        try ctx.setShape(output, ctx.shape(input))
        count = ctx.shape(input).reduce(1, *)
        let eightBit: Set<TensorType> = [.uint8, .int8]
        if dequantize, inputType == .float16 {
            guard outputType == .float32 else { throw ctx.unsupported() }
            mode = .fromFloat16
        } else if dequantize {
            guard eightBit.contains(inputType) || inputType == .int16, outputType == .float32 else { throw ctx.unsupported() }
            let q = try ctx.quantized(input)
            mode = .toFloat(scale: Double(q.scale), zeroPoint: q.zeroPoint)
        } else if inputType == .float32, eightBit.contains(outputType) {
            let q = try ctx.quantized(output)
            mode = .fromFloat(scale: q.scale, zeroPoint: q.zeroPoint)
        } else if eightBit.contains(inputType), eightBit.contains(outputType) {
            let i = try ctx.quantized(input), o = try ctx.quantized(output)
            let multiplier = FixedPoint.Multiplier(Double(i.scale) / Double(o.scale))
            let (low, high) = outputType.integerRange
            let signed = inputType == .int8
            mode = .requantize(table: (0...255).map { byte in
                let value = signed ? Int32(Int8(truncatingIfNeeded: byte)) : Int32(byte)
                let result = min(max(FixedPoint.multiply(value - i.zeroPoint, multiplier) &+ o.zeroPoint, low), high)
                return UInt8(truncatingIfNeeded: result)
            })
        } else {
            throw ctx.unsupported()
        }
    }

    private func load(_ pointer: UnsafeMutableRawPointer, _ i: Int) -> Int32 {
        switch inputType {
        case .uint8: return Int32(pointer.load(fromByteOffset: i, as: UInt8.self))
        case .int8: return Int32(pointer.load(fromByteOffset: i, as: Int8.self))
        default: return Int32(pointer.load(fromByteOffset: 2 * i, as: Int16.self))
        }
    }

    private func store(_ value: Int32, _ pointer: UnsafeMutableRawPointer, _ i: Int) {
        let (low, high) = outputType.integerRange
        let clamped = min(max(value, low), high)
        if outputType == .uint8 { pointer.storeBytes(of: UInt8(clamped), toByteOffset: i, as: UInt8.self) }
        else { pointer.storeBytes(of: Int8(clamped), toByteOffset: i, as: Int8.self) }
    }

    func run(_ memory: TensorMemory) {
        let src = memory.raw(input), dst = memory.raw(output)
        switch mode {
        case .toFloat(let scale, let zeroPoint):
            let out = dst.assumingMemoryBound(to: Float.self)
            for i in 0..<count { out[i] = Float(scale * Double(load(src, i) - zeroPoint)) }
        case .fromFloat16:
            let halves = src.assumingMemoryBound(to: Float16.self), out = dst.assumingMemoryBound(to: Float.self)
            for i in 0..<count { out[i] = Float(halves[i]) }
        case .fromFloat(let scale, let zeroPoint):
            let values = src.assumingMemoryBound(to: Float.self)
            for i in 0..<count {
                let scaled = (values[i] / scale).rounded(.toNearestOrAwayFromZero)
                let value = scaled.isNaN ? 0 : Int32(clamping: Int64(max(min(scaled, 4e9), -4e9))) &+ zeroPoint
                store(value, dst, i)
            }
        case .requantize(let table):
            let from = src.assumingMemoryBound(to: UInt8.self), to = dst.assumingMemoryBound(to: UInt8.self)
            // The same lookup, 64 bytes a step with AVX-512 VBMI where the CPU has it.
            table.withUnsafeBufferPointer { spotter_lookup_bytes($0.baseAddress, from, to, count, nil) }
        }
    }
}
