import Foundation

/// A parsed TensorFlow Lite model: the schema subset Spotter runs, its metadata, and its bytes.
///
/// Parsing checks every offset, so a truncated or hostile file throws a ``ModelFormatError`` that
/// names what is wrong and where. The model is immutable and can be shared between threads.
///
/// ```swift
/// let model = try Model(contentsOf: URL(fileURLWithPath: "detect.tflite"))
/// print(model.subgraph.inputs.map { model.subgraph.tensors[$0].shape })
/// ```
public final class Model: Sendable {
    /// Largest element count of any one tensor Spotter accepts (2^31).
    public static let maxTensorElements = 1 << 31

    /// The whole file.
    public let bytes: [UInt8]
    public let version: Int
    public let description: String?
    public let operatorCodes: [OperatorCode]
    public let subgraphs: [Subgraph]
    /// `min_runtime_version` from the model's metadata entries, when present.
    public let minRuntimeVersion: String?
    /// Names of the model's metadata entries (e.g. `min_runtime_version`, `TFLITE_METADATA`).
    public let metadataNames: [String]
    /// TFLite Metadata (`TFLITE_METADATA`), when the model carries it.
    public let metadata: ModelMetadata?
    /// Files of the zip archive appended to the model (TFLite Metadata associated files), by name.
    public let associatedFiles: [String: [UInt8]]

    /// The first subgraph, the one that is run.
    public var subgraph: Subgraph { subgraphs[0] }

    /// Reads and parses the model at `url`.
    ///
    /// - Throws: ``ModelFormatError`` for malformed content; Foundation's error when the file cannot be read.
    public convenience init(contentsOf url: URL) throws {
        // Mapped, then copied once into the array (not read into a buffer and copied again).
        try self.init(bytes: [UInt8](try Data(contentsOf: url, options: .alwaysMapped)))
    }

    /// Parses a model from its bytes.
    ///
    /// - Throws: ``ModelFormatError``.
    public init(bytes: [UInt8]) throws {
        let parsed = try bytes.withUnsafeBytes { raw in try ModelParser(reader: FlatBufferReader(raw)).parse() }
        self.bytes = bytes
        self.version = parsed.version
        self.description = parsed.description
        self.operatorCodes = parsed.operatorCodes
        self.subgraphs = parsed.subgraphs
        self.minRuntimeVersion = parsed.minRuntimeVersion
        self.metadataNames = parsed.metadataNames
        self.metadata = parsed.metadata
        self.associatedFiles = parsed.associatedFiles
    }

    private init(bytes: [UInt8], copying model: Model, subgraphs: [Subgraph]) {
        self.bytes = bytes
        self.version = model.version
        self.description = model.description
        self.operatorCodes = model.operatorCodes
        self.subgraphs = subgraphs
        self.minRuntimeVersion = model.minRuntimeVersion
        self.metadataNames = model.metadataNames
        self.metadata = model.metadata
        self.associatedFiles = model.associatedFiles
    }

    /// The model with every DEQUANTIZE of a constant float16 tensor done once, as LiteRT does at
    /// load: the operator's output becomes a float32 constant (appended to ``bytes``) and the
    /// operator is removed, so convolutions see constant weights. `self` when there is none.
    public func foldingFloat16Constants() -> Model {
        var graph = subgraph
        var extra: [UInt8] = []
        var folded = Set<Int>()
        for op in graph.operators where op.code.builtin == .dequantize && op.inputs.count == 1 && op.outputs.count == 1 && op.inputs[0] >= 0 {
            let input = graph.tensors[op.inputs[0]], output = op.outputs[0]
            guard input.type == .float16, input.isConstant, !input.isSparse, graph.tensors[output].type == .float32,
                  !graph.inputs.contains(output) else { continue }
            let start = bytes.count + extra.count
            withConstantBytes(of: input) { raw in
                for i in 0..<raw.count / 2 {
                    let half = Float16(bitPattern: UInt16(raw[2 * i]) | UInt16(raw[2 * i + 1]) << 8)
                    withUnsafeBytes(of: Float(half).bitPattern.littleEndian) { extra.append(contentsOf: $0) }
                }
            }
            graph.tensors[output].dataRange = start..<(bytes.count + extra.count)
            graph.tensors[output].shape = input.shape
            folded.insert(op.index)
        }
        guard !folded.isEmpty else { return self }
        graph.operators.removeAll { folded.contains($0.index) }
        return Model(bytes: bytes + extra, copying: self, subgraphs: [graph] + subgraphs.dropFirst())
    }

    /// Calls `body` with the constant bytes of `tensor`, or an empty buffer for non-constant tensors.
    public func withConstantBytes<R>(of tensor: TensorInfo, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { raw in
            guard let range = tensor.dataRange else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            return try body(UnsafeRawBufferPointer(rebasing: raw[range]))
        }
    }

    /// The constant values of `tensor` converted to `T`, or nil when it is not constant.
    public func constantValues<T: BitwiseCopyable>(of tensor: TensorInfo, as type: T.Type) -> [T]? {
        guard tensor.isConstant else { return nil }
        return withConstantBytes(of: tensor) { raw in
            // One copy of the bytes: a per-element loop in this generic function runs unspecialized
            // (slow) when called from another module.
            let count = raw.count / MemoryLayout<T>.stride
            return [T](unsafeUninitializedCapacity: count) { buffer, initialized in
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.prefix(count * MemoryLayout<T>.stride)))
                initialized = count
            }
        }
    }

    /// The labels file among the associated files: the one named by an output tensor's
    /// `TENSOR_VALUE_LABELS`/`TENSOR_AXIS_LABELS` metadata, as lines.
    public var embeddedLabels: [String]? {
        guard let metadata else { return nil }
        let labelFiles = (metadata.outputs.flatMap(\.associatedFiles) + metadata.associatedFiles)
            .filter { $0.type == .tensorValueLabels || $0.type == .tensorAxisLabels }
        for file in labelFiles {
            if let data = associatedFiles[file.name] {
                let text = String(decoding: data, as: UTF8.self)
                // Ultralytics exports attach their settings (a Python dict) as the label file.
                if text.hasPrefix("{") { return Self.ultralyticsNames(text) }
                return text
                    .split(separator: "\n", omittingEmptySubsequences: false)
                    .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                    .reversed().drop(while: \.isEmpty).reversed()
            }
        }
        return nil
    }
}

extension Model {
    /// The settings an Ultralytics export attaches (a Python dict's repr: `{'description': ...,
    /// 'names': {...}, 'args': {...}}`), or nil for other models.
    public var ultralyticsSettings: String? {
        for name in associatedFiles.keys.sorted() {
            guard let data = associatedFiles[name], data.first == UInt8(ascii: "{") else { continue }
            let text = String(decoding: data.prefix(1 << 20), as: UTF8.self)
            if text.contains("'names': {") { return text }
        }
        return nil
    }

    /// Class names from the `'names': {0: 'person', 1: 'bicycle', ...}` entry of an Ultralytics
    /// metadata dict (Python's repr: single quotes, or double quotes around names with a `'`); nil
    /// when there is none or the indices are not 0, 1, 2...
    static func ultralyticsNames(_ text: String) -> [String]? {
        guard let start = text.range(of: "'names': {") else { return nil }
        var names: [String] = []
        var rest = text[start.upperBound...]
        while true {
            rest = rest.drop { $0 == " " || $0 == "," }
            guard let colon = rest.firstIndex(of: ":"), let index = Int(rest[..<colon].trimmingCharacters(in: .whitespaces)),
                  index == names.count else { break }
            rest = rest[rest.index(after: colon)...].drop { $0 == " " }
            guard let quote = rest.first, quote == "'" || quote == "\"" else { break }
            rest = rest.dropFirst()
            guard let end = rest.firstIndex(of: quote) else { break }
            names.append(String(rest[..<end]))
            rest = rest[rest.index(after: end)...]
        }
        return names.isEmpty ? nil : names
    }
}

private struct ParsedModel {
    var version = 0
    var description: String?
    var operatorCodes: [OperatorCode] = []
    var subgraphs: [Subgraph] = []
    var minRuntimeVersion: String?
    var metadataNames: [String] = []
    var metadata: ModelMetadata?
    var associatedFiles: [String: [UInt8]] = [:]
}

private struct ModelParser {
    let reader: FlatBufferReader

    func parse() throws -> ParsedModel {
        let root = try reader.root(identifier: "TFL3", what: "Model")
        var model = ParsedModel()
        model.version = Int(try root.scalar(0, default: UInt32(0), "version"))
        model.operatorCodes = try root.tables(1, "operator_codes").map(parseOperatorCode)
        model.description = try root.string(3, "description")
        let buffers = try root.tables(4, "buffers").enumerated().map { try parseBuffer($1, index: $0) }
        let subgraphTables = try root.tables(2, "subgraphs")
        guard !subgraphTables.isEmpty else { throw ModelFormatError.noSubgraph }
        model.subgraphs = try subgraphTables.map { try parseSubgraph($0, buffers: buffers, codes: model.operatorCodes) }

        for entry in try root.tables(6, "metadata") {
            let name = try entry.string(0, "name") ?? ""
            let bufferIndex = Int(try entry.scalar(1, default: UInt32(0), "buffer"))
            model.metadataNames.append(name)
            guard buffers.indices.contains(bufferIndex) else {
                throw ModelFormatError.indexOutOfRange(what: "metadata \"\(name)\" buffer", index: bufferIndex, count: buffers.count)
            }
            guard let range = buffers[bufferIndex] else { continue }
            let slice = UnsafeRawBufferPointer(rebasing: reader.bytes[range])
            switch name {
            case "min_runtime_version":
                model.minRuntimeVersion = String(decoding: slice.prefix { $0 != 0 }, as: UTF8.self)
            case "TFLITE_METADATA":
                model.metadata = try ModelMetadata.parse(FlatBufferReader(slice, baseOffset: range.lowerBound))
            default:
                break
            }
        }
        model.associatedFiles = try ZipArchive.storedFiles(reader)
        return model
    }

    func parseOperatorCode(_ table: FlatTable) throws -> OperatorCode {
        let deprecated = Int32(try table.scalar(0, default: Int8(0), "deprecated_builtin_code"))
        let builtin = try table.scalar(3, default: Int32(0), "builtin_code")
        // Files written before the 32-bit field existed only set the deprecated byte; newer writers set
        // both and keep the byte at 127 (PLACEHOLDER_FOR_GREATER_OP_CODES) for codes above it.
        let code = max(deprecated, builtin)
        return OperatorCode(
            builtin: BuiltinOperator(rawValue: code),
            customName: try table.string(1, "custom_code"),
            version: Int(try table.scalar(2, default: Int32(1), "version")))
    }

    func parseBuffer(_ table: FlatTable, index: Int) throws -> Range<Int>? {
        if let data = try table.vector(0, elementSize: 1, "data"), data.count > 0 {
            return data.byteRange
        }
        let offset = try table.scalar(1, default: UInt64(0), "offset")
        let size = try table.scalar(2, default: UInt64(0), "size")
        // The converter writes offset 1 as a placeholder for "no data".
        guard offset > 1 else { return nil }
        guard offset <= UInt64(reader.count), size <= UInt64(reader.count) - offset else {
            throw ModelFormatError.externalBufferOutOfRange(
                buffer: index, offset: Int(clamping: offset), size: Int(clamping: size), fileSize: reader.count)
        }
        return Int(offset)..<Int(offset + size)
    }

    func parseSubgraph(_ table: FlatTable, buffers: [Range<Int>?], codes: [OperatorCode]) throws -> Subgraph {
        let tensors = try table.tables(0, "tensors").enumerated().map { try parseTensor($1, index: $0, buffers: buffers) }
        func indices(_ field: Int, _ name: String) throws -> [Int] {
            try (table.int32s(field, name) ?? []).map { value in
                guard value >= 0, Int(value) < tensors.count else {
                    throw ModelFormatError.indexOutOfRange(what: "subgraph \(name) tensor", index: Int(value), count: tensors.count)
                }
                return Int(value)
            }
        }
        let operators = try table.tables(3, "operators").enumerated().map {
            try parseOperator($1, index: $0, codes: codes, tensorCount: tensors.count)
        }
        return Subgraph(
            name: try table.string(4, "name"), tensors: tensors,
            inputs: try indices(1, "inputs"), outputs: try indices(2, "outputs"), operators: operators)
    }

    func parseTensor(_ table: FlatTable, index: Int, buffers: [Range<Int>?]) throws -> TensorInfo {
        let name = try table.string(3, "name") ?? "tensor\(index)"
        let shape = (try table.int32s(0, "shape") ?? []).map(Int.init)
        let typeCode = Int(try table.scalar(1, default: Int8(0), "type"))
        guard let type = TensorType(rawValue: typeCode) else {
            throw ModelFormatError.unsupportedTensorType(tensor: name, code: typeCode)
        }
        guard shape.allSatisfy({ $0 >= 0 }) else { throw ModelFormatError.invalidShape(tensor: name, shape: shape) }
        var elements = 1
        for dimension in shape {
            let (product, overflow) = elements.multipliedReportingOverflow(by: dimension)
            guard !overflow else { throw ModelFormatError.invalidShape(tensor: name, shape: shape) }
            elements = product
        }
        guard elements <= Model.maxTensorElements else {
            throw ModelFormatError.tensorTooLarge(tensor: name, elements: elements, limit: Model.maxTensorElements)
        }
        let buffer = Int(try table.scalar(2, default: UInt32(0), "buffer"))
        guard buffers.indices.contains(buffer) else {
            throw ModelFormatError.indexOutOfRange(what: "tensor \"\(name)\" buffer", index: buffer, count: buffers.count)
        }
        let dataRange = buffers[buffer]
        let isSparse = try table.table(6, "sparsity") != nil
        if !isSparse, let dataRange, let size = type.byteSize, dataRange.count != elements * size {
            throw ModelFormatError.bufferSizeMismatch(tensor: name, expected: elements * size, actual: dataRange.count)
        }
        return TensorInfo(
            index: index, name: name, type: type, shape: shape,
            shapeSignature: try table.int32s(7, "shape_signature").map { $0.map(Int.init) },
            buffer: buffer,
            quantization: try parseQuantization(try table.table(4, "quantization"), tensor: name, type: type, shape: shape),
            isVariable: try table.bool(5, default: false, "is_variable"),
            dataRange: dataRange, isSparse: isSparse)
    }

    func parseQuantization(_ table: FlatTable?, tensor: String, type: TensorType, shape: [Int]) throws -> Quantization? {
        guard let table, let scales = try table.floats(2, "scale"), !scales.isEmpty else { return nil }
        let zeroPoints = try table.int64s(3, "zero_point") ?? []
        let dimension = Int(try table.scalar(6, default: Int32(0), "quantized_dimension"))
        guard zeroPoints.count == scales.count else {
            throw ModelFormatError.invalidQuantization(
                tensor: tensor, reason: "\(scales.count) scales but \(zeroPoints.count) zero points")
        }
        if scales.count > 1 {
            guard shape.indices.contains(dimension), shape[dimension] == scales.count else {
                throw ModelFormatError.invalidQuantization(
                    tensor: tensor, reason: "\(scales.count) scales along dimension \(dimension) of shape \(shape)")
            }
        }
        guard scales.allSatisfy({ $0.isFinite && $0 >= 0 }) else {
            throw ModelFormatError.invalidQuantization(tensor: tensor, reason: "scale is negative or not finite")
        }
        // Kernels hold zero points as Int32 and subtract them from stored values: a zero point
        // outside the element type's own range is no quantization any converter writes.
        let allowed = Self.zeroPointRange(type)
        if let bad = zeroPoints.first(where: { !allowed.contains($0) }) {
            throw ModelFormatError.invalidQuantization(
                tensor: tensor, reason: "zero point \(bad) is outside \(allowed.lowerBound)...\(allowed.upperBound), the range of \(type)")
        }
        return Quantization(scales: scales, zeroPoints: zeroPoints, quantizedDimension: dimension)
    }

    /// The zero points a tensor of `type` may carry: its own value range for 8- and 16-bit
    /// integers, Int32's for everything else (biases are int32 with zero point 0).
    static func zeroPointRange(_ type: TensorType) -> ClosedRange<Int64> {
        switch type {
        case .int8: return -128...127
        case .uint8: return 0...255
        case .int16: return -32768...32767
        case .uint16: return 0...65535
        default: return Int64(Int32.min)...Int64(Int32.max)
        }
    }

    func parseOperator(_ table: FlatTable, index: Int, codes: [OperatorCode], tensorCount: Int) throws -> OperatorInfo {
        let codeIndex = Int(try table.scalar(0, default: UInt32(0), "opcode_index"))
        guard codes.indices.contains(codeIndex) else {
            throw ModelFormatError.indexOutOfRange(what: "operator \(index) opcode", index: codeIndex, count: codes.count)
        }
        // An absent input is -1 (an optional bias); outputs are never absent.
        func indices(_ field: Int, _ name: String) throws -> [Int] {
            try (table.int32s(field, name) ?? []).map { value in
                guard value >= (name == "inputs" ? -1 : 0), Int(value) < tensorCount else {
                    throw ModelFormatError.indexOutOfRange(what: "operator \(index) \(name) tensor", index: Int(value), count: tensorCount)
                }
                return Int(value)
            }
        }
        let code = codes[codeIndex]
        let optionsType = Int(try table.scalar(3, default: UInt8(0), "builtin_options_type"))
        let options = try parseOptions(try table.table(4, "builtin_options"), type: optionsType, code: code.builtin, operatorIndex: index)
        var custom = try table.vector(5, elementSize: 1, "custom_options").map { Array(UnsafeRawBufferPointer(rebasing: reader.bytes[$0.byteRange])) }
        let largeOffset = try table.scalar(9, default: UInt64(0), "large_custom_options_offset")
        let largeSize = try table.scalar(10, default: UInt64(0), "large_custom_options_size")
        if largeOffset > 1 {
            guard largeOffset <= UInt64(reader.count), largeSize <= UInt64(reader.count) - largeOffset else {
                throw ModelFormatError.truncated(
                    what: "operator \(index) large custom options", offset: Int(clamping: largeOffset),
                    needed: Int(clamping: largeSize), fileSize: reader.count)
            }
            custom = Array(UnsafeRawBufferPointer(rebasing: reader.bytes[Int(largeOffset)..<Int(largeOffset + largeSize)]))
        }
        return OperatorInfo(
            index: index, code: code, inputs: try indices(1, "inputs"), outputs: try indices(2, "outputs"),
            options: options, customOptions: custom)
    }

    /// Union type codes of the option tables Spotter reads (the schema's `BuiltinOptions`).
    private static let expectedOptions: [BuiltinOperator: Int] = [
        .conv2D: 1, .depthwiseConv2D: 2, .averagePool2D: 5, .maxPool2D: 5, .fullyConnected: 8, .softmax: 9,
        .concatenation: 10, .add: 11, .resizeBilinear: 15, .reshape: 17, .mul: 21, .squeeze: 30,
        .resizeNearestNeighbor: 74, .stridedSlice: 32, .sub: 28, .pack: 59, .unpack: 64, .gather: 23, .mean: 27, .sum: 27,
        .depthToSpace: 94, .batchMatMul: 101,
    ]

    func parseOptions(_ table: FlatTable?, type: Int, code: BuiltinOperator, operatorIndex: Int) throws -> BuiltinOptions {
        guard let expected = Self.expectedOptions[code] else { return type == 0 ? .none : .other(typeCode: type) }
        if table != nil, type != expected {
            throw ModelFormatError.optionsTypeMismatch(operatorIndex: operatorIndex, expected: expected, found: type)
        }
        func activation(_ field: Int) throws -> FusedActivation {
            let raw = Int(try table?.scalar(field, default: Int8(0), "fused_activation_function") ?? 0)
            guard let value = FusedActivation(rawValue: raw) else {
                throw ModelFormatError.invalidValue(what: "operator \(operatorIndex) fused_activation_function", value: raw)
            }
            return value
        }
        func int(_ field: Int, _ name: String, _ fallback: Int32) throws -> Int {
            Int(try table?.scalar(field, default: fallback, name) ?? fallback)
        }
        func padding(_ field: Int) throws -> Padding {
            let raw = Int(try table?.scalar(field, default: Int8(0), "padding") ?? 0)
            guard let value = Padding(rawValue: raw) else {
                throw ModelFormatError.invalidValue(what: "operator \(operatorIndex) padding", value: raw)
            }
            return value
        }
        func positive(_ value: Int, _ name: String) throws -> Int {
            guard value >= 1 else { throw ModelFormatError.invalidValue(what: "operator \(operatorIndex) \(name)", value: value) }
            return value
        }
        func flag(_ field: Int, _ name: String) throws -> Bool { try table?.bool(field, default: false, name) ?? false }

        switch code {
        case .conv2D:
            return .conv2D(Conv2DOptions(
                padding: try padding(0), strideWidth: try positive(try int(1, "stride_w", 1), "stride_w"),
                strideHeight: try positive(try int(2, "stride_h", 1), "stride_h"), activation: try activation(3),
                dilationWidth: try positive(try int(4, "dilation_w_factor", 1), "dilation_w_factor"),
                dilationHeight: try positive(try int(5, "dilation_h_factor", 1), "dilation_h_factor")))
        case .depthwiseConv2D:
            return .depthwiseConv2D(Conv2DOptions(
                padding: try padding(0), strideWidth: try positive(try int(1, "stride_w", 1), "stride_w"),
                strideHeight: try positive(try int(2, "stride_h", 1), "stride_h"), activation: try activation(4),
                dilationWidth: try positive(try int(5, "dilation_w_factor", 1), "dilation_w_factor"),
                dilationHeight: try positive(try int(6, "dilation_h_factor", 1), "dilation_h_factor"),
                depthMultiplier: try int(3, "depth_multiplier", 1)))
        case .averagePool2D, .maxPool2D:
            return .pool2D(Pool2DOptions(
                padding: try padding(0), strideWidth: try positive(try int(1, "stride_w", 1), "stride_w"),
                strideHeight: try positive(try int(2, "stride_h", 1), "stride_h"),
                filterWidth: try positive(try int(3, "filter_width", 1), "filter_width"),
                filterHeight: try positive(try int(4, "filter_height", 1), "filter_height"), activation: try activation(5)))
        case .fullyConnected:
            return .fullyConnected(
                activation: try activation(0), keepNumDims: try flag(2, "keep_num_dims"),
                weightsFormat: Int(try table?.scalar(1, default: Int8(0), "weights_format") ?? 0))
        case .softmax:
            return .softmax(beta: try table?.float(0, default: 0, "beta") ?? 0)
        case .concatenation:
            return .concatenation(axis: try int(0, "axis", 0), activation: try activation(1))
        case .add:
            return .add(activation: try activation(0))
        case .mul:
            return .mul(activation: try activation(0))
        case .sub:
            return .sub(activation: try activation(0))
        case .reshape:
            return .reshape(newShape: try table?.int32s(0, "new_shape")?.map(Int.init))
        case .stridedSlice:
            return .stridedSlice(StridedSliceOptions(
                beginMask: try int(0, "begin_mask", 0), endMask: try int(1, "end_mask", 0), ellipsisMask: try int(2, "ellipsis_mask", 0),
                newAxisMask: try int(3, "new_axis_mask", 0), shrinkAxisMask: try int(4, "shrink_axis_mask", 0), offset: try flag(5, "offset")))
        case .squeeze:
            return .squeeze(dimensions: (try table?.int32s(0, "squeeze_dims") ?? []).map(Int.init))
        case .resizeBilinear:
            return .resizeBilinear(ResizeOptions(alignCorners: try flag(2, "align_corners"), halfPixelCenters: try flag(3, "half_pixel_centers")))
        case .resizeNearestNeighbor:
            return .resizeNearestNeighbor(ResizeOptions(alignCorners: try flag(0, "align_corners"), halfPixelCenters: try flag(1, "half_pixel_centers")))
        case .pack:
            return .pack(axis: try int(1, "axis", 0))
        case .unpack:
            return .unpack(axis: try int(1, "axis", 0))
        case .gather:
            return .gather(axis: try int(0, "axis", 0), batchDims: try int(1, "batch_dims", 0))
        case .mean, .sum:
            return .reducer(keepDims: try flag(0, "keep_dims"))
        case .depthToSpace:
            return .depthToSpace(blockSize: try positive(try int(0, "block_size", 0), "block_size"))
        case .batchMatMul:
            return .batchMatMul(adjointX: try flag(0, "adj_x"), adjointY: try flag(1, "adj_y"))
        default:
            return .other(typeCode: type)
        }
    }
}
