import TFLiteFormat

/// Addresses of every tensor, fixed once memory is planned.
struct TensorMemory {
    let pointers: UnsafeMutablePointer<UnsafeMutableRawPointer?>

    func raw(_ tensor: Int) -> UnsafeMutableRawPointer { pointers[tensor]! }
    func typed<T>(_ tensor: Int, _: T.Type) -> UnsafeMutablePointer<T> { pointers[tensor]!.assumingMemoryBound(to: T.self) }
}

/// A prepared operator. Kernels own everything they computed at load (packed weights, multipliers,
/// lookup tables) and allocate nothing when they run.
protocol Kernel: AnyObject {
    /// Called once after memory planning, with the addresses `run` will see.
    func bind(_ memory: TensorMemory) throws
    func run(_ memory: TensorMemory)
    /// Whether `run` reads constant input tensors from memory; kernels that copied or packed their
    /// constants at load say no, and the interpreter keeps no copy of those.
    var readsConstantInputs: Bool { get }
}

extension Kernel {
    func bind(_ memory: TensorMemory) throws {}
    var readsConstantInputs: Bool { true }
}

/// An operator whose work another kernel does (a PAD or CONCATENATION a convolution reads in place,
/// a SiLU's LOGISTIC, a RELU folded into the ADD before it...): running it does nothing. `label`
/// names that in profiles (``Interpreter/OperatorTiming/backend``).
final class DoneElsewhere: Kernel {
    let label: String
    init(_ label: String) { self.label = label }
    var readsConstantInputs: Bool { false }
    func run(_ memory: TensorMemory) {}
}

/// What an operator sees while it is prepared: tensor descriptions, resolved shapes, constants.
final class PrepareContext {
    let model: Model
    let graph: Subgraph
    private(set) var shapes: [[Int]]
    /// Output tensor -> input tensor whose storage it shares (RESHAPE, SQUEEZE).
    private(set) var aliases: [Int: Int] = [:]
    var op: OperatorInfo!
    /// True when kernels are made only to check the model and learn its shapes
    /// (``Interpreter/check(_:)``): they skip work only running needs (converting weights,
    /// broadcast tables) and are never run.
    let isCheckingOnly: Bool

    /// The model's outputs and the tensors the caller asked to keep (``Interpreter/Options/preservedTensors``).
    private let observed: Set<Int>

    /// ``Interpreter/Options/floatPrecision``.
    let floatPrecision: Interpreter.Options.FloatPrecision

    init(model: Model, graph: Subgraph, isCheckingOnly: Bool = false, preserved: Interpreter.Options.Preserved = .none,
         floatPrecision: Interpreter.Options.FloatPrecision = .float32) {
        self.model = model
        self.floatPrecision = floatPrecision
        self.graph = graph
        self.shapes = graph.tensors.map(\.shape)
        self.isCheckingOnly = isCheckingOnly
        switch preserved {
        case .none: observed = Set(graph.outputs)
        case .all: observed = Set(graph.tensors.indices)
        case .tensors(let kept): observed = Set(graph.outputs).union(kept)
        }
    }

    /// Whether anyone reads `tensor` after a run (a model output, or a preserved tensor): fused
    /// kernels that leave an intermediate unwritten, or hold another value in it, stand down then.
    func isObservable(_ tensor: Int) -> Bool { observed.contains(tensor) }

    /// Throws unless `tensor` is a constant (weights a checking-only kernel does not read).
    func requireConstant(_ tensor: Int) throws {
        guard info(tensor).isConstant else { throw fail("tensor \"\(info(tensor).name)\" must be constant") }
    }

    func info(_ tensor: Int) -> TensorInfo { graph.tensors[tensor] }
    func shape(_ tensor: Int) -> [Int] { shapes[tensor] }
    func type(_ tensor: Int) -> TensorType { graph.tensors[tensor].type }
    func quantization(_ tensor: Int) -> Quantization? { graph.tensors[tensor].quantization }
    func isConstant(_ tensor: Int) -> Bool { graph.tensors[tensor].isConstant }

    var name: String { op.code.name }
    func input(_ i: Int) -> Int { op.inputs[i] }
    func output(_ i: Int) -> Int { op.outputs[i] }
    func hasInput(_ i: Int) -> Bool { op.inputs.indices.contains(i) && op.inputs[i] >= 0 }

    func setShape(_ tensor: Int, _ shape: [Int]) throws {
        // Shapes computed from a file's constants (paddings, sizes) can be anything: each must be a
        // real shape within the reader's element limit before it is multiplied out.
        var elements = 1
        for dimension in shape {
            let (product, overflow) = elements.multipliedReportingOverflow(by: dimension)
            guard dimension >= 0, !overflow, product <= Model.maxTensorElements else {
                throw fail("output \"\(graph.tensors[tensor].name)\" computes to \(shape), not a shape Spotter can hold")
            }
            elements = product
        }
        let declared = graph.tensors[tensor].shape
        if !declared.isEmpty, declared.reduce(1, *) != elements {
            throw fail("output \"\(graph.tensors[tensor].name)\" is declared \(declared) but computes to \(shape)")
        }
        shapes[tensor] = shape
    }

    func alias(output: Int, to input: Int) { aliases[output] = input }

    /// Tensors a kernel reads at a later operator than the graph's (tensor -> that operator's
    /// index), which ``MemoryPlan`` keeps alive until then.
    private(set) var lateReads: [Int: Int] = [:]

    func read(_ tensor: Int, lateAt index: Int) { lateReads[tensor] = max(lateReads[tensor] ?? index, index) }

    /// Operators whose work a kernel prepared before them already did (a RELU folded into the ADD
    /// it follows): they are prepared as no-ops whose output shares their input's storage.
    var absorbed: Set<Int> = []

    /// The PReLU patterns found so far, by the index of each of their operators (``PReLU``).
    var prelus: [Int: PReLU.Pattern] = [:]

    /// ADDs of a zero-padded tensor whose PAD was claimed (``PaddedAdd``), by the ADD's index.
    var paddedAdds: [Int: PaddedAdd.Pattern] = [:]

    /// MULs of a SiLU whose table the convolution writing its input applies (``SiLU/fusing(into:_:)``):
    /// the MUL's index -> that input.
    var foldedSiLUs: [Int: Int] = [:]

    /// 1x1 convolutions that read a CONCATENATION's inputs in place (``VNNIConvolution/FoldedConcatenation``), by index.
    var foldedConcatenations: [Int: VNNIConvolution.FoldedConcatenation] = [:]

    /// Convolutions that read a PAD's input with its padding (``VNNIConvolution/FoldedPad``), by index.
    var foldedPads: [Int: VNNIConvolution.FoldedPad] = [:]

    /// The constant int32 or int64 input `index` as integers (permutations, shapes, paddings, axes).
    func integers(input index: Int) throws -> [Int] {
        let tensor = input(index)
        return type(tensor) == .int64 ? try constant(tensor, as: Int64.self).map(Int.init) : try constant(tensor, as: Int32.self).map(Int.init)
    }

    func constant<T: BitwiseCopyable>(_ tensor: Int, as type: T.Type) throws -> [T] {
        guard let values = model.constantValues(of: graph.tensors[tensor], as: type) else {
            throw fail("tensor \"\(graph.tensors[tensor].name)\" must be constant")
        }
        return values
    }

    /// Float weights of a constant: float32 as stored, or int8/uint8 dequantized with their
    /// per-tensor or per-channel scales (the weights of hybrid models, whose activations are float).
    /// Checked but empty when the context only checks.
    func floatWeights(_ tensor: Int) throws -> [Float] {
        try requireConstant(tensor)
        switch type(tensor) {
        case .float32:
            return isCheckingOnly ? [] : try constant(tensor, as: Float.self)
        case .int8, .uint8:
            guard let q = quantization(tensor), !q.scales.isEmpty else { throw fail("weights \"\(info(tensor).name)\" have no quantization") }
            let dims = shape(tensor)
            guard q.scales.count == 1 || (q.quantizedDimension < dims.count && dims[q.quantizedDimension] == q.scales.count) else {
                throw fail("weights \"\(info(tensor).name)\" have \(q.scales.count) scales for shape \(dims)")
            }
            guard !isCheckingOnly else { return [] }
            let values: [Float] = type(tensor) == .int8 ? try constant(tensor, as: Int8.self).map(Float.init)
                                                          : try constant(tensor, as: UInt8.self).map(Float.init)
            // Elements along the quantized axis repeat every `inner` values.
            let inner = dims.dropFirst(q.quantizedDimension + 1).reduce(1, *)
            let zeroPoints = q.zeroPoints.map(Float.init)
            return values.enumerated().map { index, value in
                let channel = q.scales.count == 1 ? 0 : (index / inner) % q.scales.count
                let zero = zeroPoints.isEmpty ? 0 : zeroPoints[min(channel, zeroPoints.count - 1)]
                return (value - zero) * q.scales[channel]
            }
        default:
            throw unsupported()
        }
    }

    /// Hybrid weights: float activations with int8/uint8 constant weights.
    func isHybrid(input: Int, weights: Int) -> Bool {
        type(input) == .float32 && [.int8, .uint8].contains(type(weights)) && isConstant(weights)
    }

    /// Whether LiteRT runs this hybrid convolution on its input quantized at every run
    /// (``DynamicQuantization``): int8 weights with zero points 0 and one scale, or one per channel.
    func quantizesHybridInput(input: Int, weights: Int, channels: Int) -> Bool {
        guard isHybrid(input: input, weights: weights), type(weights) == .int8, let q = quantization(weights) else { return false }
        return (q.scales.count == 1 || q.scales.count == channels) && q.zeroPoints.allSatisfy { $0 == 0 }
    }

    func fail(_ reason: String) -> InterpreterError {
        .invalidOperator(name: op.code.name, index: op.index, reason: reason)
    }

    func unsupported() -> InterpreterError {
        .unsupportedOperator(
            name: op.code.name, index: op.index,
            inputTypes: op.inputs.map { $0 < 0 ? "none" : graph.tensors[$0].type.description },
            outputTypes: op.outputs.map { graph.tensors[$0].type.description })
    }

    /// The per-tensor quantization of `tensor`, or an error naming it.
    func quantized(_ tensor: Int) throws -> (scale: Float, zeroPoint: Int32) {
        guard let q = quantization(tensor), q.scales.count == 1 else {
            throw fail("tensor \"\(info(tensor).name)\" needs per-tensor quantization")
        }
        guard q.scale > 0 else { throw fail("tensor \"\(info(tensor).name)\" has scale 0") }
        return (q.scale, Int32(q.zeroPoint))
    }

    func requireRank(_ tensor: Int, _ rank: Int) throws {
        guard shapes[tensor].count == rank else {
            throw fail("tensor \"\(info(tensor).name)\" has shape \(shapes[tensor]), expected rank \(rank)")
        }
    }
}
