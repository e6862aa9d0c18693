internal import CKernels
import TFLiteFormat

/// PReLU as TensorFlow exports it without a PRELU operator (MobileFaceNet, after every
/// convolution): `RELU(x) + (x - ABS(x)) * alpha * scale`, six operators and six passes over the
/// activations. Where the CPU has AVX2, the fast path computes the same float operations in the
/// same order, as XNNPACK's operators do them, in one pass at the ADD
/// (Sources/CKernels/kernels.c); the ABS, SUB, MULs and RELU, whose outputs only the pattern reads,
/// do nothing.
final class PReLU: RowKernel {
    /// The six operators of one PReLU, found from its input `x`.
    struct Pattern {
        let x: Int
        /// Constants multiplied in, each one value or one per channel (the last axis).
        let alpha: Int
        let scale: Int
        let add: Int
        let parts: [Int]
        /// The convolution writing x applies the PReLU itself (``fusing(into:_:)``): x's storage
        /// holds the result, which the ADD's output shares.
        var isFused = false
    }

    var readsConstantInputs: Bool { false }

    private let input, output, channels: Int
    private let alpha, scale: [Float]
    private let low, high: Float
    let rowCount: Int
    var rowBytes: Int { channels * 4 }

    /// The kernel for an operator of a float32 PReLU pattern, else nil. The first of its operators
    /// finds the pattern and records it in `ctx`; the ADD computes it; the others do nothing.
    static func make(_ ctx: PrepareContext, pool: ThreadPool) throws -> Kernel? {
        let op = ctx.op!
        if ctx.prelus[op.index] == nil, AVX2Convolution.isAvailable, [.abs, .relu].contains(op.code.builtin), let pattern = match(from: op.inputs[0], ctx) {
            for index in pattern.parts + [pattern.add] { ctx.prelus[index] = pattern }
        }
        guard let pattern = ctx.prelus[op.index] else { return nil }
        guard op.index == pattern.add else {
            try ctx.setShape(op.outputs[0], ctx.shape(pattern.x))
            return DoneElsewhere("prelu")  // the pattern's other operators: their outputs are never read
        }
        if pattern.isFused {
            try ctx.setShape(op.outputs[0], ctx.shape(pattern.x))
            ctx.alias(output: op.outputs[0], to: pattern.x)
            return DoneElsewhere("prelu")  // the convolution writing x applied it: the ADD's output is x's storage
        }
        let kernel = try PReLU(ctx, pattern)
        return PooledRows(kernel, rowBytes: kernel.rowBytes, pool: pool)
    }

    /// The per-channel constants and clamp of a pattern over `channels` channels.
    struct Parameters {
        let alpha, scale: [Float]
        let low, high: Float

        /// alpha then scale, each padded with zeros to `channels` rounded up to `multiple`, as the
        /// C kernels read whole blocks of channels; the caller owns (and deallocates) the buffer.
        func packed(multiple: Int) -> (buffer: UnsafeMutableBufferPointer<Float>, alpha: UnsafePointer<Float>, scale: UnsafePointer<Float>) {
            let padded = (alpha.count + multiple - 1) / multiple * multiple
            let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: max(1, 2 * padded))
            buffer.initialize(repeating: 0)
            for c in alpha.indices { (buffer[c], buffer[padded + c]) = (alpha[c], scale[c]) }
            return (buffer, UnsafePointer(buffer.baseAddress!), UnsafePointer(buffer.baseAddress! + padded))
        }
    }

    static func parameters(_ ctx: PrepareContext, _ pattern: Pattern, channels: Int) throws -> Parameters {
        guard case .add(let activation) = ctx.graph.operators[pattern.add].options else { throw ctx.fail("PReLU's ADD has no options") }
        func expand(_ values: [Float]) -> [Float] { values.count == 1 ? [Float](repeating: values[0], count: channels) : values }
        let alpha = expand(try ctx.constant(pattern.alpha, as: Float.self)), scale = expand(try ctx.constant(pattern.scale, as: Float.self))
        guard alpha.count == channels, scale.count == channels else { throw ctx.fail("PReLU constants do not match \(channels) channels") }
        let (low, high) = FixedPoint.activationRange(activation)
        return Parameters(alpha: alpha, scale: scale, low: low, high: high)
    }

    /// The PReLU after the operator about to write `x`, claimed for that operator to apply as it
    /// writes (its operators become no-ops and the ADD's output shares x's storage), when the
    /// pattern's ABS, RELU and SUB are x's only readers and x is no model output. Nil otherwise.
    static func fusing(into x: Int, _ ctx: PrepareContext) throws -> Parameters? {
        guard AVX2Convolution.isAvailable, !ctx.isObservable(x), var pattern = match(from: x, ctx) else { return nil }
        let readers = ctx.graph.operators.filter { $0.inputs.contains(x) }.map(\.index)
        guard readers.count == 3, readers.allSatisfy(pattern.parts.contains) else { return nil }
        let parameters = try self.parameters(ctx, pattern, channels: max(1, ctx.shape(x).last ?? 1))
        pattern.isFused = true
        for index in pattern.parts + [pattern.add] { ctx.prelus[index] = pattern }
        return parameters
    }

    /// The PReLU pattern reading `x`, when every tensor is float32 of x's shape, the constants are
    /// one value or one per channel, no operator but the last has an activation, and nothing else
    /// (not even the model's outputs) reads the intermediate tensors.
    static func match(from x: Int, _ ctx: PrepareContext) -> Pattern? {
        let graph = ctx.graph
        guard x >= 0, graph.tensors[x].type == .float32 else { return nil }
        let shape = ctx.shape(x), channels = shape.last ?? 1
        /// The one operator reading `tensor`, if only one does and it is not a model output.
        func soleReader(_ tensor: Int) -> OperatorInfo? {
            let readers = graph.operators.filter { $0.inputs.contains(tensor) }
            guard readers.count == 1, !ctx.isObservable(tensor), readers[0].outputs.count == 1,
                  graph.tensors[readers[0].outputs[0]].type == .float32 else { return nil }
            return readers[0]
        }
        /// The other input of a two-input operator reading `tensor`.
        func other(_ op: OperatorInfo, _ tensor: Int) -> Int? {
            guard op.inputs.count == 2 else { return nil }
            return op.inputs[0] == tensor ? op.inputs[1] : op.inputs[1] == tensor ? op.inputs[0] : nil
        }
        /// A float32 constant of one value, or of one per channel along the last axis only.
        func perChannel(_ tensor: Int) -> Bool {
            let dims = ctx.shape(tensor)
            return graph.tensors[tensor].type == .float32 && ctx.isConstant(tensor) && dims.count <= shape.count
                && dims.dropLast().allSatisfy { $0 == 1 } && [1, channels].contains(dims.last ?? 1)
        }
        let readers = graph.operators.filter { $0.inputs.contains(x) }
        guard let abs = readers.first(where: { $0.code.builtin == .abs && $0.inputs == [x] }),
              let relu = readers.first(where: { $0.code.builtin == .relu && $0.inputs == [x] }),
              let sub = soleReader(abs.outputs[0]), sub.code.builtin == .sub, case .sub(.none) = sub.options,
              sub.inputs == [x, abs.outputs[0]],
              let mul = soleReader(sub.outputs[0]), mul.code.builtin == .mul, case .mul(.none) = mul.options,
              let alpha = other(mul, sub.outputs[0]), perChannel(alpha),
              let mul2 = soleReader(mul.outputs[0]), mul2.code.builtin == .mul, case .mul(.none) = mul2.options,
              let scale = other(mul2, mul.outputs[0]), perChannel(scale),
              let add = soleReader(relu.outputs[0]), add.code.builtin == .add, case .add = add.options,
              other(add, relu.outputs[0]) == mul2.outputs[0],
              [abs, relu, sub, mul, mul2, add].allSatisfy({ ctx.shape($0.outputs[0]).isEmpty || ctx.shape($0.outputs[0]) == shape })
        else { return nil }
        let parts = [abs, sub, mul, mul2, relu].map(\.index)
        // The fused kernel runs at the ADD, so x must be computed, and the pieces come, before it.
        guard parts.allSatisfy({ $0 < add.index }) else { return nil }
        return Pattern(x: x, alpha: alpha, scale: scale, add: add.index, parts: parts)
    }

    private init(_ ctx: PrepareContext, _ pattern: Pattern) throws {
        input = pattern.x
        output = ctx.output(0)
        let shape = ctx.shape(input)
        try ctx.setShape(output, shape)
        let channels = max(1, shape.last ?? 1)
        self.channels = channels
        rowCount = shape.reduce(1, *) / channels
        let parameters = try Self.parameters(ctx, pattern, channels: channels)
        (alpha, scale, low, high) = (parameters.alpha, parameters.scale, parameters.low, parameters.high)
    }

    func run(_ memory: TensorMemory) { run(memory, rows: 0..<rowCount) }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        let start = range.lowerBound * channels
        alpha.withUnsafeBufferPointer { alpha in
            scale.withUnsafeBufferPointer { scale in
                spotter_prelu_f32(memory.typed(input, Float.self) + start, memory.typed(output, Float.self) + start, range.count,
                                  channels, alpha.baseAddress, scale.baseAddress, low, high)
            }
        }
    }
}
