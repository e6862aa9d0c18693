import TFLiteFormat

/// Static placement of every non-constant tensor in one arena.
///
/// A tensor lives from the operator that writes it (or the start, for graph inputs) to the last
/// operator that reads it (or the end, for graph outputs and preserved tensors). Tensors are placed
/// largest first at the lowest offset that overlaps no live neighbour, as TFLite's greedy-by-size
/// planner does. Aliased tensors (RESHAPE, SQUEEZE outputs) share their input's placement. A
/// kernel may read a tensor later than the graph says (`lateReads`: a convolution reading the
/// inputs of a CONCATENATION folded into it), which keeps the tensor alive until then.
struct MemoryPlan {
    static let alignment = 64

    var offsets: [Int?]
    var arenaSize = 0
    /// Whether a tensor's contents stay valid after `invoke()`.
    var readable: [Bool]

    init(graph: Subgraph, shapes: [[Int]], aliases: [Int: Int], lateReads: [Int: Int] = [:], preserved: Interpreter.Options.Preserved) throws {
        let count = graph.tensors.count
        let end = graph.operators.count
        offsets = Array(repeating: nil, count: count)
        readable = graph.tensors.map(\.isConstant)

        // Aliases point from an operator's output to an earlier tensor (GraphValidation checked the
        // order), so a chain is never longer than the graph; a longer one is a cycle.
        func root(_ tensor: Int) throws -> Int {
            var current = tensor
            var steps = 0
            while let next = aliases[current] {
                steps += 1
                guard steps <= count else { throw InterpreterError.invalidGraph(reason: "tensor \(tensor)'s storage aliases form a cycle") }
                current = next
            }
            return current
        }
        var first = Array(repeating: Int.max, count: count)
        var last = Array(repeating: Int.min, count: count)
        func use(_ tensor: Int, at time: Int) throws {
            let r = try root(tensor)
            first[r] = min(first[r], time)
            last[r] = max(last[r], time)
        }
        var keep = Set(graph.inputs + graph.outputs)
        switch preserved {
        case .none: break
        case .all: keep.formUnion(0..<count)
        case .tensors(let set): keep.formUnion(set)
        }
        for input in graph.inputs { try use(input, at: -1) }
        for (time, op) in graph.operators.enumerated() {
            for tensor in op.inputs where tensor >= 0 && !graph.tensors[tensor].isConstant { try use(tensor, at: time) }
            for tensor in op.outputs { try use(tensor, at: time) }
        }
        for (tensor, time) in lateReads { try use(tensor, at: time) }
        for tensor in keep where !graph.tensors[tensor].isConstant {
            try use(tensor, at: end)
            readable[tensor] = true
        }

        func size(_ tensor: Int) -> Int {
            let bytes = shapes[tensor].reduce(1, *) * (graph.tensors[tensor].type.byteSize ?? 0)
            return (bytes + Self.alignment - 1) / Self.alignment * Self.alignment
        }
        let roots = (0..<count).filter { aliases[$0] == nil && !graph.tensors[$0].isConstant && first[$0] != Int.max }
        let order = roots.sorted { size($0) != size($1) ? size($0) > size($1) : $0 < $1 }
        var placed: [(offset: Int, size: Int, first: Int, last: Int)] = []
        for tensor in order {
            let bytes = size(tensor)
            let neighbours = placed
                .filter { $0.first <= last[tensor] && first[tensor] <= $0.last }
                .sorted { $0.offset < $1.offset }
            var offset = 0
            for other in neighbours where offset + bytes > other.offset {
                offset = max(offset, other.offset + other.size)
            }
            placed.append((offset, bytes, first[tensor], last[tensor]))
            offsets[tensor] = offset
            arenaSize = max(arenaSize, offset + bytes)
        }
        for tensor in 0..<count where aliases[tensor] != nil {
            let shared = try root(tensor)
            offsets[tensor] = offsets[shared]
            // An alias larger than the storage it shares (a PAD whose padded copy is never made, as
            // ``PaddedAdd`` and ``VNNIConvolution/FoldedPad`` arrange) has no bytes of its own to read.
            if size(tensor) > size(shared) { readable[tensor] = false }
        }
    }
}
