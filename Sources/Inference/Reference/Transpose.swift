import TFLiteFormat

/// TRANSPOSE with a constant permutation (any element type: it copies bytes), rank up to 6.
final class Transpose: Kernel {
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
        let perm = ctx.type(permutation) == .int64
            ? try ctx.constant(permutation, as: Int64.self).map(Int.init) : try ctx.constant(permutation, as: Int32.self).map(Int.init)
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

    func run(_ memory: TensorMemory) {
        let source = memory.raw(input), target = memory.raw(output)
        switch elementSize {
        case 1: copy(UInt8.self, source, target)
        case 2: copy(UInt16.self, source, target)
        case 4: copy(UInt32.self, source, target)
        default: copy(UInt64.self, source, target)
        }
    }

    private func copy<T>(_: T.Type, _ source: UnsafeMutableRawPointer, _ target: UnsafeMutableRawPointer) {
        let from = source.assumingMemoryBound(to: T.self), to = target.assumingMemoryBound(to: T.self)
        if let (rows, columns) = matrix {
            let tile = 32
            for r0 in stride(from: 0, to: rows, by: tile) {
                for c0 in stride(from: 0, to: columns, by: tile) {
                    for c in c0..<min(c0 + tile, columns) {
                        for r in r0..<min(r0 + tile, rows) { to[c &* rows &+ r] = from[r &* columns &+ c] }
                    }
                }
            }
            return
        }
        let c = counts, s = strides
        var written = 0
        for a in 0..<c[0] {
            for b in 0..<c[1] {
                for d in 0..<c[2] {
                    for e in 0..<c[3] {
                        let base = a * s[0] + b * s[1] + d * s[2] + e * s[3]
                        for f in 0..<c[4] {
                            var offset = base + f * s[4]
                            for _ in 0..<c[5] {
                                to[written] = from[offset]
                                written += 1
                                offset += s[5]
                            }
                        }
                    }
                }
            }
        }
    }
}
