internal import CXNNPACK

/// Process-wide XNNPACK state and its one status check.
enum XNNPACK {
    /// `xnn_initialize`, run once per process (XNNPACK detects the CPU's kernels here).
    private static let initialization: UInt32 = xnn_initialize(nil).rawValue

    /// Initializes XNNPACK, or explains why it cannot run here.
    ///
    /// - Throws: ``InterpreterError/backendUnavailable(name:reason:)``.
    static func initialize() throws {
        guard initialization == xnn_status_success.rawValue else {
            throw InterpreterError.backendUnavailable(
                name: "xnnpack", reason: initialization == xnn_status_unsupported_hardware.rawValue
                    ? "this CPU lacks the instructions XNNPACK needs" : "xnn_initialize failed with status \(initialization)")
        }
    }

    /// Converts an XNNPACK status into an error naming the call and the operator.
    static func check(_ status: xnn_status, _ call: String, operatorIndex: Int) throws {
        guard status == xnn_status_success else {
            throw InterpreterError.backendFailed(backend: "xnnpack", call: call, operatorIndex: operatorIndex, status: Int(status.rawValue))
        }
    }
}

/// A pthreadpool shared by the XNNPACK operators of one interpreter (nil handle: run on the caller's thread).
///
/// Operators are set up with `handle` (XNNPACK sizes its tiles for the pool) and run with `active`,
/// which is `handle` or nil: with nil every operator runs on the calling thread. ``ThreadChoice``
/// switches between the two when another process takes a core, because pthreadpool's fork-join
/// then waits for a descheduled worker at every operator.
final class ThreadPool {
    let handle: pthreadpool_t?
    /// The pool the next invoke runs on: `handle`, or nil for the calling thread only.
    var active: pthreadpool_t?

    init(threads: Int) {
        handle = threads > 1 ? pthreadpool_create(threads) : nil
        active = handle
    }

    deinit {
        if let handle { pthreadpool_destroy(handle) }
    }

    var threadCount: Int { handle.map { Int(pthreadpool_get_threads_count($0)) } ?? 1 }

    /// Lets the worker threads sleep until the next job instead of spinning, so the cores go to
    /// other work between invokes (decoding and encoding threads of a video pipeline).
    func park() {
        guard let handle else { return }
        pthreadpool_parallelize_1d(handle, { _, _ in }, nil, pthreadpool_get_threads_count(handle), UInt32(PTHREADPOOL_FLAG_YIELD_WORKERS))
    }
}

/// Worker threads that interpreters used one after another (never at the same time, from one
/// caller) share: a detector and the embedder after it run on the same workers, which keep spinning
/// from one model to the next instead of being woken for each, and sleep between units of work (a
/// picture). Whether a unit runs on the pool or on the calling thread alone is chosen as an
/// interpreter's own pool chooses per invoke (``Interpreter/Options/adaptsThreadsToLoad``), but from
/// the units' own durations: the time between units (decoding the next picture) varies too much
/// to show the pool's gain. Not thread-safe: one owner at a time.
///
/// ```swift
/// let threads = SharedThreads(count: 2)
/// let finder = try Interpreter(model: a, options: .init(threadCount: 2), threads: threads)
/// let embedder = try Interpreter(model: b, options: .init(threadCount: 2), threads: threads)
/// threads.begin()
/// // ... invoke both for a picture ...
/// threads.end()
/// ```
public final class SharedThreads {
    let pool: ThreadPool
    /// Measure now and then whether the pool or the calling thread alone is faster. Default true.
    public var adaptsToLoad = true
    private var choice = ThreadChoice()
    /// The choice sees a clock that runs only inside units: each period it measures is one unit.
    private let origin = ContinuousClock.now
    private var busy = Duration.zero
    private var started: ContinuousClock.Instant?

    /// At most ``Processors/available`` threads (one: no workers).
    public init(count: Int) {
        pool = ThreadPool(threads: min(max(1, count), Processors.available))
    }

    /// Threads the kernels run on (the caller's included).
    public var count: Int { pool.threadCount }

    /// Starts a unit of work (one picture through every model): chooses the pool or the calling
    /// thread for the invokes until ``end()``.
    public func begin() {
        guard let handle = pool.handle, adaptsToLoad else { return }
        pool.active = choice.startInvoke(at: origin + busy) ? handle : nil
        started = .now
    }

    /// Ends the unit: records its duration and lets the workers sleep until the next one (see
    /// ``Interpreter/Options/parksThreadsAfterInvoke``).
    public func end() {
        if let started { busy += .now - started }
        started = nil
        if pool.active != nil { pool.park() }
    }
}

/// One XNNPACK operator: created (weights packed) at load, set up once with the arena's fixed
/// addresses, run on every invoke. Deleted with this object, before the pool it keeps alive.
final class XNNPACKKernel: Kernel {
    /// Whether `run` reads constant inputs from the model: false when XNNPACK copied or packed them
    /// at load (weights), true when it reads them through the pointers given at setup (a binary
    /// operator's constant operand).
    let readsConstantInputs: Bool

    private let handle: xnn_operator_t
    private let pool: ThreadPool
    private let setup: (xnn_operator_t, TensorMemory, pthreadpool_t?) -> xnn_status
    private let operatorIndex: Int

    /// - Parameters:
    ///   - create: calls an `xnn_create_*` function; XNNPACK copies (packs) the weights it is given.
    ///   - setup: calls the matching `xnn_setup_*` with the tensors' addresses.
    init(_ ctx: PrepareContext, pool: ThreadPool, name: String, readsConstantInputs: Bool = false,
         create: (UnsafeMutablePointer<xnn_operator_t?>) -> xnn_status,
         setup: @escaping (xnn_operator_t, TensorMemory, pthreadpool_t?) -> xnn_status) throws {
        var op: xnn_operator_t?
        try XNNPACK.check(create(&op), "xnn_create_\(name)", operatorIndex: ctx.op.index)
        guard let op else { throw ctx.fail("xnn_create_\(name) returned no operator") }
        handle = op
        self.pool = pool
        self.setup = setup
        self.readsConstantInputs = readsConstantInputs
        operatorIndex = ctx.op.index
    }

    deinit { xnn_delete_operator(handle) }

    func bind(_ memory: TensorMemory) throws {
        try XNNPACK.check(setup(handle, memory, pool.handle), "xnn_setup", operatorIndex: operatorIndex)
    }

    func run(_ memory: TensorMemory) {
        // Setup succeeded with these addresses, so running can only fail on misuse.
        let status = xnn_run_operator(handle, pool.active)
        precondition(status == xnn_status_success, "xnn_run_operator failed with status \(status.rawValue)")
    }
}
