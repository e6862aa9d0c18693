/// Why a `.tflite` file (or a part of it) could not be read.
///
/// Every case says what was being read and where, so a user can tell a truncated download from a
/// hostile file. Offsets are absolute byte offsets in the model file.
public enum ModelFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file is shorter than the smallest possible FlatBuffer.
    case fileTooSmall(size: Int)
    /// The four identifier bytes at offset 4 are not the expected ones (`TFL3` for a model).
    case wrongFileIdentifier(found: String, expected: String)
    /// A read of `needed` bytes at `offset` would run past the end of the data.
    case truncated(what: String, offset: Int, needed: Int, fileSize: Int)
    /// A table's vtable is malformed (odd size, smaller than its header, or outside the file).
    case invalidVTable(what: String, offset: Int)
    /// A vector claims more elements than the bytes after it can hold.
    case vectorTooLong(what: String, offset: Int, count: Int, fileSize: Int)
    /// An index stored in the file (tensor, buffer, operator code, subgraph) is out of range.
    case indexOutOfRange(what: String, index: Int, count: Int)
    /// A required field is absent.
    case missingField(what: String)
    /// A field holds a value the schema does not allow.
    case invalidValue(what: String, value: Int)
    /// A tensor's element type is not one Spotter knows.
    case unsupportedTensorType(tensor: String, code: Int)
    /// A tensor's shape has a negative dimension or its byte size overflows.
    case invalidShape(tensor: String, shape: [Int])
    /// A tensor claims more elements than Spotter will ever allocate.
    case tensorTooLarge(tensor: String, elements: Int, limit: Int)
    /// A constant tensor's buffer does not hold exactly the bytes its shape and type need.
    case bufferSizeMismatch(tensor: String, expected: Int, actual: Int)
    /// A buffer stored after the FlatBuffer (offset/size form) lies outside the file.
    case externalBufferOutOfRange(buffer: Int, offset: Int, size: Int, fileSize: Int)
    /// Quantization parameters are inconsistent (scale and zero-point counts, quantized dimension).
    case invalidQuantization(tensor: String, reason: String)
    /// An operator's builtin options are of a different type than its operator needs.
    case optionsTypeMismatch(operatorIndex: Int, expected: Int, found: Int)
    /// FlexBuffer data (custom operator options) is malformed.
    case invalidFlexBuffer(reason: String, offset: Int)
    /// Nesting deeper than the reader allows (guards against cyclic or hostile data).
    case nestingTooDeep(what: String, limit: Int)
    /// The zip archive appended to the model (TFLite Metadata associated files) is malformed.
    case invalidZip(reason: String, offset: Int)
    /// An associated file in the zip uses a compression method Spotter cannot read.
    case unsupportedZipCompression(file: String, method: Int)
    /// The model has no subgraph to run.
    case noSubgraph

    public var description: String {
        switch self {
        case .fileTooSmall(let size):
            return "file is \(size) bytes, too small to be a TensorFlow Lite model"
        case .wrongFileIdentifier(let found, let expected):
            return "file identifier is \"\(found)\", expected \"\(expected)\": this is not a TensorFlow Lite model"
        case .truncated(let what, let offset, let needed, let fileSize):
            return "truncated: reading \(what) needs \(needed) bytes at offset \(offset), but the data is \(fileSize) bytes (is the file complete?)"
        case .invalidVTable(let what, let offset):
            return "malformed vtable for \(what) at offset \(offset)"
        case .vectorTooLong(let what, let offset, let count, let fileSize):
            return "\(what) at offset \(offset) claims \(count) elements, more than the \(fileSize)-byte data can hold"
        case .indexOutOfRange(let what, let index, let count):
            return "\(what) index \(index) is out of range (there are \(count))"
        case .missingField(let what):
            return "required field missing: \(what)"
        case .invalidValue(let what, let value):
            return "invalid value \(value) for \(what)"
        case .unsupportedTensorType(let tensor, let code):
            return "tensor \"\(tensor)\" has unknown element type code \(code)"
        case .invalidShape(let tensor, let shape):
            return "tensor \"\(tensor)\" has invalid shape \(shape)"
        case .tensorTooLarge(let tensor, let elements, let limit):
            return "tensor \"\(tensor)\" claims \(elements) elements, above the limit of \(limit)"
        case .bufferSizeMismatch(let tensor, let expected, let actual):
            return "constant tensor \"\(tensor)\" needs \(expected) bytes but its buffer holds \(actual)"
        case .externalBufferOutOfRange(let buffer, let offset, let size, let fileSize):
            return "buffer \(buffer) claims \(size) bytes at offset \(offset), outside the \(fileSize)-byte file"
        case .invalidQuantization(let tensor, let reason):
            return "tensor \"\(tensor)\" has invalid quantization: \(reason)"
        case .optionsTypeMismatch(let index, let expected, let found):
            return "operator \(index) carries builtin options of type \(found), expected \(expected)"
        case .invalidFlexBuffer(let reason, let offset):
            return "malformed FlexBuffer custom options at offset \(offset): \(reason)"
        case .nestingTooDeep(let what, let limit):
            return "\(what) nests deeper than \(limit) levels"
        case .invalidZip(let reason, let offset):
            return "malformed zip of associated files at offset \(offset): \(reason)"
        case .unsupportedZipCompression(let file, let method):
            return "associated file \"\(file)\" uses zip compression method \(method); only stored (0) files are read"
        case .noSubgraph:
            return "the model has no subgraph"
        }
    }
}
