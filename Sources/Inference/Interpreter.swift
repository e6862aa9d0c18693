import Foundation
import TFLiteFormat

/// Runs a TensorFlow Lite model.
///
/// Loading prepares every operator (kernels, packed weights, quantization multipliers) and plans
/// one arena in which tensors whose lifetimes do not overlap share memory; `invoke()` then runs the
/// operators without allocating.
///
/// ```swift
/// let interpreter = try Interpreter(model: try Model(contentsOf: url))
/// try interpreter.copy(pixels, toInputAt: 0)
/// try interpreter.invoke()
/// let scores = try interpreter.output(at: 2).values(as: Float.self)
/// ```
///
/// Not thread-safe: use one interpreter from one thread at a time (or behind an actor).
public final class Interpreter {
    /// How an interpreter is built.
    public struct Options: Sendable {
        /// Which kernels run the operators.
        public enum Backend: String, Sendable, CaseIterable {
            /// Pure-Swift kernels that reproduce TensorFlow Lite's reference integer arithmetic exactly.
            case reference
            /// XNNPACK's kernels (Debian's libxnnpack), reference kernels for the operators it lacks.
            case xnnpack
        }

        /// The arithmetic of float32 convolutions (CONV_2D, and hybrid ones whose 8-bit weights
        /// are dequantized at load).
        public enum FloatPrecision: String, Sendable, CaseIterable {
            /// float32 products and sums: outputs agree with LiteRT's to float rounding.
            case float32
            /// Inputs and weights rounded to bfloat16 (8 significant bits), products summed in
            /// float32, on CPUs with AVX-512 BF16 (elsewhere float32): about twice the products a
            /// cycle, as OpenVINO's default on such CPUs, and outputs that differ from LiteRT's by
            /// about the rounding (BlazeFace's scores by 0.002, its boxes by 0.5 px). Layers
            /// of at most 16 output channels stay in float32 (rounding their inputs costs more than
            /// it saves).
            case bfloat16
        }

        /// Tensors whose memory is never reused, so they can be read after `invoke()`.
        public enum Preserved: Sendable, Equatable {
            case none
            case all
            case tensors(Set<Int>)
        }

        /// Threads for the backend's kernels, at most ``Processors/available`` (more only wait for
        /// each other, so larger values are lowered to it). Default: ``Processors/available``.
        public var threadCount: Int
        /// With more than one thread, measure now and then whether the pool or the calling thread
        /// alone is faster and use that (see ``ThreadChoice``): when another program keeps a core
        /// busy, one thread is several times faster than a pool waiting for the busy core.
        /// Default true; false always uses the pool.
        public var adaptsThreadsToLoad = true
        /// Default: `.xnnpack`.
        public var backend: Backend
        /// Default: `.float32`. The reference backend is always float32.
        public var floatPrecision: FloatPrecision = .float32
        /// Default: `.none` (only inputs, outputs and constants can be read). A preserved tensor
        /// holds its own value: the fast path's fusions that would leave it unwritten, or write
        /// another value into it (a SiLU's sigmoid, a sum a RELU is folded into), stand down for it,
        /// so `.all` runs every operator on its own.
        public var preservedTensors: Preserved
        /// Upper bound on the planned arena, a guard against hostile models. Default: 4 GiB.
        public var maxArenaBytes: Int
        /// Let the backend's worker threads sleep after each `invoke()` instead of spinning for the
        /// next job: about 0.5 ms more latency, but the cores are free for other threads between
        /// invokes (decoding and encoding in a video pipeline). Default false.
        public var parksThreadsAfterInvoke = false

        public init(
            threadCount: Int = Processors.available, backend: Backend = .xnnpack,
            preservedTensors: Preserved = .none, maxArenaBytes: Int = 4 << 30
        ) {
            self.threadCount = threadCount
            self.backend = backend
            self.preservedTensors = preservedTensors
            self.maxArenaBytes = maxArenaBytes
        }
    }

    public let options: Options
    private let graph: Subgraph
    private let shapes: [[Int]]
    private let kernels: [Kernel]
    private let arena: UnsafeMutableRawPointer
    private let pointers: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let readable: [Bool]
    private let pool: ThreadPool?
    /// Whether `pool` belongs to a ``SharedThreads``.
    private let sharesThreads: Bool
    /// Bytes of the planned arena.
    public let arenaByteCount: Int

    /// Prepares `model` for running.
    ///
    /// - Throws: ``InterpreterError/unsupportedOperator(name:index:inputTypes:outputTypes:)`` for an
    ///   operator no kernel runs, ``InterpreterError/invalidOperator(name:index:reason:)`` for
    ///   inconsistent tensors, ``InterpreterError/arenaTooLarge(bytes:limit:)``.
    /// - Parameter threads: workers shared with other interpreters run in turn; nil: the
    ///   interpreter's own `options.threadCount` threads.
    public init(model: Model, options: Options = Options(), threads: SharedThreads? = nil) throws {
        // The model's bytes are not kept: once the kernels hold their weights, only the constants
        // read at run time (or preserved for `tensor(at:)`) are copied out of it.
        let model = model.foldingFloat16Constants()
        self.options = options
        let graph = model.subgraph
        self.graph = graph

        if let sparse = graph.tensors.first(where: \.isSparse) { throw InterpreterError.sparseTensor(name: sparse.name) }
        try GraphValidation.check(graph)
        let context = PrepareContext(model: model, graph: graph, preserved: options.preservedTensors, floatPrecision: options.floatPrecision)
        var kernels: [Kernel] = []
        var pool: ThreadPool?
        if options.backend == .xnnpack {
            try XNNPACK.initialize()
            pool = threads?.pool ?? ThreadPool(threads: Self.threads(for: options))
        }
        for op in graph.operators {
            context.op = op
            if let pool, let kernel = try Self.xnnpackKernel(context, pool: pool) {
                kernels.append(kernel)
            } else {
                kernels.append(try ReferenceKernels.make(context))
            }
        }
        self.kernels = kernels
        self.pool = pool
        sharesThreads = threads != nil && pool != nil
        self.shapes = context.shapes

        let plan = try MemoryPlan(graph: graph, shapes: context.shapes, aliases: context.aliases, lateReads: context.lateReads,
                                  preserved: options.preservedTensors)
        guard plan.arenaSize <= options.maxArenaBytes else {
            throw InterpreterError.arenaTooLarge(bytes: plan.arenaSize, limit: options.maxArenaBytes)
        }
        arenaByteCount = plan.arenaSize
        arena = UnsafeMutableRawPointer.allocate(byteCount: max(plan.arenaSize, 64), alignment: 64)
        arena.initializeMemory(as: UInt8.self, repeating: 0, count: max(plan.arenaSize, 64))
        pointers = .allocate(capacity: graph.tensors.count)
        pointers.initialize(repeating: nil, count: graph.tensors.count)
        // Graph outputs that are constants (a folded DEQUANTIZE) are read from the store too.
        var needed = Set(graph.outputs.filter { graph.tensors[$0].isConstant })
        switch options.preservedTensors {
        case .none: break
        case .all: needed.formUnion(graph.tensors.indices.filter { graph.tensors[$0].isConstant })
        case .tensors(let kept): needed.formUnion(kept.filter { graph.tensors.indices.contains($0) && graph.tensors[$0].isConstant })
        }
        for (op, kernel) in zip(graph.operators, kernels) where kernel.readsConstantInputs {
            needed.formUnion(op.inputs.filter { $0 >= 0 && graph.tensors[$0].isConstant })
        }
        constants = ConstantStore(model: model, graph: graph, tensors: needed)
        for (index, tensor) in graph.tensors.enumerated() {
            if tensor.isConstant {
                // Nil for constants no kernel reads at run time and nobody asked to preserve.
                pointers[index] = constants.pointer(index)
            } else if let offset = plan.offsets[index] {
                pointers[index] = arena + offset
            }
        }
        readable = plan.readable
        let memory = TensorMemory(pointers: pointers)
        for kernel in kernels { try kernel.bind(memory) }
    }

    private let constants: ConstantStore

    /// The XNNPACK backend's kernel for the context's operator, or nil to run the reference kernel:
    /// also when XNNPACK refuses to create its operator for these parameters (scales outside its
    /// range, for example), so that what `inspect` calls runnable runs on both backends.
    private static func xnnpackKernel(_ context: PrepareContext, pool: ThreadPool) throws -> Kernel? {
        do {
            return try XNNPACKKernels.make(context, pool: pool)
        } catch InterpreterError.backendFailed(_, let call, _, _) where call.hasPrefix("xnn_create_") {
            return nil
        }
    }

    /// Checks that every operator of `model` has a reference kernel that accepts its tensors and
    /// returns every tensor's resolved shape, without converting weights or allocating memory:
    /// what `spotter inspect` needs, in a fraction of the time preparing an interpreter takes.
    ///
    /// - Throws: the errors ``init(model:options:)`` throws for the reference backend.
    public static func check(_ model: Model, maxArenaBytes: Int = Options().maxArenaBytes) throws -> [[Int]] {
        let model = model.foldingFloat16Constants()
        let graph = model.subgraph
        if let sparse = graph.tensors.first(where: \.isSparse) { throw InterpreterError.sparseTensor(name: sparse.name) }
        try GraphValidation.check(graph)
        let context = PrepareContext(model: model, graph: graph, isCheckingOnly: true)
        for op in graph.operators {
            context.op = op
            _ = try ReferenceKernels.make(context)
        }
        let plan = try MemoryPlan(graph: graph, shapes: context.shapes, aliases: context.aliases, preserved: .none)
        guard plan.arenaSize <= maxArenaBytes else { throw InterpreterError.arenaTooLarge(bytes: plan.arenaSize, limit: maxArenaBytes) }
        return context.shapes
    }

    deinit {
        arena.deallocate()
        pointers.deallocate()
    }

    /// The threads `options` give: `threadCount` between 1 and ``Processors/available``; 1 for the
    /// single-threaded reference backend.
    public static func threads(for options: Options) -> Int {
        options.backend == .reference ? 1 : min(max(1, options.threadCount), Processors.available)
    }

    /// Threads the kernels run on.
    public var threadCount: Int { pool?.threadCount ?? 1 }

    private var threadChoice = ThreadChoice()

    public var inputCount: Int { graph.inputs.count }
    public var outputCount: Int { graph.outputs.count }

    /// Runs the model on the current input contents.
    public func invoke() throws {
        let memory = TensorMemory(pointers: pointers)
        // Shared threads are chosen by their owner (``SharedThreads/begin()``).
        if let pool, pool.handle != nil, options.adaptsThreadsToLoad, !sharesThreads {
            pool.active = threadChoice.startInvoke(at: .now) ? pool.handle : nil
        }
        for kernel in kernels { kernel.run(memory) }
        // Parking is a job for the workers too; on the calling thread alone they are left to fall
        // asleep by themselves (waiting for a descheduled worker is what single-threading avoids).
        if options.parksThreadsAfterInvoke, let pool, pool.active != nil { pool.park() }
    }

    /// Time spent in one operator, from ``profile(runs:)``.
    public struct OperatorTiming: Sendable {
        public var index: Int
        public var name: String
        /// Which kernels ran it: `xnnpack`, `vnni` (Spotter's AVX-512 VNNI convolution), `avx2`
        /// (Spotter's float and 8-bit convolutions), `silu` (8-bit `x * LOGISTIC(x)` in one table),
        /// `pooled` (a reference kernel's rows split across the threads), `prelu` (a PReLU's six
        /// operators computed in one pass at its ADD), `folded` (a RELU the
        /// operator before it applied), `folded into its convolution` (a PAD the VNNI convolution
        /// after it reads through) or `reference`.
        public var backend: String
        public var medianMilliseconds: Double
    }

    /// Invokes `runs` times, timing every operator separately; returns each operator's median.
    public func profile(runs: Int) throws -> [OperatorTiming] {
        let memory = TensorMemory(pointers: pointers)
        let clock = ContinuousClock()
        var samples = Array(repeating: [Double](), count: kernels.count)
        for _ in 0..<max(1, runs) {
            for (index, kernel) in kernels.enumerated() {
                let elapsed = clock.measure { kernel.run(memory) }
                samples[index].append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
            }
        }
        return samples.enumerated().map { index, times in
            let sorted = times.sorted()
            return OperatorTiming(
                index: index, name: graph.operators[index].code.name,
                backend: Self.backend(of: kernels[index]), medianMilliseconds: sorted[sorted.count / 2])
        }
    }

    /// What ``OperatorTiming/backend`` says runs an operator.
    private static func backend(of kernel: Kernel) -> String {
        switch kernel {
        case is XNNPACKKernel: "xnnpack"
        case is VNNIConvolution: "vnni"
        case let convolution as AVX2Convolution: convolution.roundsToBFloat16 ? "bf16" : "avx2"
        case is AVX2QuantizedConvolution: "avx2"
        case let table as ByteTable: table.label
        case is SiLU.FloatPass: "silu"
        case let elsewhere as DoneElsewhere: elsewhere.label
        case let pooled as PooledRows: pooled.kernel is PReLU ? "prelu" : pooled.kernel is PaddedAdd ? "padded add" : "pooled"
        case is GlobalDepthwise: "global"
        case is AVX512Depthwise: "avx512"
        default: "reference"
        }
    }

    /// Copies `data` into input `index`; it must hold exactly the input's bytes.
    ///
    /// - Throws: ``InterpreterError/indexOutOfRange(what:index:count:)``, ``InterpreterError/inputSizeMismatch(input:expected:actual:)``.
    public func copy(_ data: [UInt8], toInputAt index: Int) throws {
        try withInput(at: index) { buffer in
            guard buffer.count == data.count else {
                throw InterpreterError.inputSizeMismatch(input: index, expected: buffer.count, actual: data.count)
            }
            data.withUnsafeBytes { buffer.copyMemory(from: $0) }
        }
    }

    /// Calls `body` with the writable memory of input `index`. Do not keep the pointer.
    public func withInput<R>(at index: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) throws -> R {
        guard graph.inputs.indices.contains(index) else {
            throw InterpreterError.indexOutOfRange(what: "input", index: index, count: graph.inputs.count)
        }
        let tensor = graph.inputs[index]
        return try body(UnsafeMutableRawBufferPointer(start: pointers[tensor], count: byteCount(tensor)))
    }

    /// Calls `body` with the memory of output `index`, valid until the next `invoke()`. Do not keep the pointer.
    public func withOutput<R>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard graph.outputs.indices.contains(index) else {
            throw InterpreterError.indexOutOfRange(what: "output", index: index, count: graph.outputs.count)
        }
        let tensor = graph.outputs[index]
        return try body(UnsafeRawBufferPointer(start: pointers[tensor], count: byteCount(tensor)))
    }

    /// A copy of input `index` with its description.
    public func input(at index: Int) throws -> Tensor {
        guard graph.inputs.indices.contains(index) else {
            throw InterpreterError.indexOutOfRange(what: "input", index: index, count: graph.inputs.count)
        }
        return try tensor(at: graph.inputs[index])
    }

    /// A copy of output `index` with its description.
    public func output(at index: Int) throws -> Tensor {
        guard graph.outputs.indices.contains(index) else {
            throw InterpreterError.indexOutOfRange(what: "output", index: index, count: graph.outputs.count)
        }
        return try tensor(at: graph.outputs[index])
    }

    /// A copy of any tensor by its index in the subgraph; intermediates, and constants no kernel
    /// reads while running (weights), must be preserved (``Options/preservedTensors``).
    ///
    /// - Throws: ``InterpreterError/tensorNotPreserved(name:)`` for an intermediate whose memory was
    ///   reused or a constant that was not kept.
    public func tensor(at index: Int) throws -> Tensor {
        guard graph.tensors.indices.contains(index) else {
            throw InterpreterError.indexOutOfRange(what: "tensor", index: index, count: graph.tensors.count)
        }
        let info = graph.tensors[index]
        guard readable[index], let pointer = pointers[index] else { throw InterpreterError.tensorNotPreserved(name: info.name) }
        let bytes = Array(UnsafeRawBufferPointer(start: pointer, count: byteCount(index)))
        return Tensor(name: info.name, type: info.type, shape: shapes[index], quantization: info.quantization, data: bytes)
    }

    /// The index of the tensor named `name`.
    public func tensorIndex(named name: String) throws -> Int {
        guard let index = graph.tensors.firstIndex(where: { $0.name == name }) else {
            throw InterpreterError.unknownTensor(name: name)
        }
        return index
    }

    /// The shape of tensor `index` as prepared (operators may set shapes the file leaves empty).
    public func shape(ofTensor index: Int) -> [Int] { shapes[index] }

    private func byteCount(_ tensor: Int) -> Int {
        shapes[tensor].reduce(1, *) * (graph.tensors[tensor].type.byteSize ?? 0)
    }
}

/// Constant tensors copied once into aligned memory owned by the interpreter, so kernels can read
/// them as typed pointers whatever their alignment in the file.
private final class ConstantStore {
    private var storage: [Int: UnsafeMutableRawPointer] = [:]

    /// Copies the constant tensors in `tensors`.
    init(model: Model, graph: Subgraph, tensors: Set<Int>) {
        for index in tensors {
            let tensor = graph.tensors[index]
            model.withConstantBytes(of: tensor) { raw in
                let pointer = UnsafeMutableRawPointer.allocate(byteCount: max(raw.count, 1), alignment: 64)
                if raw.count > 0 { pointer.copyMemory(from: raw.baseAddress!, byteCount: raw.count) }
                storage[index] = pointer
            }
        }
    }

    func pointer(_ tensor: Int) -> UnsafeMutableRawPointer? { storage[tensor] }

    deinit { for pointer in storage.values { pointer.deallocate() } }
}
