import TFLiteFormat

/// Checks a graph's structure before any kernel looks at it, so kernels may index tensors freely:
/// how many inputs and outputs each operator has, that an absent input (`-1`) is one the operator
/// allows, and that operators run in an order where every tensor is written once, before it is
/// read (no operator reads its own output, no cycle, no write over a constant or a graph input).
///
/// The model reader already checked that every index is `-1` or a tensor of the graph.
enum GraphValidation {
    /// How many inputs and outputs an operator takes, and which inputs may be absent.
    struct Arity {
        var inputs: ClosedRange<Int>
        var outputs: ClosedRange<Int> = 1...1
        /// Input positions that may be `-1` (an optional bias).
        var optional: Set<Int> = []
    }

    private static let many = Int.max - 1

    /// The operators Spotter has kernels for; others are refused by the kernel factories with
    /// ``InterpreterError/unsupportedOperator(name:index:inputTypes:outputTypes:)``.
    static let arities: [BuiltinOperator: Arity] = {
        var table: [BuiltinOperator: Arity] = [
            .conv2D: Arity(inputs: 2...3, optional: [2]),
            .depthwiseConv2D: Arity(inputs: 2...3, optional: [2]),
            .fullyConnected: Arity(inputs: 2...3, optional: [2]),
            .concatenation: Arity(inputs: 1...many),
            .pack: Arity(inputs: 1...many),
            .reshape: Arity(inputs: 1...2),
            .pad: Arity(inputs: 2...3),
            .stridedSlice: Arity(inputs: 4...4),
            .slice: Arity(inputs: 3...3),
            .split: Arity(inputs: 2...2, outputs: 1...many),
            .splitV: Arity(inputs: 3...3, outputs: 1...many),
            .unpack: Arity(inputs: 1...1, outputs: 1...many),
        ]
        for op: BuiltinOperator in [.add, .mul, .sub, .transpose, .resizeBilinear, .resizeNearestNeighbor, .gather, .maximum, .minimum,
                                    .prelu, .mean, .sum, .batchMatMul] {
            table[op] = Arity(inputs: 2...2)
        }
        for op: BuiltinOperator in [.averagePool2D, .maxPool2D, .squeeze, .logistic, .softmax, .relu, .relu6, .abs, .l2Normalization,
                                    .hardSwish, .quantize, .dequantize, .neg, .exp, .tanh, .cast, .depthToSpace] {
            table[op] = Arity(inputs: 1...1)
        }
        return table
    }()

    /// The custom operators with kernels, by name.
    static let customArities: [String: Arity] = [DetectionPostProcess.name: Arity(inputs: 3...3, outputs: 4...4)]

    /// - Throws: ``InterpreterError/invalidOperator(name:index:reason:)`` naming the operator and
    ///   the tensor at fault.
    static func check(_ graph: Subgraph) throws {
        let tensors = graph.tensors
        func name(_ tensor: Int) -> String { "\"\(tensors[tensor].name)\" (tensor \(tensor))" }
        // Graph inputs, constants and variables hold values before the first operator runs.
        var written = [Bool](repeating: false, count: tensors.count)
        for (index, tensor) in tensors.enumerated() where tensor.isConstant || tensor.isVariable { written[index] = true }
        for input in graph.inputs { written[input] = true }

        for op in graph.operators {
            func fail(_ reason: String) -> InterpreterError { .invalidOperator(name: op.code.name, index: op.index, reason: reason) }
            let arity = op.code.builtin == .custom ? op.code.customName.flatMap { customArities[$0] } : arities[op.code.builtin]
            if let arity {
                guard arity.inputs.contains(op.inputs.count) else {
                    throw fail("has \(op.inputs.count) inputs, expects \(describe(arity.inputs))")
                }
                guard arity.outputs.contains(op.outputs.count) else {
                    throw fail("has \(op.outputs.count) outputs, expects \(describe(arity.outputs))")
                }
            }
            for (position, tensor) in op.inputs.enumerated() {
                if tensor < 0 {
                    guard arity?.optional.contains(position) ?? false else { throw fail("input \(position) is absent (-1) but required") }
                    continue
                }
                guard written[tensor] else {
                    throw fail(op.outputs.contains(tensor)
                               ? "reads its own output \(name(tensor))"
                               : "reads \(name(tensor)) before any operator writes it (operators must run in order)")
                }
            }
            for (position, tensor) in op.outputs.enumerated() {
                guard tensor >= 0 else { throw fail("output \(position) is absent (-1)") }
                if tensors[tensor].isConstant { throw fail("writes the constant \(name(tensor))") }
                if graph.inputs.contains(tensor) { throw fail("writes the graph input \(name(tensor))") }
                guard !written[tensor] else { throw fail("writes \(name(tensor)), which an earlier operator or this one already writes") }
                written[tensor] = true
            }
        }
        for output in graph.outputs where !written[output] {
            throw InterpreterError.invalidGraph(reason: "output \(name(output)) is written by no operator")
        }
    }

    private static func describe(_ range: ClosedRange<Int>) -> String {
        range.upperBound == many ? "at least \(range.lowerBound)" : range.count == 1 ? "\(range.lowerBound)" : "\(range.lowerBound) to \(range.upperBound)"
    }
}
