import Foundation
import TFLiteFormat

/// Chooses the reference kernel for an operator, or explains why there is none.
enum ReferenceKernels {
    /// Operators the reference backend runs, with the element types it accepts (for `inspect`).
    static let supported: [String: String] = [
        "CONV_2D": "float32, uint8, int8 (per-channel), hybrid (float32 with int8/uint8 weights)",
        "DEPTHWISE_CONV_2D": "float32, uint8, int8 (per-channel), hybrid (float32 with int8/uint8 weights)",
        "FULLY_CONNECTED": "float32, uint8, int8",
        "ADD": "float32, uint8, int8",
        "MUL": "float32, uint8, int8",
        "SUB": "float32, uint8, int8",
        "TRANSPOSE": "any (constant permutation, rank up to 6)",
        "AVERAGE_POOL_2D": "float32, uint8, int8",
        "MAX_POOL_2D": "float32, uint8, int8",
        "CONCATENATION": "any",
        "RESHAPE": "any",
        "SQUEEZE": "any",
        "PAD": "float32, uint8, int8",
        "STRIDED_SLICE": "any (constant begin, end, strides)",
        "LOGISTIC": "float32, uint8, int8",
        "SOFTMAX": "float32, uint8, int8",
        "RELU": "float32, uint8, int8",
        "ABS": "float32",
        "L2_NORMALIZATION": "float32 (last axis)",
        "RELU6": "float32, uint8, int8",
        "HARD_SWISH": "float32, uint8, int8",
        "QUANTIZE": "float32 to uint8/int8, uint8/int8 requantize",
        "DEQUANTIZE": "uint8, int8, int16, float16 to float32 (constant float16 folded at load)",
        "RESIZE_BILINEAR": "float32, uint8, int8",
        "RESIZE_NEAREST_NEIGHBOR": "float32, uint8, int8",
        "SLICE": "any (constant begin and size)",
        "SPLIT": "any (constant axis)",
        "SPLIT_V": "any (constant sizes and axis)",
        "PACK": "any",
        "UNPACK": "any",
        "GATHER": "any (int32/int64 indices, batch_dims 0)",
        "DEPTH_TO_SPACE": "any",
        "CAST": "float32, int32, int64, int16, uint8, int8, bool",
        "NEG": "float32",
        "EXP": "float32",
        "TANH": "float32",
        "MINIMUM": "float32, int32, uint8, int8",
        "MAXIMUM": "float32, int32, uint8, int8",
        "PRELU": "float32",
        "MEAN": "float32 (constant axes)",
        "SUM": "float32 (constant axes)",
        "BATCH_MATMUL": "float32, int8",
        DetectionPostProcess.name: "uint8, float32",
    ]

    /// Whether an operator code has a reference kernel (tensor types are checked at load).
    static func isSupported(_ code: OperatorCode) -> Bool { supported[code.name] != nil }

    static func make(_ ctx: PrepareContext) throws -> Kernel {
        let op = ctx.op!
        guard op.outputs.count >= 1, op.inputs.count >= 1 || op.code.builtin == .custom else {
            throw ctx.fail("has no inputs or outputs")
        }
        let type = op.inputs.first.map { $0 >= 0 ? ctx.type($0) : .float32 } ?? .float32
        switch (op.code.builtin, op.options) {
        case (.conv2D, .conv2D(let options)), (.depthwiseConv2D, .depthwiseConv2D(let options)):
            try expectInputs(ctx, 2...3)
            let depthwise = op.code.builtin == .depthwiseConv2D
            let filterType = ctx.type(ctx.input(1))
            switch (type, filterType) {
            case (.float32, .float32): return try FloatConvolution(ctx, options: options, depthwise: depthwise)
            // Hybrid models: int8 weights with the input quantized at every run as LiteRT does; others
            // (uint8, or zero points) dequantized once at load, the convolution in float.
            case (.float32, .int8), (.float32, .uint8): return try FloatConvolution(ctx, options: options, depthwise: depthwise)
            case (.uint8, .uint8), (.int8, .int8): return try QuantizedConvolution(ctx, options: options, depthwise: depthwise)
            default: throw ctx.unsupported()
            }
        case (.fullyConnected, .fullyConnected(let activation, let keepNumDims, let format)):
            try expectInputs(ctx, 2...3)
            guard format == 0 else { throw ctx.fail("shuffled weights format \(format) is not supported") }
            let filterType = ctx.type(ctx.input(1))
            switch (type, filterType) {
            case (.float32, .float32), (.uint8, .uint8), (.int8, .int8):
                return try FullyConnected(ctx, activation: activation, keepNumDims: keepNumDims)
            default: throw ctx.unsupported()
            }
        case (.add, .add(let activation)), (.mul, .mul(let activation)), (.sub, .sub(let activation)):
            try expectInputs(ctx, 2...2)
            let operation: Arithmetic<Int8>.Operation = op.code.builtin == .add ? .add : op.code.builtin == .sub ? .sub : .mul
            guard ctx.type(ctx.input(1)) == type, ctx.type(ctx.output(0)) == type else { throw ctx.unsupported() }
            switch type {
            case .float32: return try FloatArithmetic(ctx, operation: operation, activation: activation)
            case .uint8: return try Arithmetic<UInt8>(ctx, operation: Arithmetic<UInt8>.Operation(operation), activation: activation)
            case .int8: return try Arithmetic<Int8>(ctx, operation: operation, activation: activation)
            default: throw ctx.unsupported()
            }
        case (.averagePool2D, .pool2D(let options)), (.maxPool2D, .pool2D(let options)):
            try expectInputs(ctx, 1...1)
            guard [.float32, .uint8, .int8].contains(type), ctx.type(ctx.output(0)) == type else { throw ctx.unsupported() }
            return try Pooling(ctx, mode: op.code.builtin == .maxPool2D ? .max : .average, options: options)
        case (.concatenation, .concatenation(let axis, let activation)):
            return try Concatenation(ctx, axis: axis, activation: activation)
        case (.reshape, _):
            return try Reshape(ctx, shape: try Reshape.targetShape(ctx, options: op.options))
        case (.squeeze, .squeeze(let dimensions)):
            return try Reshape(ctx, shape: try Reshape.squeezedShape(ctx, dimensions: dimensions))
        case (.transpose, _):
            try expectInputs(ctx, 2...2)
            return try Transpose(ctx)
        case (.stridedSlice, .stridedSlice(let options)):
            return try StridedSlice(ctx, options: options)
        case (.pad, _):
            try expectInputs(ctx, 2...2)
            return try Pad(ctx)
        case (.logistic, _):
            try expectInputs(ctx, 1...1)
            if type == .float32 { return try FloatUnary(ctx, FloatUnary.logistic) }
            return try LookupTable(ctx) { 1 / (1 + exp(-$0)) }
        case (.hardSwish, _):
            try expectInputs(ctx, 1...1)
            switch type {
            case .float32: return try FloatUnary(ctx, FloatUnary.hardSwish)
            case .uint8: return try QuantizedHardSwish<UInt8>(ctx)
            case .int8: return try QuantizedHardSwish<Int8>(ctx)
            default: throw ctx.unsupported()
            }
        case (.relu, _), (.relu6, _):
            try expectInputs(ctx, 1...1)
            let upper: Float? = op.code.builtin == .relu6 ? 6 : nil
            guard ctx.type(ctx.output(0)) == type else { throw ctx.unsupported() }
            switch type {
            case .float32: return try FloatUnary(ctx) { min(max($0, 0), upper ?? .infinity) }
            case .uint8: return try QuantizedRelu<UInt8>(ctx, upperBound: upper)
            case .int8: return try QuantizedRelu<Int8>(ctx, upperBound: upper)
            default: throw ctx.unsupported()
            }
        case (.abs, _):
            try expectInputs(ctx, 1...1)
            guard type == .float32, ctx.type(ctx.output(0)) == .float32 else { throw ctx.unsupported() }
            return try FloatUnary(ctx) { Swift.abs($0) }
        case (.l2Normalization, _):
            try expectInputs(ctx, 1...1)
            guard type == .float32, ctx.type(ctx.output(0)) == .float32 else { throw ctx.unsupported() }
            return try L2Normalization(ctx)
        case (.softmax, .softmax(let beta)):
            try expectInputs(ctx, 1...1)
            return try Softmax(ctx, beta: beta)
        case (.quantize, _), (.dequantize, _):
            try expectInputs(ctx, 1...1)
            return try Quantize(ctx, dequantize: op.code.builtin == .dequantize)
        case (.resizeBilinear, .resizeBilinear(let options)):
            try expectInputs(ctx, 2...2)
            return try Resize(ctx, bilinear: true, options: options)
        case (.resizeNearestNeighbor, .resizeNearestNeighbor(let options)):
            try expectInputs(ctx, 2...2)
            return try Resize(ctx, bilinear: false, options: options)
        case (.slice, _):
            return try StridedSlice(slice: ctx)
        case (.split, _):
            return try AxisSplit(ctx, mode: .split)
        case (.splitV, _):
            return try AxisSplit(ctx, mode: .splitV)
        case (.unpack, .unpack(let axis)):
            try expectInputs(ctx, 1...1)
            return try AxisSplit(ctx, mode: .unpack(axis: axis))
        case (.unpack, .none):
            try expectInputs(ctx, 1...1)
            return try AxisSplit(ctx, mode: .unpack(axis: 0))
        case (.pack, .pack(let axis)):
            return try Pack(ctx, axis: axis)
        case (.pack, .none):
            return try Pack(ctx, axis: 0)
        case (.gather, .gather(let axis, let batchDims)):
            try expectInputs(ctx, 2...2)
            return try Gather(ctx, axis: axis, batchDims: batchDims)
        case (.gather, .none):
            try expectInputs(ctx, 2...2)
            return try Gather(ctx, axis: 0, batchDims: 0)
        case (.depthToSpace, .depthToSpace(let blockSize)):
            try expectInputs(ctx, 1...1)
            return try DepthToSpace(ctx, blockSize: blockSize)
        case (.cast, _):
            try expectInputs(ctx, 1...1)
            return try Cast(ctx)
        case (.neg, _), (.exp, _), (.tanh, _):
            try expectInputs(ctx, 1...1)
            let function: (Float) -> Float = op.code.builtin == .neg ? { -$0 } : op.code.builtin == .exp ? { Foundation.exp($0) } : { Foundation.tanh($0) }
            return try FloatUnary(ctx, function)
        case (.minimum, _), (.maximum, _):
            try expectInputs(ctx, 2...2)
            return try MinimumMaximum(ctx, maximum: op.code.builtin == .maximum)
        case (.prelu, _):
            try expectInputs(ctx, 2...2)
            return try PRelu(ctx)
        case (.mean, .reducer(let keepDims)), (.sum, .reducer(let keepDims)):
            try expectInputs(ctx, 2...2)
            return try Reduce(ctx, mean: op.code.builtin == .mean, keepDims: keepDims)
        case (.mean, .none), (.sum, .none):
            try expectInputs(ctx, 2...2)
            return try Reduce(ctx, mean: op.code.builtin == .mean, keepDims: false)
        case (.batchMatMul, .batchMatMul(let adjointX, let adjointY)):
            try expectInputs(ctx, 2...2)
            return try BatchMatMul(ctx, adjointX: adjointX, adjointY: adjointY)
        case (.batchMatMul, .none):
            try expectInputs(ctx, 2...2)
            return try BatchMatMul(ctx, adjointX: false, adjointY: false)
        case (.custom, _) where op.code.customName == DetectionPostProcess.name:
            return try DetectionPostProcess(ctx)
        default:
            throw ctx.unsupported()
        }
    }

    private static func expectInputs(_ ctx: PrepareContext, _ range: ClosedRange<Int>) throws {
        let present = ctx.op.inputs.prefix(range.upperBound).filter { $0 >= 0 }.count
        guard range.contains(ctx.op.inputs.count), present >= range.lowerBound else {
            throw ctx.fail("expects \(range) inputs, has \(ctx.op.inputs.count)")
        }
    }
}
