internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// float32 DEPTHWISE_CONV_2D with depth multiplier 1 (and hybrid weights dequantized at load) on
/// Spotter's AVX-512 kernel (Sources/CKernels/dwconv_f32.c). Debian's XNNPACK (2022) took 57 us for
/// each of BlazeFace's 64x64x24 3x3 layers, reloading the weights and an input pointer per tap for
/// every pixel; this kernel 14 us. Sums are in another order than XNNPACK's, so outputs agree with
/// LiteRT's default path to float rounding, as XNNPACK's do.
final class AVX512Depthwise: Kernel {
    /// Weights and bias were packed at load.
    var readsConstantInputs: Bool { false }

    /// Whether this CPU can run the kernel (checked once per process).
    static let isAvailable = CPU.hasAVX512F

    /// Taller filters run on XNNPACK: each thread keeps a pointer per filter row on its stack.
    static let maximumFilterHeight = 64

    private let input, output: Int
    private let pool: ThreadPool
    private var conv = spotter_dwconv_f32()
    // Buffers the C kernel reads; owned here for the kernel's lifetime.
    private let packed: UnsafeMutableBufferPointer<Float>
    /// A row of zeros, read for filter rows in the padding.
    private let zeros: UnsafeMutableBufferPointer<Float>
    /// A PReLU after the convolution, applied to each output as it is stored: alpha, then scale.
    private let prelu: UnsafeMutableBufferPointer<Float>?

    /// Returns nil for depthwise convolutions the kernel does not cover (a depth multiplier above 1,
    /// other types, non-constant weights) or when the CPU lacks AVX-512F.
    static func make(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws -> AVX512Depthwise? {
        let input = ctx.input(0), filter = ctx.input(1)
        guard isAvailable, ctx.type(input) == .float32, ctx.type(ctx.output(0)) == .float32,
              ctx.type(filter) == .float32 || ctx.isHybrid(input: input, weights: filter),
              ctx.isConstant(filter), ctx.shape(input).count == 4, ctx.shape(filter).count == 4,
              ctx.shape(filter)[3] == ctx.shape(input)[3], ctx.shape(filter)[1] <= maximumFilterHeight,
              !ctx.hasInput(2) || ctx.isConstant(ctx.input(2)) else { return nil }
        return try AVX512Depthwise(ctx, pool: pool, options: options)
    }

    private init(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        self.pool = pool
        let g = try WindowGeometry(convolution: ctx, options: options, depthwise: true)
        let channels = g.outputChannels
        let range = FixedPoint.activationRange(options.activation)
        conv = spotter_dwconv_f32(
            batches: Int32(g.batches), in_h: Int32(g.inputHeight), in_w: Int32(g.inputWidth), channels: Int32(channels),
            out_h: Int32(g.outputHeight), out_w: Int32(g.outputWidth),
            k_h: Int32(g.filterHeight), k_w: Int32(g.filterWidth), stride_h: Int32(g.strideHeight), stride_w: Int32(g.strideWidth),
            dil_h: Int32(g.dilationHeight), dil_w: Int32(g.dilationWidth), pad_top: Int32(g.padTop), pad_left: Int32(g.padLeft),
            out_min: range.min, out_max: range.max, packed: nil, zero_row: nil, prelu_alpha: nil, prelu_scale: nil, prelu_min: 0, prelu_max: 0)
        let weights = try ctx.floatWeights(ctx.input(1))
        guard weights.count == g.filterHeight * g.filterWidth * channels else {
            throw ctx.fail("filter has \(weights.count) values for \(channels) channels of \(g.filterHeight)x\(g.filterWidth)")
        }
        let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Float.self) : nil
        if let bias, bias.count != channels { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }
        // A PReLU after the layer (MobileFaceNet's) is applied as each output is stored.
        if let parameters = try PReLU.fusing(into: output, ctx) {
            let packed = parameters.packed(multiple: 16)
            (conv.prelu_alpha, conv.prelu_scale) = (packed.alpha, packed.scale)
            (conv.prelu_min, conv.prelu_max) = (parameters.low, parameters.high)
            prelu = packed.buffer
        } else {
            prelu = nil
        }
        packed = .allocate(capacity: withUnsafePointer(to: &conv) { spotter_dwconv_f32_packed_count($0) })
        zeros = .allocate(capacity: max(1, g.inputWidth * channels))
        zeros.initialize(repeating: 0)
        withUnsafePointer(to: &conv) { conv in
            weights.withUnsafeBufferPointer { w in
                if let bias {
                    bias.withUnsafeBufferPointer { spotter_dwconv_f32_pack(conv, w.baseAddress, $0.baseAddress, packed.baseAddress) }
                } else {
                    spotter_dwconv_f32_pack(conv, w.baseAddress, nil, packed.baseAddress)
                }
            }
        }
        conv.packed = UnsafePointer(packed.baseAddress)
        conv.zero_row = UnsafePointer(zeros.baseAddress)
    }

    deinit {
        packed.deallocate()
        zeros.deallocate()
        prelu?.deallocate()
    }

    func run(_ memory: TensorMemory) {
        withUnsafePointer(to: &conv) { conv in
            spotter_dwconv_f32_run(conv, memory.typed(input, Float.self), memory.typed(output, Float.self), pool.active)
        }
    }
}
