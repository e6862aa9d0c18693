import Foundation
import TFLiteFormat

/// A position among rows laid out over `counts` (last axis fastest): set from a row number, then
/// counted up one row at a time. The row kernels split across threads start anywhere.
struct RowIndex {
    let counts: [Int]
    private(set) var values: [Int]

    init(counts: [Int], row: Int) {
        self.counts = counts
        values = [Int](repeating: 0, count: counts.count)
        var rest = row
        for axis in counts.indices.reversed() {
            values[axis] = rest % counts[axis]
            rest /= counts[axis]
        }
    }

    subscript(axis: Int) -> Int { values[axis] }

    mutating func advance() {
        for axis in counts.indices.reversed() {
            values[axis] += 1
            if values[axis] < counts[axis] { return }
            values[axis] = 0
        }
    }
}

/// RESHAPE and SQUEEZE: the output shares the input's memory, or copies a constant input.
final class Reshape: Kernel {
    let input, output: Int
    let byteCount: Int
    let copies: Bool

    init(_ ctx: PrepareContext, shape: [Int]) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        guard ctx.type(input) == ctx.type(output) else { throw ctx.unsupported() }
        let count = ctx.shape(input).reduce(1, *)
        var resolved = shape
        if let unknown = shape.firstIndex(of: -1) {
            // The shape comes from the file: its product may overflow.
            var known = 1
            for (index, dimension) in shape.enumerated() where index != unknown {
                let (product, overflow) = known.multipliedReportingOverflow(by: dimension)
                guard !overflow else { throw ctx.fail("cannot reshape \(ctx.shape(input)) to \(shape)") }
                known = product
            }
            guard known > 0, count % known == 0 else { throw ctx.fail("cannot reshape \(ctx.shape(input)) to \(shape)") }
            resolved[unknown] = count / known
        }
        guard resolved.allSatisfy({ $0 >= 0 }) else { throw ctx.fail("cannot reshape \(ctx.shape(input)) to \(shape)") }
        // Checks that the shape multiplies out without overflow, within the reader's limit.
        try ctx.setShape(output, resolved)
        guard resolved.reduce(1, *) == count else { throw ctx.fail("cannot reshape \(ctx.shape(input)) to \(shape)") }
        byteCount = count * (ctx.type(input).byteSize ?? 0)
        copies = ctx.isConstant(input)
        if !copies { ctx.alias(output: output, to: input) }
    }

    /// The target shape of a RESHAPE: its shape tensor, else its options, else the declared output shape.
    static func targetShape(_ ctx: PrepareContext, options: BuiltinOptions) throws -> [Int] {
        if ctx.hasInput(1), ctx.isConstant(ctx.input(1)) {
            let values = try ctx.integers(input: 1)
            if !(values.isEmpty && ctx.shape(ctx.input(1)) == [1]) { return values }
        }
        if case .reshape(let newShape?) = options { return newShape }
        return ctx.shape(ctx.output(0))
    }

    /// The output shape of a SQUEEZE.
    static func squeezedShape(_ ctx: PrepareContext, dimensions: [Int]) throws -> [Int] {
        let shape = ctx.shape(ctx.input(0))
        let rank = shape.count
        let axes = Set(try dimensions.map { d -> Int in
            let axis = d < 0 ? d + rank : d
            guard (0..<rank).contains(axis), shape[axis] == 1 else { throw ctx.fail("cannot squeeze dimension \(d) of \(shape)") }
            return axis
        })
        return shape.enumerated().filter { axes.isEmpty ? $0.element != 1 : !axes.contains($0.offset) }.map(\.element)
    }

    func run(_ memory: TensorMemory) {
        if copies { memory.raw(output).copyMemory(from: memory.raw(input), byteCount: byteCount) }
    }
}

/// CONCATENATION; quantized inputs whose scale or zero point differ from the output's are
/// requantized with TFLite's float formula (`ConcatenationWithScaling`), precomputed at load as a
/// 256-entry table per input (the result depends on the 8-bit input value alone).
final class Concatenation: RowKernel {
    struct Part {
        var tensor: Int
        var chunk: Int
        /// Output byte for every input byte; nil when the bytes are copied as they are.
        var table: [UInt8]?
    }

    let output: Int
    let parts: [Part]
    let outer: Int
    let elementSize: Int
    let floatClamp: (min: Float, max: Float)?

    init(_ ctx: PrepareContext, axis: Int, activation: FusedActivation) throws {
        output = ctx.output(0)
        let type = ctx.type(output)
        let first = ctx.shape(ctx.input(0))
        let rank = first.count
        let axis = axis < 0 ? axis + rank : axis
        guard (0..<rank).contains(axis) else { throw ctx.fail("axis \(axis) out of range for rank \(rank)") }
        var shape = first
        shape[axis] = 0
        for input in ctx.op.inputs {
            let s = ctx.shape(input)
            guard s.count == rank, ctx.type(input) == type,
                  s.enumerated().allSatisfy({ $0.offset == axis || $0.element == first[$0.offset] }) else {
                throw ctx.fail("input \"\(ctx.info(input).name)\" of shape \(s) does not concatenate with \(first) on axis \(axis)")
            }
            shape[axis] += s[axis]
        }
        try ctx.setShape(output, shape)
        outer = first[..<axis].reduce(1, *)
        let inner = first[(axis + 1)...].reduce(1, *)
        elementSize = type.byteSize ?? 1
        floatClamp = type == .float32 && activation != .none ? FixedPoint.activationRange(activation) : nil
        guard type == .uint8 || type == .int8 else {
            parts = ctx.op.inputs.map { Part(tensor: $0, chunk: ctx.shape($0)[axis] * inner, table: nil) }
            return
        }
        let o = try ctx.quantized(output)
        let (low, high) = type.integerRange
        let inverse = 1 / o.scale
        parts = try ctx.op.inputs.map { input in
            let q = try ctx.quantized(input)
            guard q.scale != o.scale || q.zeroPoint != o.zeroPoint else {
                return Part(tensor: input, chunk: ctx.shape(input)[axis] * inner, table: nil)
            }
            let scale = q.scale * inverse
            let bias = -Float(q.zeroPoint) * scale
            let table = (0..<256).map { byte -> UInt8 in
                let value = type == .uint8 ? Float(byte) : Float(Int8(truncatingIfNeeded: byte))
                let requantized = Int32(saturating: Int64(Int32(saturating: value * scale + bias)) + Int64(o.zeroPoint))
                return UInt8(truncatingIfNeeded: min(max(requantized, low), high))
            }
            return Part(tensor: input, chunk: ctx.shape(input)[axis] * inner, table: table)
        }
    }

    /// One row: every input's chunk for one index of the axes before the concatenation axis.
    var rowCount: Int { outer }
    var rowBytes: Int { parts.reduce(0) { $0 + $1.chunk } * elementSize }

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<outer) }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        guard !range.isEmpty else { return }
        let row = rowBytes, first = memory.raw(output) + range.lowerBound * row
        var column = 0
        // Input by input: each one's chunks land at the same place in every output row.
        for part in parts {
            let bytes = part.chunk * elementSize
            let from = memory.raw(part.tensor) + range.lowerBound * bytes, to = first + column
            if let table = part.table {
                table.withUnsafeBufferPointer { table in
                    for k in 0..<range.count {
                        let src = (from + k * bytes).assumingMemoryBound(to: UInt8.self), dst = (to + k * row).assumingMemoryBound(to: UInt8.self)
                        for j in 0..<bytes { dst[j] = table[Int(src[j])] }
                    }
                }
            } else {
                copyRuns(range.count, of: bytes, from: from, stride: bytes, to: to, stride: row)
            }
            column += bytes
        }
        if let clamp = floatClamp {
            let width = rowBytes / elementSize
            let values = memory.typed(output, Float.self)
            for i in (range.lowerBound * width)..<(range.upperBound * width) { values[i] = min(max(values[i], clamp.min), clamp.max) }
        }
    }
}

/// Copies `rows` runs of `bytes`, from places `fromStride` bytes apart to places `toStride` bytes
/// apart; runs of 16, 32 or 64 bytes (YOLOv8's channel counts) as one vector each. A channel cut
/// (STRIDED_SLICE) and a channel concatenation are both this.
func copyRuns(_ rows: Int, of bytes: Int, from: UnsafeRawPointer, stride fromStride: Int,
              to: UnsafeMutableRawPointer, stride toStride: Int) {
    func vectors<V: SIMD>(_: V.Type) {
        var from = from, to = to
        for _ in 0..<rows {
            to.storeBytes(of: from.loadUnaligned(as: V.self), as: V.self)
            from += fromStride
            to += toStride
        }
    }
    switch bytes {
    case 16: vectors(SIMD16<UInt8>.self)
    case 32: vectors(SIMD32<UInt8>.self)
    case 64: vectors(SIMD64<UInt8>.self)
    default:
        for k in 0..<rows { (to + k * toStride).copyMemory(from: from + k * fromStride, byteCount: bytes) }
    }
}

/// PAD with the zero point (quantized) or 0 (float); paddings come from a constant [rank, 2] tensor.
/// Rows are the output's indices along the axes before the last padded one: each is one run of
/// output bytes, filled, then given its run of the input if it has one.
final class Pad: RowKernel {
    let input, output: Int
    let inputShape: [Int]
    let outputShape: [Int]
    let before: [Int]
    let fill: UInt8
    /// The last padded axis (0 when none is): axes after it are the same size in both tensors.
    let last: Int
    /// Bytes of one output row, of the input run inside it, and of the padding in front of that run.
    let rowBytes, runBytes, leadBytes: Int

    init(_ ctx: PrepareContext) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        inputShape = ctx.shape(input)
        let values = try ctx.integers(input: 1)
        guard values.count == inputShape.count * 2, values.allSatisfy({ $0 >= 0 }) else {
            throw ctx.fail("paddings \(values) do not fit input shape \(inputShape)")
        }
        before = stride(from: 0, to: values.count, by: 2).map { values[$0] }
        outputShape = inputShape.enumerated().map { $0.element + values[2 * $0.offset] + values[2 * $0.offset + 1] }
        try ctx.setShape(output, outputShape)
        let elementSize = ctx.type(input).byteSize ?? 1
        switch ctx.type(input) {
        case .float32: fill = 0
        case .uint8, .int8: fill = UInt8(truncatingIfNeeded: try ctx.quantized(output).zeroPoint)
        default: throw ctx.unsupported()
        }
        let shape = inputShape, padded = outputShape
        last = (0..<shape.count).last { padded[$0] != shape[$0] } ?? 0
        let inner = shape.isEmpty ? 1 : shape[(last + 1)...].reduce(1, *) * elementSize
        rowBytes = shape.isEmpty ? elementSize : padded[last] * inner
        runBytes = shape.isEmpty ? elementSize : shape[last] * inner
        leadBytes = shape.isEmpty ? 0 : before[last] * inner
    }

    var rowCount: Int { outputShape.isEmpty ? 1 : outputShape[..<last].reduce(1, *) }

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<rowCount) }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        guard !range.isEmpty else { return }
        let dst = memory.raw(output), src = memory.raw(input)
        let (shape, before, last) = (inputShape, self.before, self.last)
        let (rowBytes, runBytes, leadBytes, fill) = (self.rowBytes, self.runBytes, self.leadBytes, Int32(self.fill))
        memset(dst + range.lowerBound * rowBytes, fill, range.count * rowBytes)
        var index = RowIndex(counts: Array(outputShape[..<last]), row: range.lowerBound)
        for row in range {
            let out = dst + row * rowBytes
            // The input row this output row copies, if it lies inside the input.
            var source = 0, inside = true
            for axis in 0..<last {
                let i = index[axis] - before[axis]
                if i < 0 || i >= shape[axis] { inside = false; break }
                source = source * shape[axis] + i
            }
            if inside { (out + leadBytes).copyMemory(from: src + source * runBytes, byteCount: runBytes) }
            index.advance()
        }
    }
}
