internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// CONV_2D on uint8 tensors with Spotter's AVX-512 VNNI kernel (Sources/CKernels): an im2col GEMM
/// with exact int32 accumulators, requantized in float as XNNPACK does, so it agrees with LiteRT's
/// default XNNPACK path. Used by the XNNPACK backend on CPUs with VNNI, which Debian's XNNPACK (2022)
/// does not use.
final class VNNIConvolution: Kernel {
    /// Constants were copied or packed at load.
    var readsConstantInputs: Bool { false }

    /// Whether this CPU can run the kernel (checked once per process).
    static let isAvailable = spotter_has_vnni() != 0

    private let input, output: Int
    private let pool: ThreadPool
    private var conv = spotter_conv()
    // Buffers the C kernel reads; owned here for the kernel's lifetime.
    private let packed: UnsafeMutableBufferPointer<Int8>
    private let columns: UnsafeMutableBufferPointer<Int32>
    private let im2col: UnsafeMutableBufferPointer<UInt8>

    /// Returns nil for convolutions the kernel does not cover (non-uint8, per-channel, grouped).
    static func make(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws -> VNNIConvolution? {
        guard isAvailable, ctx.type(ctx.input(0)) == .uint8, ctx.type(ctx.input(1)) == .uint8,
              ctx.isConstant(ctx.input(1)), !ctx.hasInput(2) || ctx.isConstant(ctx.input(2)),
              ctx.quantization(ctx.input(1))?.scales.count == 1 else { return nil }
        return try VNNIConvolution(ctx, pool: pool, options: options)
    }

    private init(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        self.pool = pool
        let filter = ctx.input(1)
        let g = try WindowGeometry(convolution: ctx, options: options, depthwise: false)
        let channels = g.outputChannels
        let (requant, zeros) = try convolutionRequantization(
            ctx, input: input, filter: filter, output: output, channels: channels, activation: options.activation)
        let (inputScale, inputZero) = try ctx.quantized(input)
        let outputScale = try ctx.quantized(output).scale
        let filterScale = try ctx.quantized(filter).scale
        let weights = try ctx.constant(filter, as: UInt8.self)
        let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: channels)
        guard bias.count == channels else { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }

        let k = g.filterHeight * g.filterWidth * g.inputChannels
        let k4 = (k + 3) / 4 * 4
        let nr = Int(SPOTTER_CONV_NR)
        let padded = (channels + nr - 1) / nr * nr
        packed = .allocate(capacity: padded * k4)
        packed.initialize(repeating: 0)
        for n in 0..<channels {
            let block = n / nr, lane = n % nr
            for kk in 0..<k {
                let value = Int8(truncatingIfNeeded: Int(weights[n * k + kk]) - 128)
                packed[((block * (k4 / 4) + kk / 4) * nr + lane) * 4 + kk % 4] = value
            }
        }
        // Per-channel columns: factor and constant (Int32), then the float scale's bits.
        columns = .allocate(capacity: 3 * padded)
        columns.initialize(repeating: 0)
        for n in 0..<channels {
            let zero = zeros[n]
            var weightSum: Int32 = 0
            for kk in 0..<k { weightSum &+= Int32(weights[n * k + kk]) - zero }
            columns[n] = 128 - zero
            columns[padded + n] = bias[n] &- inputZero &* weightSum
            // xnn_create_convolution2d_nhwc_qu8's requantization scale, in float.
            columns[2 * padded + n] = Int32(bitPattern: (inputScale * filterScale / outputScale).bitPattern)
        }
        let rows = g.batches * g.outputHeight * g.outputWidth
        let direct = g.filterHeight == 1 && g.filterWidth == 1 && g.strideHeight == 1 && g.strideWidth == 1
            && g.padTop == 0 && g.padLeft == 0 && g.inputChannels % 4 == 0
        im2col = .allocate(capacity: direct ? 1 : rows * k4)
        conv = spotter_conv(
            batches: Int32(g.batches), in_h: Int32(g.inputHeight), in_w: Int32(g.inputWidth), in_c: Int32(g.inputChannels),
            out_h: Int32(g.outputHeight), out_w: Int32(g.outputWidth), out_c: Int32(channels),
            k_h: Int32(g.filterHeight), k_w: Int32(g.filterWidth), stride_h: Int32(g.strideHeight), stride_w: Int32(g.strideWidth),
            dil_h: Int32(g.dilationHeight), dil_w: Int32(g.dilationWidth), pad_top: Int32(g.padTop), pad_left: Int32(g.padLeft),
            k: Int32(k), k4: Int32(k4), direct: direct ? 1 : 0, in_zero: inputZero,
            out_zero: requant.outputZeroPoint, out_min: requant.min, out_max: requant.max,
            packed: UnsafePointer(packed.baseAddress), col_factor: UnsafePointer(columns.baseAddress),
            col_const: UnsafePointer(columns.baseAddress! + padded),
            scale: UnsafeRawPointer(columns.baseAddress! + 2 * padded).assumingMemoryBound(to: Float.self),
            im2col: im2col.baseAddress)
    }

    deinit {
        packed.deallocate()
        columns.deallocate()
        im2col.deallocate()
    }

    func run(_ memory: TensorMemory) {
        withUnsafePointer(to: &conv) { conv in
            spotter_conv_run(conv, memory.typed(input, UInt8.self), memory.typed(output, UInt8.self), pool.active)
        }
    }
}
