import TFLiteFormat

/// Why a model cannot be prepared or run.
public enum InterpreterError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No kernel exists for this operator with these tensor types.
    case unsupportedOperator(name: String, index: Int, inputTypes: [String], outputTypes: [String])
    /// The operator's tensors or options do not fit together (shapes, ranks, quantization).
    case invalidOperator(name: String, index: Int, reason: String)
    /// The tensors of the graph need more memory than the configured limit.
    case arenaTooLarge(bytes: Int, limit: Int)
    /// An input or output index beyond the graph's inputs or outputs.
    case indexOutOfRange(what: String, index: Int, count: Int)
    /// Data given for an input does not have the input's byte size.
    case inputSizeMismatch(input: Int, expected: Int, actual: Int)
    /// Data given for an input is of another element type.
    case inputTypeMismatch(input: Int, expected: String, actual: String)
    /// A tensor was asked for that is not kept after preparing: an intermediate whose memory is
    /// reused, or a constant only a kernel's packed copy holds; neither was preserved.
    case tensorNotPreserved(name: String)
    /// No tensor of that name exists.
    case unknownTensor(name: String)
    /// The requested backend is not available in this build or on this machine.
    case backendUnavailable(name: String, reason: String)
    /// A backend library call failed (`status` is the library's own code).
    case backendFailed(backend: String, call: String, operatorIndex: Int, status: Int)
    /// A constant stored sparse; no kernel reads sparse constants yet.
    case sparseTensor(name: String)
    /// The graph as a whole is inconsistent (an output nothing writes, aliases that form a cycle).
    case invalidGraph(reason: String)

    public var description: String {
        switch self {
        case .unsupportedOperator(let name, let index, let inputs, let outputs):
            return "operator \(index) \(name) with inputs [\(inputs.joined(separator: ", "))] and outputs [\(outputs.joined(separator: ", "))] is not supported"
        case .invalidOperator(let name, let index, let reason):
            return "operator \(index) \(name): \(reason)"
        case .arenaTooLarge(let bytes, let limit):
            return "the model's tensors need \(bytes) bytes, above the limit of \(limit) bytes"
        case .indexOutOfRange(let what, let index, let count):
            return "\(what) index \(index) is out of range (the model has \(count))"
        case .inputSizeMismatch(let input, let expected, let actual):
            return "input \(input) needs \(expected) bytes, got \(actual)"
        case .inputTypeMismatch(let input, let expected, let actual):
            return "input \(input) is \(expected), got \(actual)"
        case .tensorNotPreserved(let name):
            return "tensor \"\(name)\" is not kept after preparing (an intermediate whose memory is reused, or weights only a kernel holds); ask for it in Options.preservedTensors"
        case .unknownTensor(let name):
            return "no tensor named \"\(name)\""
        case .backendUnavailable(let name, let reason):
            return "backend \(name) is not available: \(reason)"
        case .invalidGraph(let reason):
            return "the model's graph is invalid: \(reason)"
        case .sparseTensor(let name):
            return "tensor \"\(name)\" is stored sparse (TFLite sparsity), which Spotter does not support yet"
        case .backendFailed(let backend, let call, let index, let status):
            return "\(backend): \(call) failed with status \(status) for operator \(index)"
        }
    }
}
