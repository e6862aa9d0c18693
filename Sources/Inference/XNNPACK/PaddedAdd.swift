internal import CKernels
import TFLiteFormat

/// A float32 ADD of a tensor and another one zero-padded along its last axis (BlazeFace's residual
/// blocks that widen the channels: `ADD(conv, PAD(x))`), in one pass that reads x itself: the
/// first channels are sums, the rest `conv + 0`, each clamped by the ADD's activation as XNNPACK
/// clamps. The PAD, whose output only this ADD reads, does nothing.
final class PaddedAdd: RowKernel {
    /// The input and output of a PAD that only appends zero channels (kept by the index of the
    /// ADD that alone reads it).
    struct Pattern {
        let x: Int, padded: Int
    }

    var readsConstantInputs: Bool { false }

    private let other, x, output: Int
    private let inner, outer: Int
    private let low, high: Float
    let rowCount: Int
    var rowBytes: Int { outer * 4 }

    /// At a PAD: claims it for the ADD reading it when they form the pattern (the PAD then does
    /// nothing); nil otherwise.
    static func claim(_ ctx: PrepareContext) throws -> Kernel? {
        let op = ctx.op!, graph = ctx.graph
        // Both addends are read from the arena (a constant one would not be kept for this kernel).
        guard op.code.builtin == .pad, op.inputs.count == 2, ctx.type(op.inputs[0]) == .float32, !ctx.isConstant(op.inputs[0]),
              ctx.isConstant(op.inputs[1]), !ctx.isObservable(op.outputs[0]) else { return nil }
        let x = op.inputs[0], padded = op.outputs[0], shape = ctx.shape(x)
        guard let channels = shape.last, channels > 0, !shape.isEmpty else { return nil }
        let paddings = try ctx.integers(input: 1)
        // Only zeros after the last axis.
        guard paddings.count == 2 * shape.count, paddings.dropLast().allSatisfy({ $0 == 0 }), let after = paddings.last, after > 0 else { return nil }
        let readers = graph.operators.filter { $0.inputs.contains(padded) }
        guard readers.count == 1, let add = readers.first, add.code.builtin == .add, add.index > op.index, add.inputs.count == 2,
              add.inputs[0] != add.inputs[1], case .add = add.options, ctx.type(add.outputs[0]) == .float32 else { return nil }
        let widened = Array(shape.dropLast()) + [channels + after]
        let other = add.inputs[0] == padded ? add.inputs[1] : add.inputs[0]
        guard ctx.type(other) == .float32, !ctx.isConstant(other), ctx.shape(other) == widened else { return nil }
        try ctx.setShape(padded, widened)
        // The padded tensor is never written; sharing x's storage keeps x alive until the ADD reads it.
        ctx.alias(output: padded, to: x)
        ctx.paddedAdds[add.index] = Pattern(x: x, padded: padded)
        return DoneElsewhere("padded add")  // the PAD: its output is never written or read
    }

    init(_ ctx: PrepareContext, _ pattern: Pattern, activation: FusedActivation) throws {
        x = pattern.x
        output = ctx.output(0)
        other = ctx.input(0) == pattern.padded ? ctx.input(1) : ctx.input(0)
        let shape = ctx.shape(other)
        try ctx.setShape(output, shape)
        outer = shape.last ?? 1
        inner = ctx.shape(x).last ?? 1
        rowCount = shape.reduce(1, *) / max(1, outer)
        (low, high) = FixedPoint.activationRange(activation)
    }

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<rowCount) }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        let a = memory.typed(other, Float.self), b = memory.typed(x, Float.self), out = memory.typed(output, Float.self)
        let (inner, outer, low, high) = (self.inner, self.outer, self.low, self.high)
        if CPU.hasAVX512F {  // the AVX-512 pass, else the Swift loop below
            spotter_padded_add_f32(a + range.lowerBound * outer, b + range.lowerBound * inner, out + range.lowerBound * outer,
                                   range.count, inner, outer, low, high)
            return
        }
        for row in range {
            let ar = a + row * outer, br = b + row * inner, o = out + row * outer
            // XNNPACK's clamp: the maximum with the low bound, then the minimum with the high one.
            for c in 0..<inner { o[c] = Swift.min(Swift.max(ar[c] + br[c], low), high) }
            for c in inner..<outer { o[c] = Swift.min(Swift.max(ar[c] + 0, low), high) }
        }
    }
}
