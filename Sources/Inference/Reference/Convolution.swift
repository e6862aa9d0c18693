internal import CKernels
import TFLiteFormat

/// Sizes and padding of a 2-D window operation (convolution, depthwise convolution, pooling).
struct WindowGeometry {
    var batches, inputHeight, inputWidth, inputChannels: Int
    var outputHeight, outputWidth, outputChannels: Int
    var filterHeight, filterWidth: Int
    var strideHeight, strideWidth, dilationHeight, dilationWidth: Int
    var padTop, padLeft: Int

    /// TFLite's `ComputeOutSize` and `ComputePaddingHeightWidth`.
    init(input: [Int], filterHeight: Int, filterWidth: Int, outputChannels: Int, padding: Padding,
         strideHeight: Int, strideWidth: Int, dilationHeight: Int = 1, dilationWidth: Int = 1) {
        batches = input[0]
        inputHeight = input[1]
        inputWidth = input[2]
        inputChannels = input[3]
        self.outputChannels = outputChannels
        self.filterHeight = filterHeight
        self.filterWidth = filterWidth
        self.strideHeight = strideHeight
        self.strideWidth = strideWidth
        self.dilationHeight = dilationHeight
        self.dilationWidth = dilationWidth
        func outSize(_ size: Int, _ filter: Int, _ stride: Int, _ dilation: Int) -> Int {
            let effective = (filter - 1) * dilation + 1
            switch padding {
            case .same: return (size + stride - 1) / stride
            case .valid: return max(0, (size + stride - effective) / stride)
            }
        }
        func pad(_ size: Int, _ filter: Int, _ stride: Int, _ dilation: Int, _ out: Int) -> Int {
            let effective = (filter - 1) * dilation + 1
            return max(0, (out - 1) * stride + effective - size) / 2
        }
        outputHeight = outSize(inputHeight, filterHeight, strideHeight, dilationHeight)
        outputWidth = outSize(inputWidth, filterWidth, strideWidth, dilationWidth)
        padTop = pad(inputHeight, filterHeight, strideHeight, dilationHeight, outputHeight)
        padLeft = pad(inputWidth, filterWidth, strideWidth, dilationWidth, outputWidth)
    }

    var outputShape: [Int] { [batches, outputHeight, outputWidth, outputChannels] }

    /// The taps of output pixel (`outputY`, `outputX`) of picture `batch` that fall inside the input,
    /// in filter order (rows, then columns): the input pixel each reads (an index over batches, rows
    /// and columns) and the tap's index (ky * filterWidth + kx). Taps in the padding are left out.
    func taps(batch: Int, outputY: Int, outputX: Int, into taps: inout [(pixel: Int, tap: Int)]) {
        taps.removeAll(keepingCapacity: true)
        let y0 = outputY * strideHeight - padTop, x0 = outputX * strideWidth - padLeft
        for ky in 0..<filterHeight {
            let y = y0 + ky * dilationHeight
            if y < 0 || y >= inputHeight { continue }
            for kx in 0..<filterWidth {
                let x = x0 + kx * dilationWidth
                if x < 0 || x >= inputWidth { continue }
                taps.append(((batch * inputHeight + y) * inputWidth + x, ky * filterWidth + kx))
            }
        }
    }
}

extension WindowGeometry {
    /// Window positions times window cells a pooling may visit: far above any real model (YOLO's
    /// 5x5 pooling over 20x20 is 10,000; a 3x3 pooling over 320x320, 921,600), far below what
    /// would take gigabytes of XNNPACK's indirection buffer or minutes of the reference kernel.
    static let maxPoolingWork = 1 << 24

    /// The geometry of an AVERAGE_POOL_2D or MAX_POOL_2D, checked before any memory is spent:
    /// the window and strides are options read from the file, not sizes of data it holds.
    init(pooling ctx: PrepareContext, options: Pool2DOptions) throws {
        let input = ctx.input(0)
        try ctx.requireRank(input, 4)
        let shape = ctx.shape(input)
        let (fh, fw, sh, sw) = (options.filterHeight, options.filterWidth, options.strideHeight, options.strideWidth)
        guard fh >= 1, fw >= 1, sh >= 1, sw >= 1 else {
            throw ctx.fail("pooling window \(fw)x\(fh) with strides \(sw)x\(sh): each must be at least 1")
        }
        guard fh <= 1 << 20, fw <= 1 << 20 else { throw ctx.fail("pooling window \(fw)x\(fh) is beyond any input") }
        self.init(input: shape, filterHeight: fh, filterWidth: fw, outputChannels: shape[3], padding: options.padding,
                  strideHeight: sh, strideWidth: sw)
        let work = outputHeight.multipliedReportingOverflow(by: outputWidth).partialValue.multipliedReportingOverflow(by: fh * fw)
        guard !work.overflow, work.partialValue <= Self.maxPoolingWork else {
            throw ctx.fail("pooling window \(fw)x\(fh) over a \(outputWidth)x\(outputHeight) output (input \(inputWidth)x\(inputHeight)) visits more than \(Self.maxPoolingWork) cells")
        }
    }

    /// The geometry of a CONV_2D or DEPTHWISE_CONV_2D: checks ranks and channel counts and sets the
    /// output's shape. Filters are [outC, kH, kW, inC] (depthwise: [1, kH, kW, inC * multiplier]).
    init(convolution ctx: PrepareContext, options: Conv2DOptions, depthwise: Bool) throws {
        let input = ctx.input(0), filter = ctx.input(1)
        try ctx.requireRank(input, 4)
        try ctx.requireRank(filter, 4)
        let inShape = ctx.shape(input), fShape = ctx.shape(filter)
        let channels = depthwise ? fShape[3] : fShape[0]
        guard inShape[3] > 0, depthwise ? channels % inShape[3] == 0 : fShape[3] == inShape[3] else {
            throw ctx.fail("filter shape \(fShape) does not match input shape \(inShape)")
        }
        self.init(
            input: inShape, filterHeight: fShape[1], filterWidth: fShape[2], outputChannels: channels,
            padding: options.padding, strideHeight: options.strideHeight, strideWidth: options.strideWidth,
            dilationHeight: options.dilationHeight, dilationWidth: options.dilationWidth)
        try ctx.setShape(ctx.output(0), outputShape)
    }

    /// Output channels per input channel of a depthwise convolution.
    var depthMultiplier: Int { outputChannels / inputChannels }
}

/// Per-output-channel requantization: multipliers and the output clamp.
struct Requantization {
    var multipliers: [FixedPoint.Multiplier]
    var outputZeroPoint: Int32
    var min: Int32
    var max: Int32
}

/// Reads the quantization of a convolution-like operator (conv, depthwise, fully connected) and
/// computes its multipliers as TFLite's `PopulateConvolutionQuantizationParams` does.
func convolutionRequantization(_ ctx: PrepareContext, input: Int, filter: Int, output: Int, channels: Int,
                               activation: FusedActivation) throws -> (Requantization, filterZeroPoints: [Int32]) {
    let (inputScale, _) = try ctx.quantized(input)
    let (outputScale, outputZero) = try ctx.quantized(output)
    guard let filterQ = ctx.quantization(filter), !filterQ.scales.isEmpty else {
        throw ctx.fail("filter \"\(ctx.info(filter).name)\" is not quantized")
    }
    let perChannel = filterQ.scales.count > 1
    guard !perChannel || filterQ.scales.count == channels else {
        throw ctx.fail("filter has \(filterQ.scales.count) scales for \(channels) output channels")
    }
    guard filterQ.zeroPoints.count == filterQ.scales.count else {
        throw ctx.fail("filter has \(filterQ.scales.count) scales but \(filterQ.zeroPoints.count) zero points")
    }
    var multipliers: [FixedPoint.Multiplier] = []
    for channel in 0..<channels {
        let filterScale = filterQ.scales[perChannel ? channel : 0]
        let real: Double
        if ctx.type(input) == .uint8 {
            // GetQuantizedConvolutionMultipler: the scale product is taken in float.
            real = Double(inputScale * filterScale) / Double(outputScale)
        } else {
            real = Double(inputScale) * Double(filterScale) / Double(outputScale)
        }
        multipliers.append(FixedPoint.Multiplier(real))
    }
    let zeroPoints = (0..<channels).map { Int32(filterQ.zeroPoints[perChannel ? $0 : 0]) }
    let range = FixedPoint.activationRange(activation, scale: outputScale, zeroPoint: outputZero, type: ctx.type(output))
    return (Requantization(multipliers: multipliers, outputZeroPoint: outputZero, min: range.min, max: range.max), zeroPoints)
}

/// CONV_2D and DEPTHWISE_CONV_2D on quantized tensors (uint8 asymmetric per-tensor, int8 per-channel).
final class QuantizedConvolution: Kernel {
    /// Constants were copied or packed at load.
    var readsConstantInputs: Bool { false }

    let geometry: WindowGeometry
    let depthwise: Bool
    let depthMultiplier: Int
    let input, output: Int
    let inputOffset: Int32
    /// Weights minus their zero point, laid out [outC][kH][kW][inC] (depthwise: [kH][kW][outC]).
    let filter: [Int32]
    let bias: [Int32]
    let requant: Requantization
    let isSigned: Bool

    init(_ ctx: PrepareContext, options: Conv2DOptions, depthwise: Bool) throws {
        isSigned = ctx.type(ctx.input(0)) == .int8
        input = ctx.input(0)
        output = ctx.output(0)
        let filterTensor = ctx.input(1)
        self.depthwise = depthwise
        geometry = try WindowGeometry(convolution: ctx, options: options, depthwise: depthwise)
        depthMultiplier = depthwise ? geometry.depthMultiplier : 1
        let channels = geometry.outputChannels
        let fShape = ctx.shape(filterTensor)
        inputOffset = -(try ctx.quantized(input)).zeroPoint
        let (requant, filterZeros) = try convolutionRequantization(
            ctx, input: input, filter: filterTensor, output: output, channels: channels, activation: options.activation)
        self.requant = requant
        bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : Array(repeating: 0, count: channels)
        guard bias.count == channels else { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }
        guard !ctx.isCheckingOnly else {
            try ctx.requireConstant(filterTensor)
            filter = []
            return
        }
        let raw: [Int32] = isSigned
            ? try ctx.constant(filterTensor, as: Int8.self).map(Int32.init)
            : try ctx.constant(filterTensor, as: UInt8.self).map(Int32.init)
        // Channels are the last axis of a depthwise filter and the first of a regular one. Plain
        // loops over whole rows, not a closure per weight: there are millions of them.
        let perChannelStride = depthwise ? 1 : fShape[1] * fShape[2] * fShape[3]
        guard channels > 0, depthwise ? raw.count % channels == 0 : raw.count == channels * perChannelStride else {
            throw ctx.fail("filter has \(raw.count) weights for \(channels) channels")
        }
        var offsetFilter = raw
        offsetFilter.withUnsafeMutableBufferPointer { weights in
            if depthwise {
                for row in stride(from: 0, to: weights.count, by: channels) {
                    for channel in 0..<channels { weights[row + channel] &-= filterZeros[channel] }
                }
            } else {
                for channel in 0..<channels {
                    let zero = filterZeros[channel], start = channel * perChannelStride
                    for index in start..<(start + perChannelStride) { weights[index] &-= zero }
                }
            }
        }
        filter = offsetFilter
    }

    func run(_ memory: TensorMemory) {
        if isSigned { run(memory.typed(input, Int8.self), memory.typed(output, Int8.self)) }
        else { run(memory.typed(input, UInt8.self), memory.typed(output, UInt8.self)) }
    }

    private func run<T: FixedWidthInteger>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>) {
        filter.withUnsafeBufferPointer { filter in
            bias.withUnsafeBufferPointer { bias in
                requant.multipliers.withUnsafeBufferPointer { multipliers in
                    let finish = Finish(bias: bias.baseAddress!, multipliers: multipliers.baseAddress!, requant: requant)
                    if depthwise { runDepthwise(src, dst, filter.baseAddress!, finish) } else { runConv(src, dst, filter.baseAddress!, finish) }
                }
            }
        }
    }

    /// Bias, requantization and clamp of one accumulator.
    private struct Finish {
        let bias: UnsafePointer<Int32>
        let multipliers: UnsafePointer<FixedPoint.Multiplier>
        let zeroPoint, low, high: Int32

        init(bias: UnsafePointer<Int32>, multipliers: UnsafePointer<FixedPoint.Multiplier>, requant: Requantization) {
            self.bias = bias
            self.multipliers = multipliers
            (zeroPoint, low, high) = (requant.outputZeroPoint, requant.min, requant.max)
        }

        @inline(__always)
        func callAsFunction<T: FixedWidthInteger>(_ acc: Int32, _ channel: Int) -> T {
            let value = FixedPoint.multiply(acc &+ bias[channel], multipliers[channel]) &+ zeroPoint
            return T(truncatingIfNeeded: min(max(value, low), high))
        }
    }

    private func runConv<T: FixedWidthInteger>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>, _ filter: UnsafePointer<Int32>, _ finish: Finish) {
        let g = geometry
        let inC = g.inputChannels
        let patch = g.filterHeight * g.filterWidth * inC
        let inputOffset = self.inputOffset
        var out = 0
        var taps: [(pixel: Int, tap: Int)] = []
        for b in 0..<g.batches {
            for oy in 0..<g.outputHeight {
                for ox in 0..<g.outputWidth {
                    g.taps(batch: b, outputY: oy, outputX: ox, into: &taps)
                    for oc in 0..<g.outputChannels {
                        var acc: Int32 = 0
                        for (pixel, tap) in taps {
                            let values = src + pixel * inC, weights = filter + oc * patch + tap * inC
                            for c in 0..<inC {
                                acc &+= weights[c] &* (Int32(values[c]) &+ inputOffset)
                            }
                        }
                        dst[out] = finish(acc, oc)
                        out += 1
                    }
                }
            }
        }
    }

    private func runDepthwise<T: FixedWidthInteger>(_ src: UnsafeMutablePointer<T>, _ dst: UnsafeMutablePointer<T>, _ filter: UnsafePointer<Int32>, _ finish: Finish) {
        let g = geometry
        let inC = g.inputChannels, outC = g.outputChannels
        let inputOffset = self.inputOffset
        var out = 0
        var taps: [(pixel: Int, tap: Int)] = []
        for b in 0..<g.batches {
            for oy in 0..<g.outputHeight {
                for ox in 0..<g.outputWidth {
                    g.taps(batch: b, outputY: oy, outputX: ox, into: &taps)
                    for oc in 0..<outC {
                        let ic = oc / depthMultiplier
                        var acc: Int32 = 0
                        for (pixel, tap) in taps {
                            acc &+= filter[tap * outC + oc] &* (Int32(src[pixel * inC + ic]) &+ inputOffset)
                        }
                        dst[out] = finish(acc, oc)
                        out += 1
                    }
                }
            }
        }
    }
}

/// CONV_2D and DEPTHWISE_CONV_2D on float32 tensors. A hybrid one (int8 weights with zero points 0)
/// runs as LiteRT's reference kernels do: each picture of the input quantized
/// (``DynamicQuantization``), exact int32 sums, scaled back by both scales with the bias added.
final class FloatConvolution: Kernel {
    /// Constants were copied or packed at load.
    var readsConstantInputs: Bool { false }

    let geometry: WindowGeometry
    let depthwise: Bool
    let depthMultiplier: Int
    let input, output: Int
    let filter: [Float]
    let bias: [Float]
    let clamp: (min: Float, max: Float)
    /// Hybrid weights as stored, with their scale per output channel.
    let hybrid: (weights: [Int32], scales: [Float])?

    init(_ ctx: PrepareContext, options: Conv2DOptions, depthwise: Bool) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        let filterTensor = ctx.input(1)
        self.depthwise = depthwise
        geometry = try WindowGeometry(convolution: ctx, options: options, depthwise: depthwise)
        depthMultiplier = depthwise ? geometry.depthMultiplier : 1
        let channels = geometry.outputChannels
        clamp = FixedPoint.activationRange(options.activation)
        bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Float.self) : Array(repeating: 0, count: channels)
        guard bias.count == channels else { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }
        if ctx.quantizesHybridInput(input: input, weights: filterTensor, channels: channels), let q = ctx.quantization(filterTensor) {
            hybrid = (ctx.isCheckingOnly ? [] : try ctx.constant(filterTensor, as: Int8.self).map(Int32.init),
                      (0..<channels).map { q.scales[q.scales.count == 1 ? 0 : $0] })
            filter = []
        } else {
            hybrid = nil
            filter = try ctx.floatWeights(filterTensor)
        }
    }

    func run(_ memory: TensorMemory) {
        if let hybrid { return runHybrid(memory, weights: hybrid.weights, scales: hybrid.scales) }
        let src = memory.typed(input, Float.self)
        let dst = memory.typed(output, Float.self)
        let g = geometry
        let inC = g.inputChannels, outC = g.outputChannels
        let patch = g.filterHeight * g.filterWidth * inC
        filter.withUnsafeBufferPointer { filter in
            var out = 0
            var taps: [(pixel: Int, tap: Int)] = []
            for b in 0..<g.batches {
                for oy in 0..<g.outputHeight {
                    for ox in 0..<g.outputWidth {
                        g.taps(batch: b, outputY: oy, outputX: ox, into: &taps)
                        for oc in 0..<outC {
                            var acc: Float = 0
                            for (pixel, tap) in taps {
                                if depthwise {
                                    acc += src[pixel * inC + oc / depthMultiplier] * filter[tap * outC + oc]
                                } else {
                                    let values = pixel * inC, weights = oc * patch + tap * inC
                                    for c in 0..<inC { acc += src[values + c] * filter[weights + c] }
                                }
                            }
                            dst[out] = min(max(acc + bias[oc], clamp.min), clamp.max)
                            out += 1
                        }
                    }
                }
            }
        }
    }
}

extension FloatConvolution {
    private func runHybrid(_ memory: TensorMemory, weights: [Int32], scales: [Float]) {
        let src = memory.typed(input, Float.self), dst = memory.typed(output, Float.self)
        let g = geometry
        let inC = g.inputChannels, outC = g.outputChannels
        let patch = g.filterHeight * g.filterWidth * inC, picture = g.inputHeight * g.inputWidth * inC
        var quantized = [Int32](repeating: 0, count: picture)
        var out = 0
        var taps: [(pixel: Int, tap: Int)] = []
        for b in 0..<g.batches {
            let values = UnsafeBufferPointer(start: src + b * picture, count: picture)
            let q = DynamicQuantization(min: values.min() ?? 0, max: values.max() ?? 0)
            // Values less the zero point: the padding (0.0, exact) contributes nothing.
            for i in 0..<picture { quantized[i] = q.quantize(values[i]) &- q.zeroPoint }
            for oy in 0..<g.outputHeight {
                for ox in 0..<g.outputWidth {
                    // Taps of picture 0: `quantized` holds this picture alone.
                    g.taps(batch: 0, outputY: oy, outputX: ox, into: &taps)
                    for oc in 0..<outC {
                        var acc: Int32 = 0
                        for (pixel, tap) in taps {
                            if depthwise {
                                acc &+= quantized[pixel * inC + oc / depthMultiplier] &* weights[tap * outC + oc]
                            } else {
                                let values = pixel * inC, w = oc * patch + tap * inC
                                for c in 0..<inC { acc &+= quantized[values + c] &* weights[w + c] }
                            }
                        }
                        let value = bias[oc].addingProduct(Float(acc), q.scale * scales[oc])
                        dst[out] = min(max(value, clamp.min), clamp.max)
                        out += 1
                    }
                }
            }
        }
    }
}

/// FULLY_CONNECTED: `output[b][u] = sum_i input[b][i] * filter[u][i] + bias[u]`.
///
/// Constant weights and bias are copied at load (8-bit weights with their zero point taken off);
/// weights or a bias that are activations (YOLO11's attention multiplies two activations this way)
/// are read at run time, 8-bit ones with their per-tensor zero point, as LiteRT's kernels do.
final class FullyConnected: Kernel {
    /// Constants were copied at load; weights or a bias that are activations are read at run time.
    var readsConstantInputs: Bool { false }

    let input, output: Int
    let batches, inputSize, units: Int
    /// Constant weights (8-bit ones less their zero point), or nil when they are read at run time.
    let filter: [Int32]?
    let floatFilter: [Float]?
    /// The weights tensor, read at run time when not constant, with its (per-tensor) zero point.
    let filterTensor: Int
    let filterZeroPoint: Int32
    /// Constant bias, or nil when read at run time (or absent: then zero).
    let bias: [Int32]?
    let floatBias: [Float]?
    let biasTensor: Int?
    let inputOffset: Int32
    let requant: Requantization?
    let clamp: (min: Float, max: Float)
    /// 8-bit weights that are activations, laid out [inputs][units] at each run.
    private var weightScratch: [Int16] = []

    let type: TensorType

    init(_ ctx: PrepareContext, activation: FusedActivation, keepNumDims: Bool) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        type = ctx.type(input)
        filterTensor = ctx.input(1)
        try ctx.requireRank(filterTensor, 2)
        guard ctx.type(filterTensor) == type else {
            throw ctx.fail("weights are \(ctx.type(filterTensor)) but the input is \(type)")
        }
        let fShape = ctx.shape(filterTensor)
        units = fShape[0]
        inputSize = fShape[1]
        let total = ctx.shape(input).reduce(1, *)
        guard inputSize > 0, total % inputSize == 0 else {
            throw ctx.fail("input of shape \(ctx.shape(input)) cannot feed \(inputSize) inputs per unit")
        }
        batches = total / inputSize
        let inShape = ctx.shape(input)
        try ctx.setShape(output, keepNumDims ? Array(inShape.dropLast()) + [units] : [batches, units])
        clamp = FixedPoint.activationRange(activation)
        let constantFilter = ctx.isConstant(filterTensor)
        let biasInput = ctx.hasInput(2) ? ctx.input(2) : nil
        if let biasInput {
            guard ctx.shape(biasInput).reduce(1, *) == units else { throw ctx.fail("bias size does not match \(units) units") }
            guard ctx.type(biasInput) == (type == .float32 ? .float32 : .int32) else {
                throw ctx.fail("bias is \(ctx.type(biasInput)) for a \(type) input")
            }
        }
        biasTensor = biasInput.flatMap { ctx.isConstant($0) ? nil : $0 }
        if type == .float32 {
            floatFilter = constantFilter ? (ctx.isCheckingOnly ? [] : try ctx.constant(filterTensor, as: Float.self)) : nil
            floatBias = biasTensor != nil ? nil : try biasInput.map { try ctx.constant($0, as: Float.self) } ?? Array(repeating: 0, count: units)
            filter = nil
            bias = nil
            filterZeroPoint = 0
            inputOffset = 0
            requant = nil
        } else {
            let (requant, zeros) = try convolutionRequantization(
                ctx, input: input, filter: filterTensor, output: output, channels: units, activation: activation)
            self.requant = requant
            inputOffset = -(try ctx.quantized(input)).zeroPoint
            filterZeroPoint = zeros.first ?? 0
            if constantFilter {
                let values: [Int32] = ctx.isCheckingOnly ? [] : ctx.type(filterTensor) == .uint8
                    ? try ctx.constant(filterTensor, as: UInt8.self).map(Int32.init)
                    : try ctx.constant(filterTensor, as: Int8.self).map(Int32.init)
                let perUnit = fShape[1]
                filter = values.enumerated().map { $1 - zeros[$0 / perUnit] }
            } else {
                guard Set(zeros).count <= 1 else { throw ctx.fail("weights that are activations need one zero point, not one per unit") }
                guard inputSize < 1 << 15 else { throw ctx.fail("\(inputSize) inputs per unit are beyond the 32,767 an exact int32 sum allows") }
                guard units * inputSize <= 1 << 27 else { throw ctx.fail("weights of \(units * inputSize) elements are beyond the 2^27 Spotter lays out") }
                filter = nil
                if !ctx.isCheckingOnly { weightScratch = [Int16](repeating: 0, count: units * inputSize) }
            }
            bias = biasTensor != nil ? nil : try biasInput.map { try ctx.constant($0, as: Int32.self) } ?? Array(repeating: 0, count: units)
            floatFilter = nil
            floatBias = nil
        }
    }

    func run(_ memory: TensorMemory) {
        if let requant {
            if type == .uint8 { runQuantized(memory, UInt8.self, requant) } else { runQuantized(memory, Int8.self, requant) }
        } else {
            let src = memory.typed(input, Float.self)
            let dst = memory.typed(output, Float.self)
            floatFilter.withOptionalPointer(or: memory.typed(filterTensor, Float.self)) { weights in
                guard let weights else { return }
                floatBias.withOptionalPointer(or: biasTensor.map { memory.typed($0, Float.self) }) { bias in
                    for b in 0..<batches {
                        let row = src + b * inputSize
                        for u in 0..<units {
                            let w = weights + u * inputSize
                            var acc: Float = 0
                            for i in 0..<inputSize { acc += row[i] * w[i] }
                            dst[b * units + u] = min(max(acc + (bias?[u] ?? 0), clamp.min), clamp.max)
                        }
                    }
                }
            }
        }
    }

    private func runQuantized<T: FixedWidthInteger>(_ memory: TensorMemory, _: T.Type, _ requant: Requantization) {
        let src = memory.typed(input, T.self), dst = memory.typed(output, T.self)
        bias.withOptionalPointer(or: biasTensor.map { memory.typed($0, Int32.self) }) { bias in
            if let filter {
                filter.withUnsafeBufferPointer { filter in
                    for b in 0..<batches {
                        let row = src + b * inputSize
                        for u in 0..<units {
                            guard let base = filter.baseAddress else { return }
                            let w = base + u * inputSize
                            var acc: Int32 = 0
                            for i in 0..<inputSize { acc &+= w[i] &* (Int32(row[i]) &+ inputOffset) }
                            store(acc &+ (bias?[u] ?? 0), at: b * units + u, unit: u, dst, requant)
                        }
                    }
                }
            } else {
                // Weights that are activations (YOLO11's attention): [units][inputs] laid out as
                // [inputs][units] less their zero point, so each output row is a sum of scaled rows
                // (exact int32 sums: LiteRT's). uint8 rows are read as x - 128 against a zero point
                // 128 lower, the same differences in int8.
                let weights = memory.typed(filterTensor, T.self)
                let signed = T.self == Int8.self, inputZero = -inputOffset
                weightScratch.withUnsafeMutableBufferPointer { columns in
                    widenTransposed(weights, rows: units, columns: inputSize, zero: filterZeroPoint, into: columns.baseAddress!)
                    withUnsafeTemporaryAllocation(of: Int8.self, capacity: signed ? 0 : inputSize) { shifted in
                        withUnsafeTemporaryAllocation(of: Int32.self, capacity: units) { sums in
                            for b in 0..<batches {
                                let row: UnsafePointer<Int8>
                                if signed {
                                    row = UnsafeRawPointer(src + b * inputSize).assumingMemoryBound(to: Int8.self)
                                } else {
                                    for i in 0..<inputSize { shifted[i] = Int8(truncatingIfNeeded: Int32(src[b * inputSize + i]) - 128) }
                                    row = UnsafePointer(shifted.baseAddress!)
                                }
                                spotter_matmul_rows_s8(row, inputSize, 1, signed ? inputZero : inputZero - 128, columns.baseAddress!,
                                                       sums.baseAddress!, 1, units, inputSize)
                                for u in 0..<units { store(sums[u] &+ (bias?[u] ?? 0), at: b * units + u, unit: u, dst, requant) }
                            }
                        }
                    }
                }
            }
        }
    }

    @inline(__always)
    private func store<T: FixedWidthInteger>(_ acc: Int32, at index: Int, unit: Int, _ dst: UnsafeMutablePointer<T>, _ requant: Requantization) {
        let multiplier = requant.multipliers[requant.multipliers.count == 1 ? 0 : unit]
        let value = FixedPoint.multiply(acc, multiplier) &+ requant.outputZeroPoint
        dst[index] = T(truncatingIfNeeded: min(max(value, requant.min), requant.max))
    }
}

extension Optional {
    /// Calls `body` with a pointer to this array's elements, or else with `fallback`.
    @inline(__always)
    func withOptionalPointer<E, R>(or fallback: @autoclosure () -> UnsafeMutablePointer<E>?, _ body: (UnsafePointer<E>?) -> R) -> R
    where Wrapped == [E] {
        if let array = self { return array.withUnsafeBufferPointer { body($0.baseAddress) } }
        return body(fallback().map { UnsafePointer($0) })
    }
}
