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
        var inputStrides = [Int](repeating: 1, count: rank)
        for axis in stride(from: rank - 2, through: 0, by: -1) { inputStrides[axis] = inputStrides[axis + 1] * shape[axis + 1] }
        try ctx.setShape(output, perm.map { shape[$0] })
        let padding = Self.maxRank - rank
        counts = [Int](repeating: 1, count: padding) + perm.map { shape[$0] }
        strides = [Int](repeating: 0, count: padding) + perm.map { inputStrides[$0] }
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
