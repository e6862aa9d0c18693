internal import CKernels
import TFLiteFormat

/// TRANSPOSE with a constant permutation (any element type: it copies bytes), rank up to 6.
final class Transpose: RowKernel {
    static let maxRank = 6
    let input, output: Int
    let elementSize: Int
    /// Output shape padded in front to `maxRank`, and for each output axis the input's element
    /// stride along it.
    let counts: [Int]
    let strides: [Int]
    /// Set when the transpose is a [rows, columns] matrix transposed.
    let matrix: (rows: Int, columns: Int)?

    init(_ ctx: PrepareContext) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        guard ctx.type(input) == ctx.type(output), let size = ctx.type(input).byteSize else { throw ctx.unsupported() }
        elementSize = size
        let permutation = ctx.input(1)
        guard ctx.isConstant(permutation) else { throw ctx.fail("the permutation must be constant") }
        let perm = try ctx.integers(input: 1)
        let shape = ctx.shape(input)
        let rank = shape.count
        guard rank <= Self.maxRank, perm.count == rank, perm.sorted() == Array(0..<rank) else {
            throw ctx.fail("permutation \(perm) does not fit the input shape \(shape)")
        }
        try ctx.setShape(output, perm.map { shape[$0] })
        // Input axes of size 1 drop out, and input axes that stay next to each other in the same
        // order merge: YOLOv8's [1, 80, 80, 144] -> [1, 144, 80, 80] is a [6400, 144] matrix transposed.
        var dims: [[Int]] = []   // runs of input axes, in output order
        for axis in perm where shape[axis] != 1 {
            if let last = dims.last?.last, last + 1 == axis { dims[dims.count - 1].append(axis) } else { dims.append([axis]) }
        }
        let order = dims.sorted { $0[0] < $1[0] }
        let sizes = order.map { $0.reduce(1) { $0 * shape[$1] } }
        var mergedStrides = [Int](repeating: 1, count: order.count)
        for i in stride(from: order.count - 2, through: 0, by: -1) { mergedStrides[i] = mergedStrides[i + 1] * sizes[i + 1] }
        let outputAxes = dims.map { run in order.firstIndex { $0 == run }! }
        let padding = Self.maxRank - outputAxes.count
        counts = [Int](repeating: 1, count: padding) + outputAxes.map { sizes[$0] }
        strides = [Int](repeating: 0, count: padding) + outputAxes.map { mergedStrides[$0] }
        // Two merged axes swapped: a matrix transpose, done in cache-sized tiles.
        matrix = outputAxes == [1, 0] ? (rows: sizes[0], columns: sizes[1]) : nil
    }

    /// Rows: for a matrix transpose, blocks of `tile` output rows; otherwise every index of the
    /// output's axes before the last (each a run of the last axis).
    var rowCount: Int {
        if let (_, columns) = matrix { return (columns + Self.tile - 1) / Self.tile }
        return counts.dropLast().reduce(1, *)
    }

    var rowBytes: Int {
        if let (rows, _) = matrix { return rows * Self.tile * elementSize }
        return counts[Self.maxRank - 1] * elementSize
    }

    static let tile = 32

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<rowCount) }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        let source = memory.raw(input), target = memory.raw(output)
        if elementSize == 1, let (rows, columns) = matrix {
            // Bytes in 16x16 blocks (YOLOv8's head: [6400, 144] and [16, 33600]).
            let first = range.lowerBound * Self.tile, last = min(range.upperBound * Self.tile, columns)
            guard first < last else { return }
            spotter_transpose_bytes(source.assumingMemoryBound(to: UInt8.self), target.assumingMemoryBound(to: UInt8.self),
                                    rows, columns, first, last)
            return
        }
        switch elementSize {
        case 1: copy(UInt8.self, source, target, range)
        case 2: copy(UInt16.self, source, target, range)
        case 4: copy(UInt32.self, source, target, range)
        default: copy(UInt64.self, source, target, range)
        }
    }

    private func copy<T>(_: T.Type, _ source: UnsafeMutableRawPointer, _ target: UnsafeMutableRawPointer, _ range: Range<Int>) {
        let from = source.assumingMemoryBound(to: T.self), to = target.assumingMemoryBound(to: T.self)
        let tile = Self.tile
        if let (rows, columns) = matrix {
            // Output rows are input columns; each block of them is filled a tile of input rows at a time.
            let first = range.lowerBound * tile, last = min(range.upperBound * tile, columns)
            for r0 in stride(from: 0, to: rows, by: tile) {
                for c0 in stride(from: first, to: last, by: tile) {
                    for c in c0..<min(c0 + tile, last) {
                        for r in r0..<min(r0 + tile, rows) { to[c &* rows &+ r] = from[r &* columns &+ c] }
                    }
                }
            }
            return
        }
        guard !range.isEmpty else { return }
        let c = counts, s = strides
        let inner = c[5], step = s[5]
        var index = RowIndex(counts: Array(c.prefix(5)), row: range.lowerBound)
        var written = range.lowerBound * inner
        for _ in range {
            let base = index[0] * s[0] + index[1] * s[1] + index[2] * s[2] + index[3] * s[3] + index[4] * s[4]
            if step == 1 {
                (to + written).update(from: from + base, count: inner)
            } else {
                var offset = base
                for k in 0..<inner { to[written + k] = from[offset]; offset += step }
            }
            written += inner
            index.advance()
        }
    }
}
