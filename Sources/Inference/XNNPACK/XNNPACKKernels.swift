internal import CXNNPACK
import TFLiteFormat

/// Chooses an XNNPACK operator for a TFLite operator, or returns nil to leave it to the reference kernels.
///
/// Covered: CONV_2D and DEPTHWISE_CONV_2D (uint8, int8 per-channel, float32, hybrid float32 with
/// 8-bit weights dequantized at load), ABS (float32), FULLY_CONNECTED (uint8,
/// int8, float32), LOGISTIC (uint8, int8, float32), ADD, SUB and MUL (uint8, int8, float32), MAX_POOL_2D
/// (uint8, int8, float32), AVERAGE_POOL_2D (uint8, float32), SOFTMAX (uint8, float32), QUANTIZE and
/// DEQUANTIZE (float32 to and from uint8/int8), HARD_SWISH (float32), RESIZE_BILINEAR (uint8,
/// int8, float32), RELU and RELU6 (float32; uint8/int8 when input and output share quantization).
/// CONV_2D runs on Spotter's own kernels where the CPU has their instructions: 8-bit on AVX-512 VNNI
/// (``VNNIConvolution``), float32 and 8-bit on AVX2 (``AVX2Convolution``, ``AVX2QuantizedConvolution``); float32
/// DEPTHWISE_CONV_2D on AVX-512 (``AVX512Depthwise``). PAD runs the
/// reference kernel's rows across the pool (Debian's XNNPACK took 7 ms to pad YOLOv8's 640x640 RGB
/// input, the reference 0.8).
enum XNNPACKKernels {
    static func make(_ ctx: PrepareContext, pool: ThreadPool) throws -> Kernel? {
        let op = ctx.op!
        guard op.inputs.first.map({ $0 >= 0 }) ?? false, op.outputs.count == 1 else { return nil }
        let type = ctx.type(op.inputs[0])
        guard ctx.type(op.outputs[0]) == type || [.quantize, .dequantize].contains(op.code.builtin) else { return nil }
        if [.logistic, .mul].contains(op.code.builtin), let kernel = try SiLU.make(ctx, pool: pool) { return kernel }
        if type == .float32, [.abs, .relu, .sub, .mul, .add].contains(op.code.builtin), let kernel = try PReLU.make(ctx, pool: pool) {
            return kernel
        }
        if ctx.absorbed.contains(op.index) {
            try ctx.setShape(op.outputs[0], ctx.shape(op.inputs[0]))
            ctx.alias(output: op.outputs[0], to: op.inputs[0])
            // A RELU or RELU6 whose clamp the ADD, SUB or MUL before it applied: its output shares
            // that operator's output storage.
            return DoneElsewhere("folded")
        }
        switch (op.code.builtin, op.options) {
        case (.conv2D, .conv2D(let options)):
            if let kernel = try VNNIConvolution.make(ctx, pool: pool, options: options) { return kernel }
            guard ctx.foldedPads[op.index] == nil else { throw ctx.fail("the PAD folded into this convolution needs the VNNI kernel") }
            if let kernel = try AVX2Convolution.make(ctx, pool: pool, options: options) { return kernel }
            if let kernel = try AVX2QuantizedConvolution.make(ctx, pool: pool, options: options) { return kernel }
            return try convolution(ctx, pool, options, depthwise: false)
        case (.depthwiseConv2D, .depthwiseConv2D(let options)):
            if let kernel = try GlobalDepthwise.make(ctx, options: options) { return kernel }
            if let kernel = try AVX512Depthwise.make(ctx, pool: pool, options: options) { return kernel }
            return try convolution(ctx, pool, options, depthwise: true)
        case (.fullyConnected, .fullyConnected(let activation, let keepNumDims, 0)):
            return try fullyConnected(ctx, pool, activation, keepNumDims)
        case (.logistic, _):
            if let kernel = try ByteTable.make(ctx, pool: pool) { return kernel }
            return try sigmoid(ctx, pool)
        case (.add, .add(let activation)):
            return try binary(ctx, pool, activation, .add)
        case (.mul, .mul(let activation)):
            return try binary(ctx, pool, activation, .multiply)
        case (.sub, .sub(let activation)):
            return try binary(ctx, pool, activation, .subtract)
        case (.maxPool2D, .pool2D(let options)), (.averagePool2D, .pool2D(let options)):
            return try pooling(ctx, pool, options, max: op.code.builtin == .maxPool2D)
        case (.softmax, .softmax(let beta)):
            return try softmax(ctx, pool, beta: beta)
        case (.quantize, _), (.dequantize, _):
            return try convert(ctx, pool)
        case (.concatenation, .concatenation(let axis, let activation)) where [.int8, .uint8].contains(type):
            if let absorbed = try VNNIConvolution.claim(concatenation: ctx, axis: axis, activation: activation) { return absorbed }
            let concatenation = try Concatenation(ctx, axis: axis, activation: activation)
            return PooledRows(concatenation, rowBytes: concatenation.rowBytes, pool: pool)
        case (.transpose, _) where op.inputs.count == 2:
            let transpose = try Transpose(ctx)
            return PooledRows(transpose, rowBytes: transpose.rowBytes, pool: pool)
        case (.stridedSlice, .stridedSlice(let options)):
            let slice = try StridedSlice(ctx, options: options)
            return PooledRows(slice, rowBytes: slice.rowBytes, pool: pool)
        case (.pad, _) where op.inputs.count == 2:
            if let absorbed = try PaddedAdd.claim(ctx) { return absorbed }
            if let absorbed = try VNNIConvolution.claim(ctx) { return absorbed }
            let pad = try Pad(ctx)
            return PooledRows(pad, rowBytes: pad.rowBytes, pool: pool)
        case (.batchMatMul, .batchMatMul(let adjointX, let adjointY)) where op.inputs.count == 2:
            let product = try BatchMatMul(ctx, adjointX: adjointX, adjointY: adjointY)
            return PooledRows(product, rowBytes: product.n * (product.type == .int8 ? 1 : 4), pool: pool)
        case (.batchMatMul, .none) where op.inputs.count == 2:
            let product = try BatchMatMul(ctx, adjointX: false, adjointY: false)
            return PooledRows(product, rowBytes: product.n * (product.type == .int8 ? 1 : 4), pool: pool)
        case (.slice, _):
            let slice = try StridedSlice(slice: ctx)
            return PooledRows(slice, rowBytes: slice.rowBytes, pool: pool)
        case (.resizeBilinear, .resizeBilinear(let options)):
            return try resize(ctx, pool, options)
        case (.relu, _), (.relu6, _):
            return try clamp(ctx, pool, upper: op.code.builtin == .relu6 ? 6 : nil)
        case (.abs, _) where type == .float32 && ctx.type(ctx.output(0)) == .float32:
            let (input, output, count) = try elementwise(ctx)
            return try XNNPACKKernel(ctx, pool: pool, name: "abs_nc_f32", create: {
                xnn_create_abs_nc_f32(1, 1, 1, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_abs_nc_f32(op, count, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case (.hardSwish, _) where type == .float32:
            let (input, output, count) = try elementwise(ctx)
            return try XNNPACKKernel(ctx, pool: pool, name: "hardswish_nc_f32", create: {
                xnn_create_hardswish_nc_f32(1, 1, 1, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_hardswish_nc_f32(op, count, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        default:
            return nil
        }
    }

    /// Quantization of a per-tensor 8-bit tensor as XNNPACK takes it.
    private struct Affine {
        var scale: Float
        var zeroPoint: Int32
    }

    private static func affine(_ ctx: PrepareContext, _ tensor: Int) throws -> Affine {
        let q = try ctx.quantized(tensor)
        return Affine(scale: q.scale, zeroPoint: q.zeroPoint)
    }

    /// The clamp of a fused activation, in output units.
    private static func clamp(_ ctx: PrepareContext, _ output: Int, _ activation: FusedActivation) throws -> (min: Int32, max: Int32) {
        let q = try affine(ctx, output)
        return FixedPoint.activationRange(activation, scale: q.scale, zeroPoint: q.zeroPoint, type: ctx.type(output))
    }

    private static func elementwise(_ ctx: PrepareContext) throws -> (Int, Int, Int) {
        let input = ctx.input(0), output = ctx.output(0)
        try ctx.setShape(output, ctx.shape(input))
        return (input, output, ctx.shape(input).reduce(1, *))
    }

    private static func convolution(_ ctx: PrepareContext, _ pool: ThreadPool, _ options: Conv2DOptions, depthwise: Bool) throws -> Kernel? {
        let input = ctx.input(0), filter = ctx.input(1), output = ctx.output(0)
        let type = ctx.type(input)
        guard ctx.type(filter) == type || ctx.isHybrid(input: input, weights: filter), [.uint8, .int8, .float32].contains(type),
              ctx.isConstant(filter), ctx.shape(input).count == 4, ctx.shape(filter).count == 4,
              !ctx.hasInput(2) || ctx.isConstant(ctx.input(2)) else { return nil }
        let g = try WindowGeometry(convolution: ctx, options: options, depthwise: depthwise)
        let inShape = ctx.shape(input), channels = g.outputChannels
        // TensorFlow's SAME padding puts the odd pixel at the bottom and right.
        let totalH = max(0, (g.outputHeight - 1) * g.strideHeight + (g.filterHeight - 1) * g.dilationHeight + 1 - g.inputHeight)
        let totalW = max(0, (g.outputWidth - 1) * g.strideWidth + (g.filterWidth - 1) * g.dilationWidth + 1 - g.inputWidth)
        let (top, left) = (UInt32(g.padTop), UInt32(g.padLeft))
        let (bottom, right) = (UInt32(totalH) - top, UInt32(totalW) - left)
        let groups = UInt32(depthwise ? inShape[3] : 1)
        let groupInput = depthwise ? 1 : inShape[3]
        let groupOutput = depthwise ? channels / inShape[3] : channels
        let flags = UInt32(depthwise ? XNN_FLAG_DEPTHWISE_CONVOLUTION : 0)
        let (b, h, w) = (g.batches, g.inputHeight, g.inputWidth)
        let common = (top, right, bottom, left, UInt32(g.filterHeight), UInt32(g.filterWidth),
                      UInt32(g.strideHeight), UInt32(g.strideWidth), UInt32(g.dilationHeight), UInt32(g.dilationWidth))

        switch type {
        case .float32:
            // Hybrid weights (int8/uint8) are dequantized once here.
            let weights = try ctx.floatWeights(filter)
            let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Float.self) : [Float](repeating: 0, count: channels)
            let range = FixedPoint.activationRange(options.activation)
            return try XNNPACKKernel(ctx, pool: pool, name: "convolution2d_nhwc_f32", create: { out in
                xnn_create_convolution2d_nhwc_f32(
                    common.0, common.1, common.2, common.3, common.4, common.5, common.6, common.7, common.8, common.9,
                    groups, groupInput, groupOutput, inShape[3], channels, weights, bias,
                    range.min, range.max, flags, out)
            }, setup: { op, m, p in
                xnn_setup_convolution2d_nhwc_f32(op, b, h, w, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case .uint8:
            guard let fq = ctx.quantization(filter), fq.scales.count == 1 else { return nil }
            let i = try affine(ctx, input), o = try affine(ctx, output)
            guard requantizes(i.scale, [fq.scale], o.scale) else { return nil }
            let range = try clamp(ctx, output, options.activation)
            let weights = try ctx.constant(filter, as: UInt8.self)
            let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: channels)
            return try XNNPACKKernel(ctx, pool: pool, name: "convolution2d_nhwc_qu8", create: { out in
                xnn_create_convolution2d_nhwc_qu8(
                    common.0, common.1, common.2, common.3, common.4, common.5, common.6, common.7, common.8, common.9,
                    groups, groupInput, groupOutput, inShape[3], channels,
                    UInt8(i.zeroPoint), i.scale, UInt8(fq.zeroPoint), fq.scale, weights, bias,
                    UInt8(o.zeroPoint), o.scale, UInt8(range.min), UInt8(range.max), flags, out)
            }, setup: { op, m, p in
                xnn_setup_convolution2d_nhwc_qu8(op, b, h, w, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        default:
            guard let fq = ctx.quantization(filter), fq.zeroPoints.allSatisfy({ $0 == 0 }) else { return nil }
            let scales = fq.scales.count == 1 ? [Float](repeating: fq.scale, count: channels) : fq.scales
            guard scales.count == channels else { return nil }
            let i = try affine(ctx, input), o = try affine(ctx, output)
            guard requantizes(i.scale, scales, o.scale) else { return nil }
            let range = try clamp(ctx, output, options.activation)
            let weights = try ctx.constant(filter, as: Int8.self)
            let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: channels)
            return try XNNPACKKernel(ctx, pool: pool, name: "convolution2d_nhwc_qc8", create: { out in
                xnn_create_convolution2d_nhwc_qc8(
                    common.0, common.1, common.2, common.3, common.4, common.5, common.6, common.7, common.8, common.9,
                    groups, groupInput, groupOutput, inShape[3], channels,
                    Int8(i.zeroPoint), i.scale, scales, weights, bias,
                    Int8(o.zeroPoint), o.scale, Int8(range.min), Int8(range.max), flags, out)
            }, setup: { op, m, p in
                xnn_setup_convolution2d_nhwc_qc8(op, b, h, w, m.typed(input, Int8.self), m.typed(output, Int8.self), p)
            })
        }
    }

    /// Whether XNNPACK's 8-bit convolutions accept these scales: each requantization scale
    /// (input x filter / output) in [2^-32, 256). Debian's build asserts (aborts) below 2^-32 instead
    /// of returning an error, so hostile scales must not reach it; the reference kernels take them
    /// (LiteRT's XNNPACK delegate, too, leaves such operators to its own kernels).
    static func requantizes(_ input: Float, _ filters: [Float], _ output: Float) -> Bool {
        filters.allSatisfy { filter in
            let scale = input * filter / output
            return scale.isFinite && scale >= 0x1.0p-32 && scale < 256
        }
    }

    private static func fullyConnected(_ ctx: PrepareContext, _ pool: ThreadPool, _ activation: FusedActivation, _ keepNumDims: Bool) throws -> Kernel? {
        let input = ctx.input(0), filter = ctx.input(1), output = ctx.output(0)
        let type = ctx.type(input)
        guard ctx.type(filter) == type, ctx.isConstant(filter), ctx.shape(filter).count == 2,
              !ctx.hasInput(2) || ctx.isConstant(ctx.input(2)) else { return nil }
        let units = ctx.shape(filter)[0], size = ctx.shape(filter)[1]
        let total = ctx.shape(input).reduce(1, *)
        guard size > 0, total % size == 0 else { return nil }
        let batches = total / size
        try ctx.setShape(output, keepNumDims ? Array(ctx.shape(input).dropLast()) + [units] : [batches, units])
        switch type {
        case .float32:
            let weights = try ctx.constant(filter, as: Float.self)
            let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Float.self) : [Float](repeating: 0, count: units)
            let range = FixedPoint.activationRange(activation)
            return try XNNPACKKernel(ctx, pool: pool, name: "fully_connected_nc_f32", create: {
                xnn_create_fully_connected_nc_f32(size, units, size, units, weights, bias, range.min, range.max, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_fully_connected_nc_f32(op, batches, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case .uint8:
            guard let fq = ctx.quantization(filter), fq.scales.count == 1 else { return nil }
            let i = try affine(ctx, input), o = try affine(ctx, output), range = try clamp(ctx, output, activation)
            guard requantizes(i.scale, [fq.scale], o.scale) else { return nil }
            let weights = try ctx.constant(filter, as: UInt8.self)
            let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: units)
            return try XNNPACKKernel(ctx, pool: pool, name: "fully_connected_nc_qu8", create: {
                xnn_create_fully_connected_nc_qu8(
                    size, units, size, units, UInt8(i.zeroPoint), i.scale, UInt8(fq.zeroPoint), fq.scale, weights, bias,
                    UInt8(o.zeroPoint), o.scale, UInt8(range.min), UInt8(range.max), 0, $0)
            }, setup: { op, m, p in
                xnn_setup_fully_connected_nc_qu8(op, batches, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        case .int8:
            guard let fq = ctx.quantization(filter), fq.scales.count == 1, fq.zeroPoint == 0 else { return nil }
            let i = try affine(ctx, input), o = try affine(ctx, output), range = try clamp(ctx, output, activation)
            guard requantizes(i.scale, [fq.scale], o.scale) else { return nil }
            let weights = try ctx.constant(filter, as: Int8.self)
            let bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Int32.self) : [Int32](repeating: 0, count: units)
            return try XNNPACKKernel(ctx, pool: pool, name: "fully_connected_nc_qs8", create: {
                xnn_create_fully_connected_nc_qs8(
                    size, units, size, units, Int8(i.zeroPoint), i.scale, fq.scale, weights, bias,
                    Int8(o.zeroPoint), o.scale, Int8(range.min), Int8(range.max), 0, $0)
            }, setup: { op, m, p in
                xnn_setup_fully_connected_nc_qs8(op, batches, m.typed(input, Int8.self), m.typed(output, Int8.self), p)
            })
        default:
            return nil
        }
    }

    private static func sigmoid(_ ctx: PrepareContext, _ pool: ThreadPool) throws -> Kernel? {
        let (input, output, count) = try elementwise(ctx)
        switch ctx.type(input) {
        case .float32:
            return try XNNPACKKernel(ctx, pool: pool, name: "sigmoid_nc_f32", create: {
                xnn_create_sigmoid_nc_f32(1, 1, 1, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_sigmoid_nc_f32(op, count, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case .uint8:
            let i = try affine(ctx, input), o = try affine(ctx, output)
            return try XNNPACKKernel(ctx, pool: pool, name: "sigmoid_nc_qu8", create: {
                xnn_create_sigmoid_nc_qu8(1, 1, 1, UInt8(i.zeroPoint), i.scale, UInt8(o.zeroPoint), o.scale, 0, 255, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_sigmoid_nc_qu8(op, count, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        case .int8:
            let i = try affine(ctx, input), o = try affine(ctx, output)
            return try XNNPACKKernel(ctx, pool: pool, name: "sigmoid_nc_qs8", create: {
                xnn_create_sigmoid_nc_qs8(1, 1, 1, Int8(i.zeroPoint), i.scale, Int8(o.zeroPoint), o.scale, -128, 127, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_sigmoid_nc_qs8(op, count, m.typed(input, Int8.self), m.typed(output, Int8.self), p)
            })
        default:
            return nil
        }
    }

    /// ADD, MUL and SUB, with broadcasting.
    enum Arithmetic: String {
        case add, multiply, subtract
    }

    /// The RELU or RELU6 that alone reads the output of the operator being prepared (which has no
    /// fused activation of its own), keeps its type and quantization, and is not a model output:
    /// the operator can clamp as it writes and the RELU do nothing.
    private static func foldableRelu(_ ctx: PrepareContext, activation: FusedActivation) -> (index: Int, activation: FusedActivation)? {
        let output = ctx.output(0), graph = ctx.graph
        guard activation == .none, !ctx.isObservable(output) else { return nil }
        let readers = graph.operators.filter { $0.inputs.contains(output) }
        guard readers.count == 1, let relu = readers.first, [.relu, .relu6].contains(relu.code.builtin),
              relu.inputs == [output], relu.outputs.count == 1, relu.index > ctx.op.index else { return nil }
        let result = relu.outputs[0]
        guard graph.tensors[result].type == graph.tensors[output].type,
              graph.tensors[result].quantization == graph.tensors[output].quantization else { return nil }
        return (relu.index, relu.code.builtin == .relu ? .relu : .relu6)
    }

    private static func binary(_ ctx: PrepareContext, _ pool: ThreadPool, _ fused: FusedActivation, _ operation: Arithmetic) throws -> Kernel? {
        let a = ctx.input(0), b = ctx.input(1), output = ctx.output(0)
        let type = ctx.type(a)
        guard ctx.op.inputs.count == 2, ctx.type(b) == type, ctx.shape(a).count <= 6, ctx.shape(b).count <= 6,
              let broadcast = try? Broadcast(ctx.shape(a), ctx.shape(b), tables: false) else { return nil }
        try ctx.setShape(output, broadcast.outputShape)
        // A RELU after the operator is folded into it (BlazeFace's residual ADDs): one pass, not two.
        let folded = [.float32, .uint8, .int8].contains(type) ? foldableRelu(ctx, activation: fused) : nil
        let activation = folded?.activation ?? fused
        if let folded { ctx.absorbed.insert(folded.index) }
        let shapeA = ctx.shape(a), shapeB = ctx.shape(b)
        if operation == .add, let pattern = ctx.paddedAdds[ctx.op.index] {
            let kernel = try PaddedAdd(ctx, pattern, activation: activation)
            return PooledRows(kernel, rowBytes: kernel.rowBytes, pool: pool)
        }
        switch type {
        case .float32:
            let range = FixedPoint.activationRange(activation)
            return try XNNPACKKernel(ctx, pool: pool, name: "\(operation.rawValue)_nd_f32", readsConstantInputs: true, create: { out in
                return switch operation {
                case .add: xnn_create_add_nd_f32(range.min, range.max, 0, out)
                case .multiply: xnn_create_multiply_nd_f32(range.min, range.max, 0, out)
                case .subtract: xnn_create_subtract_nd_f32(range.min, range.max, 0, out)
                }
            }, setup: { op, m, p in
                let x = m.typed(a, Float.self), y = m.typed(b, Float.self), z = m.typed(output, Float.self)
                return switch operation {
                case .add: xnn_setup_add_nd_f32(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                case .multiply: xnn_setup_multiply_nd_f32(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                case .subtract: xnn_setup_subtract_nd_f32(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                }
            })
        case .uint8:
            let qa = try affine(ctx, a), qb = try affine(ctx, b), o = try affine(ctx, output), range = try clamp(ctx, output, activation)
            let za = UInt8(qa.zeroPoint), zb = UInt8(qb.zeroPoint), zo = UInt8(o.zeroPoint), low = UInt8(range.min), high = UInt8(range.max)
            return try XNNPACKKernel(ctx, pool: pool, name: "\(operation.rawValue)_nd_qu8", readsConstantInputs: true, create: { out in
                return switch operation {
                case .add: xnn_create_add_nd_qu8(za, qa.scale, zb, qb.scale, zo, o.scale, low, high, 0, out)
                case .multiply: xnn_create_multiply_nd_qu8(za, qa.scale, zb, qb.scale, zo, o.scale, low, high, 0, out)
                case .subtract: xnn_create_subtract_nd_qu8(za, qa.scale, zb, qb.scale, zo, o.scale, low, high, 0, out)
                }
            }, setup: { op, m, p in
                let x = m.typed(a, UInt8.self), y = m.typed(b, UInt8.self), z = m.typed(output, UInt8.self)
                return switch operation {
                case .add: xnn_setup_add_nd_qu8(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                case .multiply: xnn_setup_multiply_nd_qu8(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                case .subtract: xnn_setup_subtract_nd_qu8(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                }
            })
        case .int8:
            let qa = try affine(ctx, a), qb = try affine(ctx, b), o = try affine(ctx, output), range = try clamp(ctx, output, activation)
            let za = Int8(qa.zeroPoint), zb = Int8(qb.zeroPoint), zo = Int8(o.zeroPoint), low = Int8(range.min), high = Int8(range.max)
            return try XNNPACKKernel(ctx, pool: pool, name: "\(operation.rawValue)_nd_qs8", readsConstantInputs: true, create: { out in
                return switch operation {
                case .add: xnn_create_add_nd_qs8(za, qa.scale, zb, qb.scale, zo, o.scale, low, high, 0, out)
                case .multiply: xnn_create_multiply_nd_qs8(za, qa.scale, zb, qb.scale, zo, o.scale, low, high, 0, out)
                case .subtract: xnn_create_subtract_nd_qs8(za, qa.scale, zb, qb.scale, zo, o.scale, low, high, 0, out)
                }
            }, setup: { op, m, p in
                let x = m.typed(a, Int8.self), y = m.typed(b, Int8.self), z = m.typed(output, Int8.self)
                return switch operation {
                case .add: xnn_setup_add_nd_qs8(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                case .multiply: xnn_setup_multiply_nd_qs8(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                case .subtract: xnn_setup_subtract_nd_qs8(op, shapeA.count, shapeA, shapeB.count, shapeB, x, y, z, p)
                }
            })
        default:
            return nil
        }
    }

    private static func pooling(_ ctx: PrepareContext, _ pool: ThreadPool, _ options: Pool2DOptions, max isMax: Bool) throws -> Kernel? {
        let input = ctx.input(0), output = ctx.output(0)
        let type = ctx.type(input)
        guard ctx.shape(input).count == 4 else { return nil }
        let g = try WindowGeometry(pooling: ctx, options: options)
        try ctx.setShape(output, g.outputShape)
        let flags = UInt32(options.padding == .same ? XNN_FLAG_TENSORFLOW_SAME_PADDING : 0)
        let (fh, fw, sh, sw) = (UInt32(g.filterHeight), UInt32(g.filterWidth), UInt32(g.strideHeight), UInt32(g.strideWidth))
        let c = g.inputChannels, (b, h, w) = (g.batches, g.inputHeight, g.inputWidth)
        switch (type, isMax) {
        case (.float32, _):
            let range = FixedPoint.activationRange(options.activation)
            return try XNNPACKKernel(ctx, pool: pool, name: isMax ? "max_pooling2d_nhwc_f32" : "average_pooling2d_nhwc_f32", create: {
                isMax ? xnn_create_max_pooling2d_nhwc_f32(0, 0, 0, 0, fh, fw, sh, sw, 1, 1, c, c, c, range.min, range.max, flags, $0)
                      : xnn_create_average_pooling2d_nhwc_f32(0, 0, 0, 0, fh, fw, sh, sw, c, c, c, range.min, range.max, flags, $0)
            }, setup: { op, m, p in
                isMax ? xnn_setup_max_pooling2d_nhwc_f32(op, b, h, w, m.typed(input, Float.self), m.typed(output, Float.self), p)
                      : xnn_setup_average_pooling2d_nhwc_f32(op, b, h, w, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case (.uint8, true):
            let range = try clamp(ctx, output, options.activation)
            guard ctx.quantization(input) == ctx.quantization(output) else { return nil }
            return try XNNPACKKernel(ctx, pool: pool, name: "max_pooling2d_nhwc_u8", create: {
                xnn_create_max_pooling2d_nhwc_u8(0, 0, 0, 0, fh, fw, sh, sw, 1, 1, c, c, c, UInt8(range.min), UInt8(range.max), flags, $0)
            }, setup: { op, m, p in
                xnn_setup_max_pooling2d_nhwc_u8(op, b, h, w, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        case (.int8, true):
            let range = try clamp(ctx, output, options.activation)
            guard ctx.quantization(input) == ctx.quantization(output) else { return nil }
            return try XNNPACKKernel(ctx, pool: pool, name: "max_pooling2d_nhwc_s8", create: {
                xnn_create_max_pooling2d_nhwc_s8(0, 0, 0, 0, fh, fw, sh, sw, 1, 1, c, c, c, Int8(range.min), Int8(range.max), flags, $0)
            }, setup: { op, m, p in
                xnn_setup_max_pooling2d_nhwc_s8(op, b, h, w, m.typed(input, Int8.self), m.typed(output, Int8.self), p)
            })
        case (.uint8, false):
            // This XNNPACK's quantized average pooling counts padded pixels in the divisor; TFLite does not.
            let padded = (g.outputHeight - 1) * g.strideHeight + g.filterHeight > g.inputHeight
                || (g.outputWidth - 1) * g.strideWidth + g.filterWidth > g.inputWidth
            guard !padded else { return nil }
            let i = try affine(ctx, input), o = try affine(ctx, output), range = try clamp(ctx, output, options.activation)
            return try XNNPACKKernel(ctx, pool: pool, name: "average_pooling2d_nhwc_qu8", create: {
                xnn_create_average_pooling2d_nhwc_qu8(0, 0, 0, 0, fh, fw, sh, sw, c, c, c, UInt8(i.zeroPoint), i.scale,
                                                      UInt8(o.zeroPoint), o.scale, UInt8(range.min), UInt8(range.max), flags, $0)
            }, setup: { op, m, p in
                xnn_setup_average_pooling2d_nhwc_qu8(op, b, h, w, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        default:
            return nil
        }
    }

    private static func softmax(_ ctx: PrepareContext, _ pool: ThreadPool, beta: Float) throws -> Kernel? {
        let input = ctx.input(0), output = ctx.output(0)
        guard let depth = ctx.shape(input).last, depth > 0 else { return nil }
        try ctx.setShape(output, ctx.shape(input))
        let rows = ctx.shape(input).reduce(1, *) / depth
        switch ctx.type(input) {
        case .float32 where beta == 1:
            return try XNNPACKKernel(ctx, pool: pool, name: "softmax_nc_f32", create: {
                xnn_create_softmax_nc_f32(depth, depth, depth, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_softmax_nc_f32(op, rows, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case .uint8:
            // exp(beta * scale * q): beta folds into the input scale.
            let i = try affine(ctx, input), o = try affine(ctx, output)
            return try XNNPACKKernel(ctx, pool: pool, name: "softmax_nc_qu8", create: {
                xnn_create_softmax_nc_qu8(depth, depth, depth, i.scale * beta, UInt8(o.zeroPoint), o.scale, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_softmax_nc_qu8(op, rows, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        case .int8:
            // Debian's XNNPACK has no int8 softmax: the reference kernel's rows, across the threads.
            return PooledRows(try Softmax(ctx, beta: beta), rowBytes: depth, pool: pool)
        default:
            return nil
        }
    }

    private static func convert(_ ctx: PrepareContext, _ pool: ThreadPool) throws -> Kernel? {
        let (input, output, count) = try elementwise(ctx)
        switch (ctx.type(input), ctx.type(output)) {
        case (.float32, .uint8):
            let o = try affine(ctx, output)
            return try XNNPACKKernel(ctx, pool: pool, name: "convert_nc_f32_qu8", create: {
                xnn_create_convert_nc_f32_qu8(1, 1, 1, o.scale, UInt8(o.zeroPoint), 0, 255, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_convert_nc_f32_qu8(op, count, m.typed(input, Float.self), m.typed(output, UInt8.self), p)
            })
        case (.float32, .int8):
            let o = try affine(ctx, output)
            return try XNNPACKKernel(ctx, pool: pool, name: "convert_nc_f32_qs8", create: {
                xnn_create_convert_nc_f32_qs8(1, 1, 1, o.scale, Int8(o.zeroPoint), -128, 127, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_convert_nc_f32_qs8(op, count, m.typed(input, Float.self), m.typed(output, Int8.self), p)
            })
        case (.uint8, .float32):
            let i = try affine(ctx, input)
            return try XNNPACKKernel(ctx, pool: pool, name: "convert_nc_qu8_f32", create: {
                xnn_create_convert_nc_qu8_f32(1, 1, 1, i.scale, UInt8(i.zeroPoint), 0, $0)
            }, setup: { op, m, p in
                xnn_setup_convert_nc_qu8_f32(op, count, m.typed(input, UInt8.self), m.typed(output, Float.self), p)
            })
        case (.int8, .float32):
            let i = try affine(ctx, input)
            return try XNNPACKKernel(ctx, pool: pool, name: "convert_nc_qs8_f32", create: {
                xnn_create_convert_nc_qs8_f32(1, 1, 1, i.scale, Int8(i.zeroPoint), 0, $0)
            }, setup: { op, m, p in
                xnn_setup_convert_nc_qs8_f32(op, count, m.typed(input, Int8.self), m.typed(output, Float.self), p)
            })
        default:
            return nil
        }
    }

    private static func resize(_ ctx: PrepareContext, _ pool: ThreadPool, _ options: ResizeOptions) throws -> Kernel? {
        let input = ctx.input(0), output = ctx.output(0)
        guard ctx.shape(input).count == 4, ctx.op.inputs.count == 2, ctx.isConstant(ctx.input(1)),
              !(options.alignCorners && options.halfPixelCenters) else { return nil }
        let size = try ctx.constant(ctx.input(1), as: Int32.self)
        guard size.count == 2, size[0] > 0, size[1] > 0 else { return nil }
        if ctx.type(input) != .float32, ctx.quantization(input) != ctx.quantization(output) { return nil }
        let s = ctx.shape(input), (oh, ow) = (Int(size[0]), Int(size[1]))
        try ctx.setShape(output, [s[0], oh, ow, s[3]])
        let flags = UInt32(options.alignCorners ? XNN_FLAG_ALIGN_CORNERS : options.halfPixelCenters ? 0 : XNN_FLAG_TENSORFLOW_LEGACY_MODE)
        switch ctx.type(input) {
        case .float32:
            return try XNNPACKKernel(ctx, pool: pool, name: "resize_bilinear2d_nhwc_f32", create: {
                xnn_create_resize_bilinear2d_nhwc_f32(s[3], s[3], s[3], flags, $0)
            }, setup: { op, m, p in
                xnn_setup_resize_bilinear2d_nhwc_f32(op, s[0], s[1], s[2], oh, ow, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case .uint8:
            return try XNNPACKKernel(ctx, pool: pool, name: "resize_bilinear2d_nhwc_u8", create: {
                xnn_create_resize_bilinear2d_nhwc_u8(s[3], s[3], s[3], flags, $0)
            }, setup: { op, m, p in
                xnn_setup_resize_bilinear2d_nhwc_u8(op, s[0], s[1], s[2], oh, ow, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
            })
        case .int8:
            return try XNNPACKKernel(ctx, pool: pool, name: "resize_bilinear2d_nhwc_s8", create: {
                xnn_create_resize_bilinear2d_nhwc_s8(s[3], s[3], s[3], flags, $0)
            }, setup: { op, m, p in
                xnn_setup_resize_bilinear2d_nhwc_s8(op, s[0], s[1], s[2], oh, ow, m.typed(input, Int8.self), m.typed(output, Int8.self), p)
            })
        default:
            return nil
        }
    }

    /// RELU and RELU6 as a clamp; for 8-bit tensors only when no rescaling is needed.
    private static func clamp(_ ctx: PrepareContext, _ pool: ThreadPool, upper: Float?) throws -> Kernel? {
        let (input, output, count) = try elementwise(ctx)
        switch ctx.type(input) {
        case .float32:
            let high = upper ?? .infinity
            return try XNNPACKKernel(ctx, pool: pool, name: "clamp_nc_f32", create: {
                xnn_create_clamp_nc_f32(1, 1, 1, 0, high, 0, $0)
            }, setup: { op, m, p in
                xnn_setup_clamp_nc_f32(op, count, m.typed(input, Float.self), m.typed(output, Float.self), p)
            })
        case .uint8, .int8:
            guard ctx.quantization(input) == ctx.quantization(output) else { return nil }
            let range = try clamp(ctx, output, upper == nil ? .relu : .relu6)
            if ctx.type(input) == .uint8 {
                return try XNNPACKKernel(ctx, pool: pool, name: "clamp_nc_u8", create: {
                    xnn_create_clamp_nc_u8(1, 1, 1, UInt8(range.min), UInt8(range.max), 0, $0)
                }, setup: { op, m, p in
                    xnn_setup_clamp_nc_u8(op, count, m.typed(input, UInt8.self), m.typed(output, UInt8.self), p)
                })
            }
            return try XNNPACKKernel(ctx, pool: pool, name: "clamp_nc_s8", create: {
                xnn_create_clamp_nc_s8(1, 1, 1, Int8(range.min), Int8(range.max), 0, $0)
            }, setup: { op, m, p in
                xnn_setup_clamp_nc_s8(op, count, m.typed(input, Int8.self), m.typed(output, Int8.self), p)
            })
        default:
            return nil
        }
    }
}
