import Foundation
import Imaging
import Synchronization

/// A fixed set of single-threaded detectors shared by everything that detects in one process
/// (video sources, HTTP requests): each call borrows one detector, and callers wait their turn in
/// arrival order. With one detector per core, any number of sources and requests never
/// oversubscribes the cores, and each source (one frame in flight) gets its fair share.
///
/// ```swift
/// let pool = try DetectorPool(modelPath: "detect.tflite", count: 2, options: .init())
/// let found = try pool.withDetector { try $0.detect(image) }          // from a pipeline thread
/// let result = try await pool.withDetector { try $0.detect(image) }   // from a task
/// ```
public final class DetectorPool: @unchecked Sendable {
    // Unchecked only for `detectors`, which are not Sendable: the array is immutable and each
    // detector is used only by the one caller that borrowed its index from `state`.
    private let detectors: [ObjectDetector]
    private let state: Mutex<State>

    private struct State {
        var idle: [Int]
        var waiters: [Waiter] = []
        var busyNanoseconds: UInt64 = 0
        var calls = 0

        /// A free detector when nobody waits before us; otherwise queues `waiter`.
        mutating func takeIdle(orEnqueue waiter: Waiter) -> Int? {
            if waiters.isEmpty, let index = idle.popLast() { return index }
            waiters.append(waiter)
            return nil
        }
    }

    private enum Waiter {
        case thread(Handoff)
        case task(CheckedContinuation<Int, Never>)
    }

    /// Where a waiting thread receives its detector's index.
    private final class Handoff: Sendable {
        let ready = DispatchSemaphore(value: 0)
        /// Written by the releasing thread before `ready` is signalled.
        let index = Mutex(0)
    }

    /// - Parameters:
    ///   - count: how many detectors (each runs on one thread); usually the cores the process may use.
    ///   - options: detector options; `threadCount` is ignored (always 1).
    /// - Throws: what ``ObjectDetector/init(modelPath:options:)`` throws.
    public init(modelPath: String, count: Int, options: ObjectDetector.Options) throws {
        var options = options
        options.threadCount = 1
        detectors = try (0..<max(1, count)).map { _ in try ObjectDetector(modelPath: modelPath, options: options) }
        state = Mutex(State(idle: Array(detectors.indices)))
    }

    /// Detectors in the pool.
    public var count: Int { detectors.count }

    /// The class names the detectors report (the same for all).
    public var labels: Labels? { detectors.first?.labels }

    /// Calls made and seconds spent inside them, over all detectors.
    public var totals: (calls: Int, seconds: Double) {
        state.withLock { ($0.calls, Double($0.busyNanoseconds) / 1e9) }
    }

    /// Runs `body` with a detector of its own, blocking the calling thread until one is free.
    public func withDetector<T>(_ body: (ObjectDetector) throws -> T) rethrows -> T {
        let handoff = Handoff()
        let index: Int
        if let free = state.withLock({ $0.takeIdle(orEnqueue: .thread(handoff)) }) {
            index = free
        } else {
            handoff.ready.wait()
            index = handoff.index.withLock { $0 }
        }
        return try measure(index, body)
    }

    /// Runs `body` with a detector of its own, suspending until one is free.
    public func withDetector<T>(_ body: (ObjectDetector) throws -> T) async rethrows -> T {
        let index = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            if let free = state.withLock({ $0.takeIdle(orEnqueue: .task(continuation)) }) { continuation.resume(returning: free) }
        }
        return try measure(index, body)
    }

    private func measure<T>(_ index: Int, _ body: (ObjectDetector) throws -> T) rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer { release(index, nanoseconds: DispatchTime.now().uptimeNanoseconds - start) }
        return try body(detectors[index])
    }

    private func release(_ index: Int, nanoseconds: UInt64) {
        let next: Waiter? = state.withLock { state in
            state.busyNanoseconds += nanoseconds
            state.calls += 1
            if state.waiters.isEmpty {
                state.idle.append(index)
                return nil
            }
            return state.waiters.removeFirst()
        }
        switch next {
        case .none: break
        case .thread(let handoff):
            handoff.index.withLock { $0 = index }
            handoff.ready.signal()
        case .task(let continuation):
            continuation.resume(returning: index)
        }
    }
}
