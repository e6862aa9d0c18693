internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// 8-bit CONV_2D with Spotter's AVX-512 VNNI kernel (Sources/CKernels): uint8 per-tensor (TFLite's
/// SSD models) and int8 with per-channel scales (Ultralytics' and most newer exports). A GEMM with
/// exact int32 accumulators over receptive fields read in place (im2col copies only where filter rows
/// are not whole groups of 4 bytes, and at the edges), requantized in float as XNNPACK does, so it agrees with
/// LiteRT's default XNNPACK path. Used by the XNNPACK backend on CPUs with VNNI, which Debian's
/// XNNPACK (2022) does not use.
///
/// Also hybrid CONV_2D (float input and output, int8 weights with per-channel scales: dynamic-range
/// exports such as MobileFaceNet's), as LiteRT's fast path runs it: the input is quantized at each
/// run (int8, one asymmetric scale over the tensor, from its range), multiplied in int8 and the sums
/// scaled back to float with the bias added (and a PReLU after it applied as the outputs are stored).
final class VNNIConvolution: Kernel {
    /// The profile label of an operator this kernel does as it reads or writes (a ``FoldedPad``, a
    /// ``FoldedConcatenation``, a SiLU's MUL: ``SiLU/fusing(into:_:)``).
    static let foldedLabel = "folded into its convolution"

    /// Constants were copied or packed at load.
    var readsConstantInputs: Bool { false }

    /// Whether this CPU can run the kernel (checked once per process).
    static let isAvailable = spotter_has_vnni() != 0
    /// Longer receptive fields run elsewhere: each task may keep eight or more im2col rows on its stack.
    static let maximumFieldLength = Int(SPOTTER_CONV_MAX_TASK_BYTES) / 8

    private let input, output: Int
    /// The inputs of a CONCATENATION folded into this 1x1 layer and their channels (``FoldedConcatenation``), or empty.
    private let parts: [Int]
    private let partChannels: [Int32]
    /// Where the parts are at each run (set before each call; no allocation per run).
    private let partBases: UnsafeMutableBufferPointer<UnsafePointer<UInt8>?>
    private let pool: ThreadPool
    private var conv = spotter_conv()
    // Buffers the C kernel reads; owned here for the kernel's lifetime.
    private let packed: UnsafeMutableBufferPointer<Int8>
    private let columns: UnsafeMutableBufferPointer<Int32>
    private let hybrid: Hybrid?
    /// A SiLU's table the kernel applies to its output bytes (``SiLU/fusing(into:_:)``), or nil.
    private let table: UnsafeMutableBufferPointer<UInt8>?

    /// What a hybrid convolution keeps to quantize its input at each run.
    private struct Hybrid {
        /// One picture of the input quantized, as the kernel reads it.
        let quantized: UnsafeMutableBufferPointer<Int8>
        let batches: Int
        /// Per channel: the sum of its weights and its weight scale.
        let weightSums: [Int32]
        let weightScales: [Float]
        /// The float bias, padded like the columns.
        let bias: UnsafeMutableBufferPointer<Float>
        /// A fused PReLU's alpha then scale, each padded like the columns.
        let prelu: UnsafeMutableBufferPointer<Float>?
    }

    /// Returns nil for convolutions the kernel does not cover: other types, non-constant weights,
    /// uint8 weights with several scales, int8 weights with zero points, receptive fields longer
    /// than ``maximumFieldLength``.
    static func make(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions) throws -> VNNIConvolution? {
        // The field is read in groups of 4 bytes.
        guard isAvailable, let field = ctx.eightBitConvolutionField ?? ctx.hybridConvolutionField,
              (field + 3) / 4 * 4 <= maximumFieldLength else { return nil }
        return try VNNIConvolution(ctx, pool: pool, options: options, hybrid: ctx.type(ctx.input(0)) == .float32)
    }

    /// A PAD of image rows and columns whose output only a VALID 8-bit CONV_2D after it reads
    /// (YOLO's before each stride-2 layer): the convolution reads the PAD's input with that padding
    /// as its own (the kernel fills padding with the input's zero point, as the PAD does), so the
    /// padded copy is never made. Kept by the index of the convolution.
    struct FoldedPad {
        let x: Int
        let top, left: Int
    }

    /// At a PAD: claims it for the convolution reading it when they form a ``FoldedPad`` this kernel
    /// runs (the PAD then does nothing); nil otherwise.
    static func claim(_ ctx: PrepareContext) throws -> Kernel? {
        let op = ctx.op!, graph = ctx.graph
        guard isAvailable, op.code.builtin == .pad, op.inputs.count == 2, [.int8, .uint8].contains(ctx.type(op.inputs[0])),
              !ctx.isConstant(op.inputs[0]), ctx.isConstant(op.inputs[1]), !ctx.isObservable(op.outputs[0]) else { return nil }
        let x = op.inputs[0], padded = op.outputs[0], shape = ctx.shape(x)
        // The padding holds the PAD's zero point, which must be the one x is read with.
        guard shape.count == 4, ctx.type(padded) == ctx.type(x), let qx = ctx.quantization(x), let qp = ctx.quantization(padded),
              qx.scales.count == 1, qx.scales == qp.scales, qx.zeroPoints == qp.zeroPoints else { return nil }
        let p = try ctx.integers(input: 1)
        guard p.count == 8, p[0] == 0, p[1] == 0, p[6] == 0, p[7] == 0, p[2...5].allSatisfy({ $0 >= 0 && $0 <= 64 }) else { return nil }
        let readers = graph.operators.filter { $0.inputs.contains(padded) }
        guard readers.count == 1, let conv = readers.first, conv.code.builtin == .conv2D, conv.index > op.index,
              conv.inputs.first == padded, conv.inputs.dropFirst().allSatisfy({ $0 != padded }),
              case .conv2D(let options) = conv.options, options.padding == .valid, options.dilationWidth == 1, options.dilationHeight == 1,
              let field = ctx.eightBitConvolutionField(of: conv), (field + 3) / 4 * 4 <= maximumFieldLength else { return nil }
        try ctx.setShape(padded, [shape[0], shape[1] + p[2] + p[3], shape[2] + p[4] + p[5], shape[3]])
        // The padded tensor is never written; sharing x's storage keeps x alive until the convolution reads it.
        ctx.alias(output: padded, to: x)
        ctx.foldedPads[conv.index] = FoldedPad(x: x, top: p[2], left: p[4])
        return DoneElsewhere(VNNIConvolution.foldedLabel)
    }

    /// A CONCATENATION along channels of 8-bit tensors that only a 1x1 8-bit CONV_2D after it reads
    /// (YOLOv8's C2f and SPPF blocks), with one quantization for all: the convolution reads each
    /// input where it is, as consecutive runs of its receptive field, so the concatenated copy is
    /// never made. Kept by the index of the convolution.
    struct FoldedConcatenation {
        let parts: [Int]
    }

    /// At a CONCATENATION: claims it for the convolution reading it when they form a
    /// ``FoldedConcatenation`` this kernel runs (the CONCATENATION then does nothing); nil otherwise.
    static func claim(concatenation ctx: PrepareContext, axis: Int, activation: FusedActivation) throws -> Kernel? {
        let op = ctx.op!, graph = ctx.graph, output = op.outputs[0]
        guard isAvailable, activation == .none, (1...Int(SPOTTER_CONV_MAX_SEGMENTS)).contains(op.inputs.count), !ctx.isObservable(output),
              let q = ctx.quantization(output), q.scales.count == 1 else { return nil }
        let first = ctx.shape(op.inputs[0])
        guard first.count == 4, axis == 3 || axis == -1 else { return nil }
        for part in op.inputs {
            let shape = ctx.shape(part)
            // Each part's channels are read in groups of 4 bytes; one quantization, so no bytes change.
            guard part >= 0, !ctx.isConstant(part), ctx.type(part) == ctx.type(output), shape.count == 4, shape.dropLast() == first.dropLast(),
                  shape[3] > 0, shape[3] % 4 == 0, let p = ctx.quantization(part), p.scales == q.scales, p.zeroPoints == q.zeroPoints
            else { return nil }
        }
        let readers = graph.operators.filter { $0.inputs.contains(output) }
        guard readers.count == 1, let conv = readers.first, conv.code.builtin == .conv2D, conv.index > op.index, conv.inputs.first == output,
              conv.inputs.dropFirst().allSatisfy({ $0 != output }), case .conv2D(let options) = conv.options,
              options.strideWidth == 1, options.strideHeight == 1, conv.inputs.count > 1, ctx.isConstant(conv.inputs[1]),
              ctx.shape(conv.inputs[1]).count == 4, ctx.shape(conv.inputs[1])[1] == 1, ctx.shape(conv.inputs[1])[2] == 1,
              let field = ctx.eightBitConvolutionField(of: conv), field <= maximumFieldLength else { return nil }
        let channels = op.inputs.reduce(0) { $0 + ctx.shape($1)[3] }
        guard field == channels else { return nil }
        try ctx.setShape(output, first.dropLast() + [channels])
        // The concatenated tensor is never written; it shares the first part's storage (it is not
        // readable), and every part stays alive until the convolution reads it.
        ctx.alias(output: output, to: op.inputs[0])
        for part in op.inputs { ctx.read(part, lateAt: conv.index) }
        ctx.foldedConcatenations[conv.index] = FoldedConcatenation(parts: op.inputs)
        return DoneElsewhere(VNNIConvolution.foldedLabel)
    }

    private init(_ ctx: PrepareContext, pool: ThreadPool, options: Conv2DOptions, hybrid isHybrid: Bool) throws {
        let folded = ctx.foldedPads[ctx.op.index]
        let concatenated = ctx.foldedConcatenations[ctx.op.index]
        parts = concatenated?.parts ?? []
        partChannels = parts.map { Int32(ctx.shape($0)[3]) }
        partBases = .allocate(capacity: parts.count)
        partBases.initialize(repeating: nil)
        input = folded?.x ?? ctx.input(0)
        output = ctx.output(0)
        self.pool = pool
        let filter = ctx.input(1)
        let signed = isHybrid || ctx.type(input) == .int8
        var g = try WindowGeometry(convolution: ctx, options: options, depthwise: false)
        if let folded {
            // The output is the VALID convolution's of the padded input; the kernel reads x with the padding.
            let shape = ctx.shape(folded.x)
            (g.inputHeight, g.inputWidth, g.padTop, g.padLeft) = (shape[1], shape[2], folded.top, folded.left)
        }
        let channels = g.outputChannels
        guard let q = ctx.quantization(filter), q.scales.count == 1 || q.scales.count == channels else {
            throw ctx.fail("filter has no scale per channel for \(channels) channels")
        }
        let k = g.filterHeight * g.filterWidth * g.inputChannels
        // Weights as the kernel multiplies them: uint8 w - 128, int8 w as it is.
        let weights: [Int32] = signed
            ? try ctx.constant(filter, as: Int8.self).map { Int32($0) }
            : try ctx.constant(filter, as: UInt8.self).map { Int32($0) - 128 }
        guard weights.count == channels * k else {
            throw ctx.fail("filter shape \(ctx.shape(filter)) does not hold \(channels) channels of \(k)")
        }

        let direct = g.filterHeight == 1 && g.filterWidth == 1 && g.strideHeight == 1 && g.strideWidth == 1
            && g.padTop == 0 && g.padLeft == 0 && g.inputChannels % 4 == 0
        if concatenated != nil, !direct || isHybrid { throw ctx.fail("the CONCATENATION folded into this convolution needs a 1x1 8-bit layer") }
        let rowLength = g.filterWidth * g.inputChannels
        let layout = Self.fieldLayout(filterHeight: g.filterHeight, rowLength: rowLength, dilationWidth: g.dilationWidth, direct: direct)
        let k4 = layout.k4
        let nr = Int(SPOTTER_CONV_NR)
        let padded = (channels + nr - 1) / nr * nr
        packed = .allocate(capacity: padded * k4)
        packed.initialize(repeating: 0)
        var weightSums = [Int32](repeating: 0, count: channels)
        for n in 0..<channels {
            let block = n / nr, lane = n % nr
            for kk in 0..<k {
                // Filter rows padded to rowStride bytes, or packed densely.
                let position = layout.rowStride > 0 ? kk / rowLength * layout.rowStride + kk % rowLength : kk
                packed[((block * (k4 / 4) + position / 4) * nr + lane) * 4 + position % 4] = Int8(truncatingIfNeeded: weights[n * k + kk])
                weightSums[n] &+= weights[n * k + kk]
            }
        }
        // Per-channel columns: factor and constant (Int32), then the float scale's bits.
        columns = .allocate(capacity: 3 * padded)
        columns.initialize(repeating: 0)
        conv = spotter_conv(
            batches: Int32(g.batches), in_h: Int32(g.inputHeight), in_w: Int32(g.inputWidth), in_c: Int32(g.inputChannels),
            out_h: Int32(g.outputHeight), out_w: Int32(g.outputWidth), out_c: Int32(channels),
            k_h: Int32(g.filterHeight), k_w: Int32(g.filterWidth), stride_h: Int32(g.strideHeight), stride_w: Int32(g.strideWidth),
            dil_h: Int32(g.dilationHeight), dil_w: Int32(g.dilationWidth), pad_top: Int32(g.padTop), pad_left: Int32(g.padLeft),
            k: Int32(k), k4: Int32(k4), direct: direct ? 1 : 0, row_stride: Int32(layout.rowStride), in_zero: 0,
            a_flip: signed ? Int32(bitPattern: 0x8080_8080) : 0, out_zero: 0, out_min: 0, out_max: 0,
            packed: UnsafePointer(packed.baseAddress), col_factor: UnsafePointer(columns.baseAddress),
            col_const: UnsafePointer(columns.baseAddress! + padded),
            scale: UnsafeRawPointer(columns.baseAddress! + 2 * padded).assumingMemoryBound(to: Float.self),
            out_bias: nil, out_min_f: 0, out_max_f: 0, prelu_alpha: nil, prelu_scale: nil, prelu_min: 0, prelu_max: 0, out_table: nil)

        if isHybrid {
            let bias = UnsafeMutableBufferPointer<Float>.allocate(capacity: padded)
            bias.initialize(repeating: 0)
            if ctx.hasInput(2) {
                let values = try ctx.constant(ctx.input(2), as: Float.self)
                guard values.count == channels else { throw ctx.fail("bias has \(values.count) values for \(channels) channels") }
                for n in 0..<channels { bias[n] = values[n] }
            }
            let quantized = UnsafeMutableBufferPointer<Int8>.allocate(capacity: g.inputHeight * g.inputWidth * g.inputChannels)
            quantized.initialize(repeating: 0)
            conv.batches = 1
            // A PReLU after the layer (MobileFaceNet's) is applied as each output is stored.
            let prelu: UnsafeMutableBufferPointer<Float>?
            if let parameters = try PReLU.fusing(into: output, ctx) {
                let packed = parameters.packed(multiple: nr)
                (conv.prelu_alpha, conv.prelu_scale) = (packed.alpha, packed.scale)
                (conv.prelu_min, conv.prelu_max) = (parameters.low, parameters.high)
                prelu = packed.buffer
            } else {
                prelu = nil
            }
            hybrid = Hybrid(quantized: quantized, batches: g.batches, weightSums: weightSums,
                            weightScales: (0..<channels).map { q.scales[q.scales.count == 1 ? 0 : $0] }, bias: bias, prelu: prelu)
            let range = FixedPoint.activationRange(options.activation)
            (conv.out_bias, conv.out_min_f, conv.out_max_f) = (UnsafePointer(bias.baseAddress), range.min, range.max)
            table = nil
            return
        }
        hybrid = nil
        let (requant, zeros) = try convolutionRequantization(
            ctx, input: input, filter: filter, output: output, channels: channels, activation: options.activation)
        let (inputScale, inputZero) = try ctx.quantized(input)
        let outputScale = try ctx.quantized(output).scale
        let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: channels)
        guard bias.count == channels else { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }
        for n in 0..<channels {
            if signed {
                // dot(x + 128, w) - (128 + x_zero) * sum(w) = dot(x - x_zero, w).
                columns[padded + n] = bias[n] &- (128 &+ inputZero) &* weightSums[n]
            } else {
                // sum(w - w_zero) = sum(w - 128) + k * (128 - w_zero).
                let zero = zeros[n]
                columns[n] = 128 - zero
                columns[padded + n] = bias[n] &- inputZero &* (weightSums[n] &+ Int32(k) &* (128 - zero))
            }
            // XNNPACK's requantization scale, in float.
            let scale = inputScale * q.scales[q.scales.count == 1 ? 0 : n] / outputScale
            columns[2 * padded + n] = Int32(bitPattern: scale.bitPattern)
        }
        (conv.in_zero, conv.out_zero, conv.out_min, conv.out_max) = (inputZero, requant.outputZeroPoint, requant.min, requant.max)
        // Last, once nothing can throw: claiming the SiLU makes its operators no-ops.
        // The table is looked up with the byte permutes ByteTable needs.
        if ByteTable.isAvailable, let silu = try SiLU.fusing(into: output, ctx) {
            let bytes = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 256)
            _ = bytes.initialize(from: silu)
            conv.out_table = UnsafePointer(bytes.baseAddress)
            table = bytes
        } else {
            table = nil
        }
    }

    /// How the kernel reads receptive fields: `rowStride` > 0, each filter row in place, padded to a
    /// multiple of 4 bytes (k4 = filter height x rowStride); 0, dense im2col rows (k4 = k rounded up
    /// to 4). Rows are read in place when the padding costs at most a third more products than dense
    /// rows (an RGB 3x3 layer: 36 against 28 bytes, for no copies), there is no dilation along x and
    /// at most SPOTTER_CONV_MAX_SEGMENTS filter rows (and the padded field fits ``maximumFieldLength``).
    static func fieldLayout(filterHeight: Int, rowLength: Int, dilationWidth: Int, direct: Bool) -> (rowStride: Int, k4: Int) {
        let dense = (filterHeight * rowLength + 3) / 4 * 4
        let stride = (rowLength + 3) / 4 * 4
        guard !direct, dilationWidth == 1, filterHeight <= Int(SPOTTER_CONV_MAX_SEGMENTS), 3 * filterHeight * stride <= 4 * dense,
              filterHeight * stride <= maximumFieldLength else {
            return (0, dense)
        }
        return (stride, filterHeight * stride)
    }

    deinit {
        packed.deallocate()
        columns.deallocate()
        hybrid?.quantized.deallocate()
        hybrid?.bias.deallocate()
        hybrid?.prelu?.deallocate()
        table?.deallocate()
        partBases.deallocate()
    }

    func run(_ memory: TensorMemory) {
        guard let hybrid else {
            withUnsafePointer(to: &conv) { conv in
                if parts.isEmpty {
                    spotter_conv_run(conv, memory.typed(input, UInt8.self), memory.typed(output, UInt8.self), pool.active)
                    return
                }
                for (s, part) in parts.enumerated() { partBases[s] = UnsafePointer(memory.typed(part, UInt8.self)) }
                partChannels.withUnsafeBufferPointer { channels in
                    spotter_conv_run_parts(conv, partBases.baseAddress, channels.baseAddress, Int32(parts.count),
                                           memory.typed(output, UInt8.self), pool.active)
                }
            }
            return
        }
        // Each picture of the batch is quantized on its own (``DynamicQuantization``) and convolved
        // (the kernel was set up for one picture).
        let source = memory.typed(input, Float.self), count = hybrid.quantized.count
        let target = memory.typed(output, Float.self), outputCount = Int(conv.out_h * conv.out_w * conv.out_c)
        let padded = columns.count / 3
        for batch in 0..<hybrid.batches {
            let picture = source + batch * count
            var low: Float = 0, high: Float = 0
            spotter_min_max_f32(picture, count, &low, &high, pool.active)
            let q = DynamicQuantization(min: low, max: high)
            spotter_quantize_s8(picture, hybrid.quantized.baseAddress, count, q.inverseScale, q.zeroPoint, pool.active)
            // dot(x + 128, w) - (128 + zero) * sum(w) = dot(x - zero, w), scaled by both scales.
            for n in hybrid.weightSums.indices {
                columns[padded + n] = 0 &- (128 &+ q.zeroPoint) &* hybrid.weightSums[n]
                columns[2 * padded + n] = Int32(bitPattern: (q.scale * hybrid.weightScales[n]).bitPattern)
            }
            conv.in_zero = q.zeroPoint
            withUnsafePointer(to: &conv) { conv in
                spotter_conv_run(conv, UnsafeRawPointer(hybrid.quantized.baseAddress!).assumingMemoryBound(to: UInt8.self),
                                 target + batch * outputCount, pool.active)
            }
        }
    }
}
