/// Element type of a tensor (the schema's `TensorType`).
public enum TensorType: Int, Sendable, CaseIterable, CustomStringConvertible {
    case float32 = 0, float16 = 1, int32 = 2, uint8 = 3, int64 = 4, string = 5, bool = 6, int16 = 7
    case complex64 = 8, int8 = 9, float64 = 10, complex128 = 11, uint64 = 12, resource = 13
    case variant = 14, uint32 = 15, uint16 = 16, int4 = 17, bfloat16 = 18

    /// Bytes per element, or nil for types without a fixed size (string, resource, variant, int4).
    public var byteSize: Int? {
        switch self {
        case .bool, .uint8, .int8: return 1
        case .float16, .int16, .uint16, .bfloat16: return 2
        case .float32, .int32, .uint32: return 4
        case .int64, .uint64, .float64, .complex64: return 8
        case .complex128: return 16
        case .string, .resource, .variant, .int4: return nil
        }
    }

    public var description: String {
        switch self {
        case .float32: return "float32"
        case .float16: return "float16"
        case .int32: return "int32"
        case .uint8: return "uint8"
        case .int64: return "int64"
        case .string: return "string"
        case .bool: return "bool"
        case .int16: return "int16"
        case .complex64: return "complex64"
        case .int8: return "int8"
        case .float64: return "float64"
        case .complex128: return "complex128"
        case .uint64: return "uint64"
        case .resource: return "resource"
        case .variant: return "variant"
        case .uint32: return "uint32"
        case .uint16: return "uint16"
        case .int4: return "int4"
        case .bfloat16: return "bfloat16"
        }
    }
}

/// Affine quantization: `real = scale * (q - zeroPoint)`, per tensor or per channel.
public struct Quantization: Equatable, Sendable {
    public var scales: [Float]
    public var zeroPoints: [Int64]
    /// The axis along which per-channel scales apply (0 for per-tensor).
    public var quantizedDimension: Int

    public init(scales: [Float], zeroPoints: [Int64], quantizedDimension: Int = 0) {
        self.scales = scales
        self.zeroPoints = zeroPoints
        self.quantizedDimension = quantizedDimension
    }

    public var isPerChannel: Bool { scales.count > 1 }
    /// The single scale of a per-tensor quantization (the first scale otherwise).
    public var scale: Float { scales.first ?? 0 }
    /// The single zero point of a per-tensor quantization (the first otherwise).
    public var zeroPoint: Int { Int(zeroPoints.first ?? 0) }
}

/// A tensor as declared in the model file.
public struct TensorInfo: Sendable {
    public var index: Int
    public var name: String
    public var type: TensorType
    /// Static shape; `[]` for scalars and for shapes an operator sets at run time.
    public var shape: [Int]
    /// Shape with `-1` for dynamic dimensions, when the file records one.
    public var shapeSignature: [Int]?
    public var buffer: Int
    public var quantization: Quantization?
    public var isVariable: Bool
    /// Byte range of the constant data in the model file, nil for non-constant tensors.
    public var dataRange: Range<Int>?
    /// The constant is stored sparse (TFLite's `sparsity` field): its buffer holds only the
    /// non-zero blocks and their indices, not `shape` elements.
    public var isSparse = false

    public var isConstant: Bool { dataRange != nil }
    public var elementCount: Int { shape.reduce(1, *) }
}

/// A builtin operator code (the schema's `BuiltinOperator`).
public struct BuiltinOperator: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let add = Self(rawValue: 0)
    public static let averagePool2D = Self(rawValue: 1)
    public static let concatenation = Self(rawValue: 2)
    public static let conv2D = Self(rawValue: 3)
    public static let depthwiseConv2D = Self(rawValue: 4)
    public static let dequantize = Self(rawValue: 6)
    public static let fullyConnected = Self(rawValue: 9)
    public static let l2Normalization = Self(rawValue: 11)
    public static let logistic = Self(rawValue: 14)
    public static let maxPool2D = Self(rawValue: 17)
    public static let mul = Self(rawValue: 18)
    public static let relu = Self(rawValue: 19)
    public static let relu6 = Self(rawValue: 21)
    public static let reshape = Self(rawValue: 22)
    public static let resizeBilinear = Self(rawValue: 23)
    public static let softmax = Self(rawValue: 25)
    public static let custom = Self(rawValue: 32)
    public static let pad = Self(rawValue: 34)
    public static let stridedSlice = Self(rawValue: 45)
    public static let transpose = Self(rawValue: 39)
    public static let sub = Self(rawValue: 41)
    public static let squeeze = Self(rawValue: 43)
    public static let resizeNearestNeighbor = Self(rawValue: 97)
    public static let abs = Self(rawValue: 101)
    public static let quantize = Self(rawValue: 114)
    public static let hardSwish = Self(rawValue: 117)
    public static let depthToSpace = Self(rawValue: 5)
    public static let tanh = Self(rawValue: 28)
    public static let gather = Self(rawValue: 36)
    public static let mean = Self(rawValue: 40)
    public static let exp = Self(rawValue: 47)
    public static let split = Self(rawValue: 49)
    public static let cast = Self(rawValue: 53)
    public static let prelu = Self(rawValue: 54)
    public static let maximum = Self(rawValue: 55)
    public static let minimum = Self(rawValue: 57)
    public static let neg = Self(rawValue: 59)
    public static let slice = Self(rawValue: 65)
    public static let sum = Self(rawValue: 74)
    public static let pack = Self(rawValue: 83)
    public static let unpack = Self(rawValue: 88)
    public static let splitV = Self(rawValue: 102)
    public static let batchMatMul = Self(rawValue: 126)

    /// The schema's name, e.g. `CONV_2D`.
    public var description: String {
        let index = Int(rawValue)
        return BuiltinOperator.names.indices.contains(index) ? BuiltinOperator.names[index] : "BUILTIN_\(rawValue)"
    }

    static let names: [String] = [
        "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
        "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP", "L2_NORMALIZATION",
        "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION", "LSTM", "MAX_POOL_2D",
        "MUL", "RELU", "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR", "RNN", "SOFTMAX",
        "SPACE_TO_DEPTH", "SVDF", "TANH", "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL", "CUSTOM",
        "EMBEDDING_LOOKUP_SPARSE", "PAD", "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER", "BATCH_TO_SPACE_ND",
        "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN", "SUB", "DIV", "SQUEEZE", "UNIDIRECTIONAL_SEQUENCE_LSTM",
        "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP", "TOPK_V2", "SPLIT", "LOG_SOFTMAX", "DELEGATE",
        "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU", "MAXIMUM", "ARG_MAX", "MINIMUM", "LESS", "NEG",
        "PADV2", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SELECT", "SLICE", "SIN", "TRANSPOSE_CONV",
        "SPARSE_TO_DENSE", "TILE", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL", "LOG", "SUM", "SQRT", "RSQRT",
        "SHAPE", "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD", "REDUCE_MAX", "PACK", "LOGICAL_OR",
        "ONE_HOT", "LOGICAL_AND", "LOGICAL_NOT", "UNPACK", "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY",
        "SQUARE", "ZEROS_LIKE", "FILL", "FLOOR_MOD", "RANGE", "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU",
        "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS", "SPLIT_V", "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N",
        "GATHER_ND", "COS", "WHERE", "RANK", "ELU", "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE",
        "MATRIX_SET_DIAG", "ROUND", "HARD_SWISH", "IF", "WHILE", "NON_MAX_SUPPRESSION_V4",
        "NON_MAX_SUPPRESSION_V5", "SCATTER_ND", "SELECT_V2", "DENSIFY", "SEGMENT_SUM", "BATCH_MATMUL",
        "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM", "CALL_ONCE", "BROADCAST_TO", "RFFT2D", "CONV_3D",
        "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE",
        "REDUCE_ALL", "CONV_3D_TRANSPOSE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
        "BROADCAST_ARGS", "RANDOM_STANDARD_NORMAL", "BUCKETIZE", "RANDOM_UNIFORM", "MULTINOMIAL", "GELU",
        "DYNAMIC_UPDATE_SLICE", "RELU_0_TO_1", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
        "UNSORTED_SEGMENT_SUM", "ATAN2", "UNSORTED_SEGMENT_MIN", "SIGN", "BITCAST", "BITWISE_XOR",
        "RIGHT_SHIFT",
    ]
}

/// An entry of the model's operator code table.
public struct OperatorCode: Sendable, Equatable {
    public var builtin: BuiltinOperator
    /// The custom operator's name when `builtin` is `CUSTOM`.
    public var customName: String?
    public var version: Int

    /// A display name: the builtin name, or the custom op's own name.
    public var name: String { builtin == .custom ? (customName ?? "CUSTOM") : builtin.description }
}

/// Padding mode of convolutions and pools.
public enum Padding: Int, Sendable { case same = 0, valid = 1 }

/// An activation fused into an operator's output.
public enum FusedActivation: Int, Sendable {
    case none = 0, relu = 1, reluN1To1 = 2, relu6 = 3, tanh = 4, signBit = 5
}

public struct Conv2DOptions: Sendable, Equatable {
    public var padding: Padding = .same
    public var strideWidth = 1, strideHeight = 1
    public var activation: FusedActivation = .none
    public var dilationWidth = 1, dilationHeight = 1
    /// Depthwise only: output channels per input channel.
    public var depthMultiplier = 1
}

public struct Pool2DOptions: Sendable, Equatable {
    public var padding: Padding = .same
    public var strideWidth = 1, strideHeight = 1
    public var filterWidth = 1, filterHeight = 1
    public var activation: FusedActivation = .none
}

/// STRIDED_SLICE's masks: bit `i` applies to axis `i`.
public struct StridedSliceOptions: Sendable, Equatable {
    public var beginMask = 0, endMask = 0, ellipsisMask = 0, newAxisMask = 0, shrinkAxisMask = 0
    /// `end` is relative to `begin`.
    public var offset = false
}

public struct ResizeOptions: Sendable, Equatable {
    public var alignCorners = false
    public var halfPixelCenters = false
}

/// The builtin options Spotter reads; other option tables are kept as their type code.
public enum BuiltinOptions: Sendable, Equatable {
    case none
    case conv2D(Conv2DOptions)
    case depthwiseConv2D(Conv2DOptions)
    case pool2D(Pool2DOptions)
    case fullyConnected(activation: FusedActivation, keepNumDims: Bool, weightsFormat: Int)
    case softmax(beta: Float)
    case concatenation(axis: Int, activation: FusedActivation)
    case add(activation: FusedActivation)
    case mul(activation: FusedActivation)
    case sub(activation: FusedActivation)
    case reshape(newShape: [Int]?)
    case resizeBilinear(ResizeOptions)
    case resizeNearestNeighbor(ResizeOptions)
    case squeeze(dimensions: [Int])
    case stridedSlice(StridedSliceOptions)
    /// PACK and UNPACK: the axis the inputs are stacked along (or the input is split along).
    case pack(axis: Int)
    case unpack(axis: Int)
    case gather(axis: Int, batchDims: Int)
    /// MEAN, SUM and the other reductions.
    case reducer(keepDims: Bool)
    case depthToSpace(blockSize: Int)
    case batchMatMul(adjointX: Bool, adjointY: Bool)
    /// An options table Spotter does not interpret, by its union type code.
    case other(typeCode: Int)

    /// The fused activation, for options that carry one.
    public var activation: FusedActivation {
        switch self {
        case .conv2D(let o), .depthwiseConv2D(let o): return o.activation
        case .pool2D(let o): return o.activation
        case .fullyConnected(let a, _, _), .concatenation(_, let a), .add(let a), .mul(let a), .sub(let a): return a
        default: return .none
        }
    }
}

/// One node of a subgraph.
public struct OperatorInfo: Sendable {
    public var index: Int
    public var code: OperatorCode
    /// Tensor indices; `-1` marks an optional input that is absent.
    public var inputs: [Int]
    public var outputs: [Int]
    public var options: BuiltinOptions
    /// Raw custom options (FlexBuffers for most custom ops).
    public var customOptions: [UInt8]?
}

public struct Subgraph: Sendable {
    public var name: String?
    public var tensors: [TensorInfo]
    public var inputs: [Int]
    public var outputs: [Int]
    public var operators: [OperatorInfo]
}
