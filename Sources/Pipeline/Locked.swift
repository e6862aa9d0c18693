import Synchronization

/// A value several threads share, behind one lock: the one locked box the pipeline's threads use
/// instead of hand-written lock classes.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: Value) {
        mutex = Mutex(value)
    }

    public var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }

    /// Runs `body` with the value, exclusively.
    @discardableResult
    public func withLock<Result: Sendable>(_ body: (inout sending Value) throws -> sending Result) rethrows -> sending Result {
        try mutex.withLock(body)
    }
}
