internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// float32 CONV_2D (and hybrid weights dequantized at load) on Spotter's AVX2/FMA kernel
/// (Sources/CKernels/conv_f32.c). Debian's XNNPACK (2022) runs these about half as fast as it could:
/// its float GEMM kernels keep an accumulator on the stack. Sums are in another order than
/// XNNPACK's, so outputs agree with LiteRT's default path to float rounding, as XNNPACK's do.
final class AVX2Convolution: Kernel {
    /// Weights and bias were packed at load.
    var readsConstantInputs: Bool { false }

    /// Whether this CPU can run the kernel (checked once per process).
    static let isAvailable = spotter_has_avx2_fma() != 0
    /// Whether it can round products to bfloat16 (``Interpreter/Options/FloatPrecision/bfloat16``).
    static let hasBFloat16 = spotter_has_avx512_bf16() != 0

    /// Layers with at most this many output channels stay in float32 when bfloat16 is asked for.
    static let bfloat16MinimumChannels = 16

    /// Whether this kernel's products take inputs and weights rounded to bfloat16.
    var roundsToBFloat16: Bool { packedBFloat16 != nil }

    /// Longer receptive fields run on XNNPACK: each thread keeps six of them (for pixels at an edge)
    /// on its stack.
    static let maximumFieldLength = 8192

    private let input, output: Int
    private let pool: ThreadPool
    private var conv = spotter_conv_f32()
    // Buffers the C kernel reads; owned here for the kernel's lifetime.
    private let packed: UnsafeMutableBufferPointer<Float>
    private let packedBFloat16: UnsafeMutableBufferPointer<UInt16>?
    /// The input rounded to bfloat16 at each run (layers other than 1x1).
    private let roundedInput: UnsafeMutableBufferPointer<UInt16>?
    private let zeros: UnsafeMutableBufferPointer<Float>
    /// A PReLU after the convolution, applied to each output as it is stored: alpha, then scale.
    private let prelu: UnsafeMutableBufferPointer<Float>?

    /// Returns nil for convolutions the kernel does not cover (other types, non-constant weights,
    /// very large filters) or when the CPU lacks AVX2 and FMA.
    static func make(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws -> AVX2Convolution? {
        let input = ctx.input(0), filter = ctx.input(1)
        guard isAvailable, ctx.type(input) == .float32, ctx.type(ctx.output(0)) == .float32,
              ctx.type(filter) == .float32 || ctx.isHybrid(input: input, weights: filter),
              ctx.isConstant(filter), ctx.shape(input).count == 4, ctx.shape(filter).count == 4,
              ctx.shape(filter).dropFirst().reduce(1, *) <= maximumFieldLength,
              !ctx.hasInput(2) || ctx.isConstant(ctx.input(2)) else { return nil }
        return try AVX2Convolution(ctx, pool: pool, options: options)
    }

    private init(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        self.pool = pool
        let g = try WindowGeometry(convolution: ctx, options: options, depthwise: false)
        let channels = g.outputChannels
        let range = FixedPoint.activationRange(options.activation)
        var conv = spotter_conv_f32(
            batches: Int32(g.batches), in_h: Int32(g.inputHeight), in_w: Int32(g.inputWidth), in_c: Int32(g.inputChannels),
            out_h: Int32(g.outputHeight), out_w: Int32(g.outputWidth), out_c: Int32(channels),
            k_h: Int32(g.filterHeight), k_w: Int32(g.filterWidth), stride_h: Int32(g.strideHeight), stride_w: Int32(g.strideWidth),
            dil_h: Int32(g.dilationHeight), dil_w: Int32(g.dilationWidth), pad_top: Int32(g.padTop), pad_left: Int32(g.padLeft),
            out_min: range.min, out_max: range.max, packed: nil, zero: nil, prelu_alpha: nil, prelu_scale: nil, prelu_min: 0, prelu_max: 0, packed_bf16: nil, rounded_input: nil)
        let weights = try ctx.floatWeights(ctx.input(1))
        let k = g.filterHeight * g.filterWidth * g.inputChannels
        guard weights.count == channels * k else {
            throw ctx.fail("filter has \(weights.count) values for \(channels) channels of \(k)")
        }
        let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Float.self) : nil
        if let bias, bias.count != channels { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }

        if let parameters = try PReLU.fusing(into: output, ctx) {
            // Whole blocks of channels are read: each array padded with zeros to a multiple of 32.
            let packed = parameters.packed(multiple: 32)
            (conv.prelu_alpha, conv.prelu_scale) = (packed.alpha, packed.scale)
            (conv.prelu_min, conv.prelu_max) = (parameters.low, parameters.high)
            self.prelu = packed.buffer
        } else {
            prelu = nil
        }
        let packed = UnsafeMutableBufferPointer<Float>.allocate(capacity: spotter_conv_f32_packed_count(&conv))
        Self.withPointers(weights, bias) { spotter_conv_f32_pack(&conv, $0, $1, packed.baseAddress) }
        conv.packed = UnsafePointer(packed.baseAddress)
        // With one block of 16 channels, gathering and rounding each tile's inputs costs more than
        // the halved products save (attention-yolo-hybrid's 3x3 RGB layer to 16: 0.197 ms in float32,
        // 0.231 in bfloat16).
        if ctx.floatPrecision == .bfloat16, Self.hasBFloat16, channels > Self.bfloat16MinimumChannels {
            let rounded = UnsafeMutableBufferPointer<UInt16>.allocate(capacity: spotter_conv_bf16_packed_count(&conv))
            Self.withPointers(weights, bias) { spotter_conv_bf16_pack(&conv, $0, $1, rounded.baseAddress) }
            conv.packed_bf16 = UnsafePointer(rounded.baseAddress)
            packedBFloat16 = rounded
            let input = UnsafeMutableBufferPointer<UInt16>.allocate(capacity: max(1, spotter_conv_bf16_rounded_count(&conv)))
            conv.rounded_input = input.baseAddress
            roundedInput = input
        } else {
            (packedBFloat16, roundedInput) = (nil, nil)
        }
        zeros = .allocate(capacity: max(1, g.filterWidth * g.inputChannels))
        zeros.initialize(repeating: 0)
        conv.zero = UnsafePointer(zeros.baseAddress)
        self.packed = packed
        self.conv = conv
    }

    /// Calls `body` with the weights' and the bias's floats (nil: no bias).
    private static func withPointers(_ weights: [Float], _ bias: [Float]?, _ body: (UnsafePointer<Float>?, UnsafePointer<Float>?) -> Void) {
        weights.withUnsafeBufferPointer { w in
            if let bias {
                bias.withUnsafeBufferPointer { body(w.baseAddress, $0.baseAddress) }
            } else {
                body(w.baseAddress, nil)
            }
        }
    }

    deinit {
        packed.deallocate()
        packedBFloat16?.deallocate()
        roundedInput?.deallocate()
        zeros.deallocate()
        prelu?.deallocate()
    }

    func run(_ memory: TensorMemory) {
        withUnsafePointer(to: &conv) { conv in
            spotter_conv_f32_run(conv, memory.typed(input, Float.self), memory.typed(output, Float.self), pool.active)
        }
    }
}
