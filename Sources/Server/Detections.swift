import Detection
import Foundation
import Imaging
import Media

/// Runs detectors for the HTTP endpoints: one single-threaded detector per core the process may
/// use, each owned by an actor (an `ObjectDetector` is not thread-safe), so concurrent requests
/// run side by side instead of queueing for one detector's thread pool.
final class DetectionService: Sendable {
    private let workers: [DetectorWorker]
    private let next = Counter()

    /// The lowest score any request may ask for; each request filters above it.
    static let floorThreshold: Float = 0.05

    /// - Parameter options: `threadCount` is the number of detectors (each runs on one thread).
    init(modelPath: String, options: ObjectDetector.Options) throws {
        var options = options
        let count = max(1, options.threadCount)
        options.threadCount = 1
        options.scoreThreshold = Self.floorThreshold
        options.categoryAllowlist = nil
        options.categoryDenylist = nil
        workers = try (0..<count).map { _ in try DetectorWorker(modelPath: modelPath, options: options) }
    }

    /// Detects objects in an uploaded picture on the next detector, keeping those at or above
    /// `threshold` whose label is in `classes` (all when nil).
    func detect(_ image: Image, threshold: Float, classes: Set<String>?) async throws -> DetectionResult {
        try await workers[next.increment() % workers.count].detect(image, threshold: threshold, classes: classes)
    }

    /// Pictures detected and the milliseconds spent, over all detectors.
    func totals() async -> (requests: Int, milliseconds: Double) {
        var requests = 0, milliseconds = 0.0
        for worker in workers {
            requests += await worker.requests
            milliseconds += await worker.totalMilliseconds
        }
        return (requests, milliseconds)
    }
}

/// A counter shared by request tasks.
final class Counter: @unchecked Sendable {
    // `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value = 0

    /// Returns the value before adding one.
    func increment() -> Int {
        lock.withLock {
            defer { value += 1 }
            return value
        }
    }
}

/// One detector and its owner.
actor DetectorWorker {
    private let detector: ObjectDetector
    private(set) var requests = 0
    private(set) var totalMilliseconds = 0.0

    init(modelPath: String, options: ObjectDetector.Options) throws {
        detector = try ObjectDetector(modelPath: modelPath, options: options)
    }

    func detect(_ image: Image, threshold: Float, classes: Set<String>?) throws -> DetectionResult {
        let start = ContinuousClock.now
        var result = try detector.detect(image)
        result.detections = result.detections.filter { d in
            d.score >= threshold && (classes.map { $0.contains(d.label.lowercased()) } ?? true)
        }
        let elapsed = (ContinuousClock.now - start).components
        requests += 1
        totalMilliseconds += Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15
        return result
    }
}
