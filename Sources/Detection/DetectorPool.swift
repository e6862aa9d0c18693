import Foundation
import Imaging

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
    // `idle` and `waiters` are guarded by `lock`; `detectors` is immutable and each detector is
    // used only by the one caller that borrowed its index.
    private let detectors: [ObjectDetector]
    private let lock = NSLock()
    private var idle: [Int]
    private var waiters: [Waiter] = []
    private var busyNanoseconds: UInt64 = 0
    private var calls = 0

    private enum Waiter {
        case thread(Handoff)
        case task(CheckedContinuation<Int, Never>)
    }

    /// Where a waiting thread receives its detector's index.
    private final class Handoff: @unchecked Sendable {
        // `index` is written once by the releasing thread before `ready` is signalled.
        let ready = DispatchSemaphore(value: 0)
        var index = 0
    }

    /// - Parameters:
    ///   - count: how many detectors (each runs on one thread); usually the cores the process may use.
    ///   - options: detector options; `threadCount` is ignored (always 1).
    /// - Throws: what ``ObjectDetector/init(modelPath:options:)`` throws.
    public init(modelPath: String, count: Int, options: ObjectDetector.Options) throws {
        var options = options
        options.threadCount = 1
        detectors = try (0..<max(1, count)).map { _ in try ObjectDetector(modelPath: modelPath, options: options) }
        idle = Array(detectors.indices)
    }

    /// Detectors in the pool.
    public var count: Int { detectors.count }

    /// The class names the detectors report (the same for all).
    public var labels: Labels? { detectors.first?.labels }

    /// Calls made and seconds spent inside them, over all detectors.
    public var totals: (calls: Int, seconds: Double) {
        lock.withLock { (calls, Double(busyNanoseconds) / 1e9) }
    }

    /// Runs `body` with a detector of its own, blocking the calling thread until one is free.
    public func withDetector<T>(_ body: (ObjectDetector) throws -> T) rethrows -> T {
        let handoff = Handoff()
        let index: Int
        if let free = lock.withLock({ takeIdle(orEnqueue: .thread(handoff)) }) {
            index = free
        } else {
            handoff.ready.wait()
            index = handoff.index
        }
        return try measure(index, body)
    }

    /// Runs `body` with a detector of its own, suspending until one is free.
    public func withDetector<T>(_ body: (ObjectDetector) throws -> T) async rethrows -> T {
        let index = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            if let free = lock.withLock({ takeIdle(orEnqueue: .task(continuation)) }) { continuation.resume(returning: free) }
        }
        return try measure(index, body)
    }

    private func measure<T>(_ index: Int, _ body: (ObjectDetector) throws -> T) rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer { release(index, nanoseconds: DispatchTime.now().uptimeNanoseconds - start) }
        return try body(detectors[index])
    }

    /// Under `lock`: a free detector when nobody waits before us; otherwise queues `waiter`.
    private func takeIdle(orEnqueue waiter: Waiter) -> Int? {
        if waiters.isEmpty, let index = idle.popLast() { return index }
        waiters.append(waiter)
        return nil
    }

    private func release(_ index: Int, nanoseconds: UInt64) {
        let next: Waiter? = lock.withLock {
            busyNanoseconds += nanoseconds
            calls += 1
            if waiters.isEmpty {
                idle.append(index)
                return nil
            }
            return waiters.removeFirst()
        }
        switch next {
        case .none: break
        case .thread(let handoff):
            handoff.index = index
            handoff.ready.signal()
        case .task(let continuation):
            continuation.resume(returning: index)
        }
    }
}
