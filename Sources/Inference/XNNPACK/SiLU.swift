internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// `x * LOGISTIC(x)` (SiLU, after every convolution of YOLOv8) in one pass. On 8-bit tensors the MUL
/// looks each byte of `x` up in a table (``ByteTable``) that XNNPACK's own sigmoid and multiply
/// operators computed for all 256 inputs at load, so the bytes are the ones the two operators would
/// write; after an 8-bit convolution on the VNNI kernel, the convolution applies the table itself
/// (``fusing(into:_:)``) and the MUL does nothing too. On float32 (hybrid exports) the MUL computes
/// both on AVX-512 (``FloatPass``), within a few units in the last place of XNNPACK's two passes.
/// Either way the LOGISTIC, whose output only that MUL reads, does nothing.
enum SiLU {
    /// The kernel for a LOGISTIC or MUL that is part of a SiLU, else nil.
    static func make(_ ctx: PrepareContext, pool: ThreadPool) throws -> Kernel? {
        let op = ctx.op!
        if let x = ctx.foldedSiLUs[op.index] {
            // The convolution writing x applied the table: the MUL's output is x's storage.
            try ctx.setShape(op.outputs[0], ctx.shape(x))
            ctx.alias(output: op.outputs[0], to: x)
            return DoneElsewhere(VNNIConvolution.foldedLabel)
        }
        if op.code.builtin == .logistic {
            guard let mul = consumers(of: op.outputs[0], in: ctx.graph).first,
                  let logistic = logistic(feeding: mul, ctx), logistic.index == op.index else { return nil }
            try ctx.setShape(op.outputs[0], ctx.shape(op.inputs[0]))
            return DoneElsewhere("silu")  // its output is never read
        }
        guard op.code.builtin == .mul, case .mul(let activation) = op.options,
              let logistic = logistic(feeding: op, ctx) else { return nil }
        let x = logistic.inputs[0], output = op.outputs[0]
        try ctx.setShape(output, ctx.shape(x))
        if ctx.type(x) == .float32 {
            let range = FixedPoint.activationRange(activation)
            return FloatPass(input: x, output: output, count: ctx.shape(x).reduce(1, *),
                             clamp: activation == .none ? nil : range.min...range.max, pool: pool)
        }
        let table = try table(ctx, x: x, sigmoid: logistic.outputs[0], output: output, activation: activation)
        return ByteTable(input: x, output: output, count: ctx.shape(x).reduce(1, *), table: table, label: "silu", pool: pool)
    }

    /// The table of the SiLU reading `x`, claimed for the 8-bit convolution about to write x to
    /// apply as it writes (its LOGISTIC and MUL become no-ops and the MUL's output shares x's
    /// storage), when the SiLU's LOGISTIC and MUL are x's only readers and x is no model output
    /// (``PrepareContext/isObservable(_:)``). Nil otherwise.
    static func fusing(into x: Int, _ ctx: PrepareContext) throws -> [UInt8]? {
        guard !ctx.isObservable(x), [.int8, .uint8].contains(ctx.type(x)) else { return nil }
        let readers = consumers(of: x, in: ctx.graph)
        guard readers.count == 2, let mul = readers.first(where: { $0.code.builtin == .mul }), case .mul(let activation) = mul.options,
              let logistic = logistic(feeding: mul, ctx), logistic.inputs == [x], readers.contains(where: { $0.index == logistic.index })
        else { return nil }
        let bytes = try table(ctx, x: x, sigmoid: logistic.outputs[0], output: mul.outputs[0], activation: activation)
        ctx.foldedSiLUs[mul.index] = x
        return bytes
    }

    /// Operators reading `tensor`.
    private static func consumers(of tensor: Int, in graph: Subgraph) -> [OperatorInfo] {
        graph.operators.filter { $0.inputs.contains(tensor) }
    }

    /// The LOGISTIC of `mul`'s other input, when `mul` is `x * LOGISTIC(x)` on one 8-bit type (or
    /// float32, on CPUs with AVX-512F), of one shape, and nothing else (not the model's outputs, not
    /// a preserved tensor) reads the LOGISTIC's output.
    private static func logistic(feeding mul: OperatorInfo, _ ctx: PrepareContext) -> OperatorInfo? {
        let graph = ctx.graph
        guard mul.code.builtin == .mul, mul.inputs.count == 2, mul.outputs.count == 1 else { return nil }
        for (s, x) in [(mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])] where s >= 0 && x >= 0 {
            guard let logistic = graph.operators.first(where: { $0.code.builtin == .logistic && $0.outputs == [s] }),
                  logistic.inputs == [x], !ctx.isObservable(s),
                  consumers(of: s, in: graph).map(\.index) == [mul.index] else { continue }
            let types = [x, s, mul.outputs[0]].map { graph.tensors[$0].type }
            guard types.allSatisfy({ $0 == types[0] }), [.int8, .uint8].contains(types[0]) || (types[0] == .float32 && CPU.hasAVX512F),
                  graph.tensors[x].shape == graph.tensors[s].shape, graph.tensors[x].shape == graph.tensors[mul.outputs[0]].shape
            else { continue }
            return logistic
        }
        return nil
    }

    /// The SiLU's output byte for each of the 256 bytes of x, as XNNPACK's sigmoid and multiply
    /// operators compute them with the tensors' quantizations.
    private static func table(_ ctx: PrepareContext, x input: Int, sigmoid s: Int, output: Int, activation: FusedActivation) throws -> [UInt8] {
        let x = try ctx.quantized(input), y = try ctx.quantized(s), o = try ctx.quantized(output)
        let range = FixedPoint.activationRange(activation, scale: o.scale, zeroPoint: o.zeroPoint, type: ctx.type(output))
        // XNNPACK keeps the pointers given at setup until the run: one buffer that outlives it,
        // holding the 256 input bytes, their sigmoid and the product.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 3 * 256, alignment: 64)
        defer { buffer.deallocate() }
        for byte in 0..<256 { buffer[byte] = UInt8(byte) }
        for (byte, value) in try ByteTable.sigmoid(ctx, x: input, y: s).enumerated() { buffer[256 + byte] = value }
        let bytes = buffer.baseAddress!, sigmoid = bytes + 256, product = bytes + 512
        let signed = ctx.type(input) == .int8
        var shape = 256
        try ByteTable.runOnce(ctx, "multiply", create: {
            signed ? xnn_create_multiply_nd_qs8(Int8(x.zeroPoint), x.scale, Int8(y.zeroPoint), y.scale, Int8(o.zeroPoint), o.scale,
                                                Int8(range.min), Int8(range.max), 0, $0)
                   : xnn_create_multiply_nd_qu8(UInt8(x.zeroPoint), x.scale, UInt8(y.zeroPoint), y.scale, UInt8(o.zeroPoint), o.scale,
                                                UInt8(range.min), UInt8(range.max), 0, $0)
        }, setup: { op in
            // The shapes are read during setup only.
            signed ? xnn_setup_multiply_nd_qs8(op, 1, &shape, 1, &shape, bytes.assumingMemoryBound(to: Int8.self),
                                               sigmoid.assumingMemoryBound(to: Int8.self), product.assumingMemoryBound(to: Int8.self), nil)
                   : xnn_setup_multiply_nd_qu8(op, 1, &shape, 1, &shape, bytes.assumingMemoryBound(to: UInt8.self),
                                               sigmoid.assumingMemoryBound(to: UInt8.self), product.assumingMemoryBound(to: UInt8.self), nil)
        })
        return Array(UnsafeRawBufferPointer(start: product, count: 256))
    }

    /// A float32 SiLU in one pass (Sources/CKernels/silu_f32.c), then the MUL's fused clamp.
    final class FloatPass: Kernel {
        var readsConstantInputs: Bool { false }
        private let input, output, count: Int
        /// The MUL's fused activation, if any.
        private let clamp: ClosedRange<Float>?
        private let pool: ThreadPool

        init(input: Int, output: Int, count: Int, clamp: ClosedRange<Float>?, pool: ThreadPool) {
            (self.input, self.output, self.count, self.clamp, self.pool) = (input, output, count, clamp, pool)
        }

        func run(_ memory: TensorMemory) {
            let y = memory.typed(output, Float.self)
            spotter_silu_f32(memory.typed(input, Float.self), y, count, pool.active)
            guard let clamp else { return }
            for i in 0..<count { y[i] = min(max(y[i], clamp.lowerBound), clamp.upperBound) }
        }
    }
}
