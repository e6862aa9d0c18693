/// TFLite Metadata (the `TFLITE_METADATA` buffer, a FlatBuffer with identifier `M001`).
///
/// Only what Spotter uses is read: names and descriptions, input normalization and the associated
/// files (labels).
public struct ModelMetadata: Sendable, Equatable {
    public var name: String?
    public var description: String?
    public var version: String?
    public var author: String?
    public var license: String?
    public var minParserVersion: String?
    public var associatedFiles: [AssociatedFile]
    public var inputs: [TensorMetadata]
    public var outputs: [TensorMetadata]

    /// The normalization of the first input, from its own process units or the subgraph's.
    public var inputNormalization: Normalization? { inputs.first?.normalization }

    static func parse(_ reader: FlatBufferReader) throws -> ModelMetadata {
        let root = try reader.root(identifier: "M001", what: "ModelMetadata")
        var result = ModelMetadata(
            name: try root.string(0, "name"), description: try root.string(1, "description"),
            version: try root.string(2, "version"), author: try root.string(4, "author"),
            license: try root.string(5, "license"), minParserVersion: try root.string(7, "min_parser_version"),
            associatedFiles: try root.tables(6, "associated_files").map(AssociatedFile.parse),
            inputs: [], outputs: [])
        if let subgraph = try root.tables(3, "subgraph_metadata").first {
            result.inputs = try subgraph.tables(2, "input_tensor_metadata").map(TensorMetadata.parse)
            result.outputs = try subgraph.tables(3, "output_tensor_metadata").map(TensorMetadata.parse)
            result.associatedFiles += try subgraph.tables(4, "associated_files").map(AssociatedFile.parse)
            if let shared = try subgraph.tables(5, "input_process_units").compactMap(Normalization.parse).first,
               !result.inputs.isEmpty, result.inputs[0].normalization == nil {
                result.inputs[0].normalization = shared
            }
        }
        return result
    }
}

/// Mean and standard deviation to apply to float inputs: `(value - mean) / std`, per channel.
public struct Normalization: Sendable, Equatable {
    public var mean: [Float]
    public var std: [Float]

    public init(mean: [Float], std: [Float]) {
        self.mean = mean
        self.std = std
    }

    /// Reads a `ProcessUnit` table; nil unless it holds `NormalizationOptions` (union type 1).
    static func parse(_ unit: FlatTable) throws -> Normalization? {
        guard try unit.scalar(0, default: UInt8(0), "options_type") == 1,
              let options = try unit.table(1, "options") else { return nil }
        return Normalization(mean: try options.floats(0, "mean") ?? [], std: try options.floats(1, "std") ?? [])
    }
}

public struct TensorMetadata: Sendable, Equatable {
    public var name: String?
    public var description: String?
    public var normalization: Normalization?
    public var associatedFiles: [AssociatedFile]

    static func parse(_ table: FlatTable) throws -> TensorMetadata {
        TensorMetadata(
            name: try table.string(0, "name"), description: try table.string(1, "description"),
            normalization: try table.tables(4, "process_units").compactMap(Normalization.parse).first,
            associatedFiles: try table.tables(6, "associated_files").map(AssociatedFile.parse))
    }
}

public struct AssociatedFile: Sendable, Equatable {
    public enum Kind: Int, Sendable {
        case unknown = 0, descriptions = 1, tensorAxisLabels = 2, tensorValueLabels = 3
        case tensorAxisScoreCalibration = 4, vocabulary = 5, scannIndexFile = 6
    }

    public var name: String
    public var description: String?
    public var type: Kind

    static func parse(_ table: FlatTable) throws -> AssociatedFile {
        let raw = Int(try table.scalar(2, default: Int8(0), "type"))
        return AssociatedFile(
            name: try table.string(0, "name") ?? "", description: try table.string(1, "description"),
            type: Kind(rawValue: raw) ?? .unknown)
    }
}
