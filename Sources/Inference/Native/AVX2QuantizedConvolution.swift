internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// 8-bit CONV_2D (uint8 per-tensor, int8 per-channel) on Spotter's AVX2 kernel
/// (Sources/CKernels/conv_q8.c): exact int32 sums, requantized in float as XNNPACK does, so outputs
/// agree with LiteRT's default path. Used where AVX-512 VNNI is missing (``VNNIConvolution``).
final class AVX2QuantizedConvolution: Kernel {
    /// Weights, bias and scales were packed at load.
    var readsConstantInputs: Bool { false }

    /// Longer receptive fields run on XNNPACK: each thread widens six of them on its stack.
    static let maximumFieldLength = 8192

    private let input, output: Int
    private let pool: ThreadPool
    private var conv = spotter_conv_q8()
    // Buffers the C kernel reads; owned here for the kernel's lifetime.
    private let packed: UnsafeMutableBufferPointer<Int16>
    private let bias: UnsafeMutableBufferPointer<Int32>
    private let scale: UnsafeMutableBufferPointer<Float>

    /// Returns nil for convolutions the kernel does not cover (other types, non-constant weights,
    /// int8 weights with zero points, very long receptive fields) or when the CPU lacks AVX2.
    static func make(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws -> AVX2QuantizedConvolution? {
        guard AVX2Convolution.isAvailable, let field = ctx.eightBitConvolutionField, field <= maximumFieldLength else { return nil }
        return try AVX2QuantizedConvolution(ctx, pool: pool, options: options)
    }

    private init(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        self.pool = pool
        let filter = ctx.input(1), type = ctx.type(input)
        let g = try WindowGeometry(convolution: ctx, options: options, depthwise: false)
        let channels = g.outputChannels
        let (requant, zeros) = try convolutionRequantization(
            ctx, input: input, filter: filter, output: output, channels: channels, activation: options.activation)
        let (inputScale, inputZero) = try ctx.quantized(input)
        let outputScale = try ctx.quantized(output).scale
        guard let q = ctx.quantization(filter), q.scales.count == 1 || q.scales.count == channels else {
            throw ctx.fail("filter has no scale per channel for \(channels) channels")
        }
        let k = g.filterHeight * g.filterWidth * g.inputChannels
        guard ctx.shape(filter).reduce(1, *) == channels * k else {
            throw ctx.fail("filter shape \(ctx.shape(filter)) does not hold \(channels) channels of \(k)")
        }
        let biasValues = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: channels)
        guard biasValues.count == channels else { throw ctx.fail("bias has \(biasValues.count) values for \(channels) channels") }

        conv = spotter_conv_q8(
            batches: Int32(g.batches), in_h: Int32(g.inputHeight), in_w: Int32(g.inputWidth), in_c: Int32(g.inputChannels),
            out_h: Int32(g.outputHeight), out_w: Int32(g.outputWidth), out_c: Int32(channels),
            k_h: Int32(g.filterHeight), k_w: Int32(g.filterWidth), stride_h: Int32(g.strideHeight), stride_w: Int32(g.strideWidth),
            dil_h: Int32(g.dilationHeight), dil_w: Int32(g.dilationWidth), pad_top: Int32(g.padTop), pad_left: Int32(g.padLeft),
            is_signed: type == .int8 ? 1 : 0, in_zero: inputZero,
            out_zero: requant.outputZeroPoint, out_min: requant.min, out_max: requant.max,
            packed: nil, bias: nil, scale: nil)
        let padded = (channels + 15) / 16 * 16
        bias = .allocate(capacity: padded)
        bias.initialize(repeating: 0)
        scale = .allocate(capacity: padded)
        scale.initialize(repeating: 0)
        for n in 0..<channels {
            bias[n] = biasValues[n]
            // XNNPACK's requantization scale, in float.
            scale[n] = inputScale * q.scales[q.scales.count == 1 ? 0 : n] / outputScale
        }
        packed = .allocate(capacity: withUnsafePointer(to: &conv) { spotter_conv_q8_packed_count($0) })
        let packedBase = packed.baseAddress
        try withUnsafePointer(to: &conv) { conv in
            try zeros.withUnsafeBufferPointer { zeros in
                if type == .int8 {
                    try ctx.constant(filter, as: Int8.self).withUnsafeBytes {
                        spotter_conv_q8_pack(conv, $0.baseAddress, zeros.baseAddress, packedBase)
                    }
                } else {
                    try ctx.constant(filter, as: UInt8.self).withUnsafeBytes {
                        spotter_conv_q8_pack(conv, $0.baseAddress, zeros.baseAddress, packedBase)
                    }
                }
            }
        }
        conv.packed = UnsafePointer(packed.baseAddress)
        conv.bias = UnsafePointer(bias.baseAddress)
        conv.scale = UnsafePointer(scale.baseAddress)
    }

    deinit {
        packed.deallocate()
        bias.deallocate()
        scale.deallocate()
    }

    func run(_ memory: TensorMemory) {
        withUnsafePointer(to: &conv) { conv in
            spotter_conv_q8_run(conv, memory.raw(input), memory.raw(output), pool.active)
        }
    }
}

extension PrepareContext {
    /// The receptive field length (taps x input channels) of the CONV_2D being prepared when
    /// Spotter's 8-bit kernels take it: uint8 with per-tensor weights or int8 with symmetric
    /// (per-channel) weights, input, weights and output of one type, constant weights and bias.
    var eightBitConvolutionField: Int? { eightBitConvolutionField(of: op) }

    /// ``eightBitConvolutionField`` of another CONV_2D of the graph (one a PAD before it may fold into).
    func eightBitConvolutionField(of conv: OperatorInfo) -> Int? {
        guard conv.inputs.count >= 2, conv.inputs[0] >= 0, conv.inputs[1] >= 0, let output = conv.outputs.first else { return nil }
        let input = conv.inputs[0], filter = conv.inputs[1], type = self.type(input)
        let bias = conv.inputs.count > 2 ? conv.inputs[2] : -1
        guard type == .uint8 || type == .int8, self.type(filter) == type, self.type(output) == type,
              isConstant(filter), shape(input).count == 4, shape(filter).count == 4, bias < 0 || isConstant(bias),
              let q = quantization(filter), type == .uint8 ? q.scales.count == 1 : q.zeroPoints.allSatisfy({ $0 == 0 }) else { return nil }
        return shape(filter).dropFirst().reduce(1, *)
    }

    /// The receptive field of a hybrid CONV_2D the VNNI kernel can run (float input and output,
    /// constant int8 weights with zero points 0, a constant float bias), or nil.
    var hybridConvolutionField: Int? {
        let input = self.input(0), filter = self.input(1)
        guard isHybrid(input: input, weights: filter), type(filter) == .int8, type(output(0)) == .float32,
              shape(input).count == 4, shape(filter).count == 4, shape(input).reduce(1, *) > 0,
              !hasInput(2) || (isConstant(self.input(2)) && type(self.input(2)) == .float32),
              let q = quantization(filter), !q.scales.isEmpty, q.zeroPoints.allSatisfy({ $0 == 0 }) else { return nil }
        return shape(filter).dropFirst().reduce(1, *)
    }
}
