import TFLiteFormat

/// STRIDED_SLICE with constant begin, end and strides (any element type: it copies bytes), as
/// TensorFlow Lite's `strided_slice_logic.h` resolves them: begin and end masks, negative indices
/// and strides, and shrink-axis; ellipsis and new-axis masks are not supported. Also SLICE (constant
/// begin and size, -1 for the rest of an axis).
final class StridedSlice: RowKernel {
    static let maxRank = 5
    let input, output: Int
    let elementSize: Int
    /// Per axis of the input, padded in front to `maxRank`: first index, step and count.
    let starts, steps, counts: [Int]
    /// Element strides of the input, padded the same way.
    let inputStrides: [Int]
    /// Set when only the last axis is cut (every other axis whole, steps 1): row r is then the
    /// `rowBytes` at r * stride + offset bytes of the input (a channel split, as YOLOv8's C2f).
    let lastAxisOnly: (stride: Int, offset: Int)?

    /// A slice of the input given per axis as first index, step and count.
    init(_ ctx: PrepareContext, starts: [Int], steps: [Int], counts: [Int], outputShape: [Int]) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        guard ctx.type(input) == ctx.type(output), let size = ctx.type(input).byteSize else { throw ctx.unsupported() }
        elementSize = size
        let shape = ctx.shape(input)
        let rank = shape.count
        guard rank <= Self.maxRank else { throw ctx.fail("rank \(rank) is above \(Self.maxRank)") }
        try ctx.setShape(output, outputShape)
        var elementStrides = [Int](repeating: 1, count: rank)
        for axis in stride(from: rank - 2, through: 0, by: -1) { elementStrides[axis] = elementStrides[axis + 1] * shape[axis + 1] }
        let padding = Self.maxRank - rank
        self.starts = [Int](repeating: 0, count: padding) + starts
        self.steps = [Int](repeating: 1, count: padding) + steps
        self.counts = [Int](repeating: 1, count: padding) + counts
        inputStrides = [Int](repeating: 0, count: padding) + elementStrides
        let outer = 0..<(rank - 1)
        if rank >= 1, steps.allSatisfy({ $0 == 1 }), outer.allSatisfy({ starts[$0] == 0 && counts[$0] == shape[$0] }) {
            lastAxisOnly = (stride: shape[rank - 1] * size, offset: starts[rank - 1] * size)
        } else {
            lastAxisOnly = nil
        }
    }

    /// SLICE: constant begin and size per axis (size -1: to the end).
    convenience init(slice ctx: PrepareContext) throws {
        guard ctx.op.inputs.count == 3, ctx.isConstant(ctx.input(1)), ctx.isConstant(ctx.input(2)) else {
            throw ctx.fail("begin and size must be constant")
        }
        let shape = ctx.shape(ctx.input(0))
        let begin = try ctx.integers(input: 1), size = try ctx.integers(input: 2)
        guard begin.count == shape.count, size.count == shape.count else {
            throw ctx.fail("begin \(begin) and size \(size) do not fit the input shape \(shape)")
        }
        var counts: [Int] = []
        for axis in shape.indices {
            let count = size[axis] == -1 ? shape[axis] - begin[axis] : size[axis]
            guard begin[axis] >= 0, count >= 0, begin[axis] + count <= shape[axis] else {
                throw ctx.fail("begin \(begin) and size \(size) reach outside the input shape \(shape)")
            }
            counts.append(count)
        }
        try self.init(ctx, starts: begin, steps: Array(repeating: 1, count: shape.count), counts: counts, outputShape: counts)
    }

    convenience init(_ ctx: PrepareContext, options: StridedSliceOptions) throws {
        guard options.ellipsisMask == 0, options.newAxisMask == 0 else { throw ctx.fail("ellipsis and new-axis masks are not supported") }
        guard !options.offset else { throw ctx.fail("offset (end relative to begin) is not supported") }
        guard (2...4).contains(ctx.op.inputs.count), (1...3).allSatisfy({ ctx.isConstant(ctx.input($0)) }) else {
            throw ctx.fail("begin, end and strides must be constant")
        }
        func values(_ index: Int) throws -> [Int] { try ctx.integers(input: index) }
        let shape = ctx.shape(ctx.input(0))
        let rank = shape.count
        let begin = try values(1), end = try values(2), strides = try values(3)
        guard rank <= Self.maxRank, begin.count == end.count, begin.count == strides.count, begin.count <= rank else {
            throw ctx.fail("begin \(begin), end \(end) and strides \(strides) do not fit the input shape \(shape)")
        }
        var starts: [Int] = [], steps: [Int] = [], counts: [Int] = [], outputShape: [Int] = []
        for axis in 0..<rank {
            let dimension = shape[axis]
            // Axes past the given indices are taken whole.
            let stride = axis < strides.count ? strides[axis] : 1
            guard stride != 0 else { throw ctx.fail("stride 0 on axis \(axis)") }
            let masked = { (mask: Int) in axis >= begin.count || mask & (1 << axis) != 0 }
            var start = masked(options.beginMask) ? (stride > 0 ? Int(Int32.min) : Int(Int32.max)) : begin[axis]
            if start < 0 { start += dimension }
            start = stride > 0 ? min(max(start, 0), dimension) : min(max(start, -1), dimension - 1)
            let shrink = axis < begin.count && options.shrinkAxisMask & (1 << axis) != 0
            var stop: Int
            if shrink {
                stop = start + 1
            } else {
                stop = masked(options.endMask) ? (stride > 0 ? Int(Int32.max) : Int(Int32.min)) : end[axis]
                if stop < 0 { stop += dimension }
                stop = stride > 0 ? min(max(stop, 0), dimension) : min(max(stop, -1), dimension - 1)
            }
            let count = dimension == 0 ? 0 : stride > 0 ? max(0, (stop - start + stride - 1) / stride) : max(0, (start - stop - stride - 1) / -stride)
            if shrink && count != 1 { throw ctx.fail("shrink axis \(axis) selects \(count) elements") }
            starts.append(start)
            steps.append(stride)
            counts.append(count)
            if !shrink { outputShape.append(count) }
        }
        try self.init(ctx, starts: starts, steps: steps, counts: counts, outputShape: outputShape)
    }

    /// Rows: every index of the axes before the last (each a run along the last axis).
    var rowCount: Int { counts.dropLast().reduce(1, *) }
    var rowBytes: Int { counts[Self.maxRank - 1] * elementSize }

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<rowCount) }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        guard !range.isEmpty else { return }
        let source = memory.raw(input), target = memory.raw(output)
        let size = elementSize, inner = counts[4], bytes = inner * size
        if let (stride, offset) = lastAxisOnly {
            copyRuns(range.count, of: bytes, from: source + range.lowerBound * stride + offset, stride: stride,
                     to: target + range.lowerBound * bytes, stride: bytes)
            return
        }
        var index = RowIndex(counts: Array(counts.prefix(4)), row: range.lowerBound)
        var written = range.lowerBound * bytes
        for _ in range {
            var offset = starts[4]
            for axis in 0..<4 { offset += (starts[axis] + index[axis] * steps[axis]) * inputStrides[axis] }
            if steps[4] == 1 {
                // The innermost axis with step 1 is one contiguous copy.
                (target + written).copyMemory(from: source + offset * size, byteCount: bytes)
            } else {
                for e in 0..<inner {
                    (target + written + e * size).copyMemory(from: source + (offset + e * steps[4]) * size, byteCount: size)
                }
            }
            written += bytes
            index.advance()
        }
    }
}
