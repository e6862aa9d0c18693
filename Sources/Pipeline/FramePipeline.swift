import Detection
import Foundation
import Imaging
import Media
import Synchronization

/// A blocking queue of bounded capacity between two pipeline threads. With `keepLatest`, a push
/// on a full queue replaces the oldest element instead of waiting (live sources), counting drops.
final class BoundedQueue<Element>: @unchecked Sendable {
    // Every stored property is guarded by `condition`; this is the one synchronization point
    // between the pipeline's threads.
    private let condition = NSCondition()
    private var items: [Element] = []
    private var closed = false
    private let capacity: Int
    private let keepLatest: Bool
    private(set) var dropped = 0

    init(capacity: Int, keepLatest: Bool = false) {
        self.capacity = capacity
        self.keepLatest = keepLatest
    }

    /// Adds `item`, waiting for room (or dropping the oldest with `keepLatest`); false once closed.
    @discardableResult
    func push(_ item: Element) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !closed && items.count >= capacity {
            if keepLatest {
                items.removeFirst()
                dropped += 1
            } else {
                condition.wait()
            }
        }
        guard !closed else { return false }
        items.append(item)
        condition.broadcast()
        return true
    }

    /// The next item, waiting for one; nil when closed and empty.
    func pop() -> Element? {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty && !closed { condition.wait() }
        guard !items.isEmpty else { return nil }
        let item = items.removeFirst()
        condition.broadcast()
        return item
    }

    /// No more pushes; pops drain what is left.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    var droppedCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return dropped
    }
}

/// A frame with its analysis.
public struct DetectedFrame: Sendable {
    public var frame: VideoFrame
    /// Nil for frames skipped by `every` (they reuse the last detections when drawn).
    public var analysis: FrameAnalysis?
    /// How long the analysis took, in milliseconds.
    public var inferenceMilliseconds: Double
    /// When the reader handed the frame over (wall clock, for decode-to-display latency).
    public var decodedAt: Date

    /// The analysis's detections; nil for frames skipped by `every`.
    public var detections: [Detection]? { analysis?.detections }

    public init(frame: VideoFrame, analysis: FrameAnalysis?, inferenceMilliseconds: Double, decodedAt: Date = Date()) {
        self.frame = frame
        self.analysis = analysis
        self.inferenceMilliseconds = inferenceMilliseconds
        self.decodedAt = decodedAt
    }

    /// A frame with plain detections (no tracking), as a detector alone gives them.
    public init(frame: VideoFrame, detections: [Detection]?, inferenceMilliseconds: Double = 0, decodedAt: Date = Date()) {
        self.init(frame: frame, analysis: detections.map { FrameAnalysis(frame: frame.index, time: frame.time, detections: $0) },
                  inferenceMilliseconds: inferenceMilliseconds, decodedAt: decodedAt)
    }
}

/// The detection step of a file's frames, run ahead on several threads (each with a detector of its
/// own, as a ``DetectorPool`` lends them): on two cores, two single-threaded detectors on two
/// frames keep both cores busier than one detector split across them, whose threads wait for each
/// other at every layer while decoding and encoding compete for the same cores.
public struct DetectAhead: Sendable {
    /// Frames detected at once. At least 1.
    public var threads: Int
    /// The detector's findings in a frame (thread-safe), before the analysis filters and tracks them.
    public var detect: @Sendable (Image) throws -> [Detection]

    public init(threads: Int, detect: @escaping @Sendable (Image) throws -> [Detection]) {
        self.threads = max(1, threads)
        self.detect = detect
    }
}

/// Results of frames detected ahead, handed out in frame order: a worker may run at most
/// `capacity` frames ahead of the next one taken.
private final class InOrder<Value: Sendable>: @unchecked Sendable {
    // Every stored property is guarded by `condition`.
    private let condition = NSCondition()
    private var results: [Int: Result<Value, any Error>] = [:]
    private var next = 0
    private var working: Int
    private let capacity: Int
    private var abandoned = false

    init(workers: Int, capacity: Int) {
        working = workers
        self.capacity = capacity
    }

    /// Stores frame `index`'s result, waiting while it is too far ahead of the next one taken.
    func put(_ index: Int, _ result: Result<Value, any Error>) {
        condition.lock()
        defer { condition.unlock() }
        while index - next >= capacity && !abandoned { condition.wait() }
        guard !abandoned else { return }
        results[index] = result
        condition.broadcast()
    }

    /// A worker is done (its input ended).
    func finish() {
        condition.lock()
        working -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// The result of frame `index` (the next in order), waiting for it; nil when the workers ended
    /// without it.
    func take(_ index: Int) -> Result<Value, any Error>? {
        condition.lock()
        defer { condition.unlock() }
        while results[index] == nil && working > 0 { condition.wait() }
        next = index + 1
        condition.broadcast()
        return results.removeValue(forKey: index)
    }

    /// Nothing more is taken (the run stopped early): workers stop waiting for room.
    func abandon() {
        condition.lock()
        abandoned = true
        results.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}

/// A frame detected ahead.
private struct AheadFrame: Sendable {
    let frame: VideoFrame
    let decodedAt: Date
    let detections: [Detection]
    let milliseconds: Double
}

/// Counters of a pipeline run.
public struct PipelineStats: Sendable, Codable {
    public var received = 0
    public var processed = 0
    public var dropped = 0
    /// Frames whose inference motion gating skipped (counted in `processed`).
    public var skipped = 0
    public var elapsed: Double = 0
    public var inferenceMilliseconds: Double = 0

    public var fps: Double { elapsed > 0 ? Double(processed) / elapsed : 0 }

    public init() {}
}

/// Runs decode, detect, and a consumer (draw and encode, or the recorder) on separate threads
/// with small bounded queues, so memory stays flat however long the input is.
///
/// Files: every frame is decoded and passed on (every `every`-th is detected). Live sources: the
/// reader keeps only the newest frame; frames that arrive while the detector is busy are dropped
/// and counted (one frame in flight).
public final class FramePipeline {
    public struct Options: Sendable {
        /// Detect every N-th frame of a file (others reuse the last detections). Default 1.
        public var every: Int = 1
        /// Treat the input as live (drop frames while busy). Default: what the reader reports.
        public var live: Bool?
        /// Frames buffered between stages. Default 2.
        public var queueCapacity: Int = 2
        /// Hand a file's frames on at the pace of their timestamps, as a camera would deliver them
        /// (the input then counts as live: frames that come while the detector is busy are
        /// dropped). Default false.
        public var realTime = false
        /// Seconds added to every frame's time (a reconnection or a loop continues the clock).
        public var timeOffset: Double = 0
        /// Files only (not live, `every` 1): detect on the next frames ahead, on threads of their
        /// own, while earlier frames are tracked in order. Default nil: detect in line.
        public var detectAhead: DetectAhead?

        public init(every: Int = 1, live: Bool? = nil, queueCapacity: Int = 2, realTime: Bool = false) {
            self.every = every
            self.live = live
            self.queueCapacity = queueCapacity
            self.realTime = realTime
        }
    }

    public let reader: VideoReader
    public let options: Options
    /// Set to stop reading (SIGINT, SIGTERM): a read blocked on a stalled source returns at once;
    /// frames already read are still processed.
    public let stopRequested: StopFlag

    public init(reader: VideoReader, options: Options = Options()) {
        self.reader = reader
        self.options = options
        let handle = UncheckedReader(reader: reader)
        stopRequested = StopFlag(onSet: { handle.reader.interruptReading() })
    }

    /// Runs to the end of the input (or a stop request) with plain detections (no tracking).
    public func run(detect: (VideoFrame) throws -> [Detection], consume: @escaping @Sendable (DetectedFrame) throws -> Void,
                    progress: (PipelineStats) -> Void) throws -> PipelineStats {
        try run(analyze: { frame, ahead in FrameAnalysis(frame: frame.index, time: frame.time, detections: try ahead ?? detect(frame)) },
                consume: consume, progress: progress)
    }

    /// Runs to the end of the input (or a stop request). `analyze` runs on the calling thread,
    /// frames in order, with the frame's detections when ``Options/detectAhead`` found them
    /// (nil: it detects itself); `consume` on a thread of its own, in frame order; `progress` on
    /// the calling thread.
    ///
    /// - Throws: the first error of decoding, analysis or consuming; frames before it were consumed.
    public func run(analyze: (VideoFrame, [Detection]?) throws -> FrameAnalysis, consume: @escaping @Sendable (DetectedFrame) throws -> Void,
                    progress: (PipelineStats) -> Void) throws -> PipelineStats {
        let live = options.live ?? (options.realTime || reader.info.isLive)
        let realTime = options.realTime, offset = options.timeOffset
        let decoded = BoundedQueue<(sequence: Int, frame: VideoFrame, decodedAt: Date)>(capacity: live ? 1 : options.queueCapacity, keepLatest: live)
        let detected = BoundedQueue<DetectedFrame>(capacity: options.queueCapacity)
        let readError = ErrorBox(), consumeError = ErrorBox()
        let reader = UncheckedReader(reader: self.reader)
        let stop = stopRequested
        let received = Counter()

        let decodeThread = Thread {
            do {
                var pace: (start: ContinuousClock.Instant, firstTime: Double)?
                var sequence = 0
                while !stop.isSet, var frame = try reader.reader.nextFrame() {
                    frame.time += offset
                    if realTime {
                        let clock = pace ?? (ContinuousClock.now, frame.time)
                        pace = clock
                        let due = clock.start + .milliseconds(Int64(((frame.time - clock.firstTime) * 1000).rounded()))
                        // Short naps, so a stop request is seen within 50 ms.
                        while !stop.isSet, ContinuousClock.now < due { Thread.sleep(forTimeInterval: min(0.05, Self.seconds(due - .now))) }
                    }
                    received.increment()
                    guard decoded.push((sequence, frame, Date())) else { break }
                    sequence += 1
                }
            } catch {
                readError.set(error)
            }
            decoded.close()
        }
        decodeThread.name = "spotter.decode"
        let done = DispatchSemaphore(value: 0)
        let consumeThread = Thread {
            while let item = detected.pop() {
                do { try consume(item) } catch {
                    consumeError.set(error)
                    stop.set()
                    break
                }
            }
            // Keep draining so the detector never blocks on a full queue after an error.
            while detected.pop() != nil {}
            done.signal()
        }
        consumeThread.name = "spotter.consume"
        decodeThread.start()
        consumeThread.start()
        // Detection ahead: workers take decoded frames as they come and hand results back in order.
        let ahead = live || options.every > 1 ? nil : options.detectAhead
        let inOrder = ahead.map { InOrder<AheadFrame>(workers: $0.threads, capacity: $0.threads + 1) }
        let workersEnded = DispatchSemaphore(value: 0)
        if let ahead, let inOrder {
            for number in 0..<ahead.threads {
                let worker = Thread {
                    while let (sequence, frame, decodedAt) = decoded.pop() {
                        let clock = ContinuousClock.now
                        let result = Result { try ahead.detect(frame.image) }
                        let milliseconds = Self.seconds(ContinuousClock.now - clock) * 1000
                        inOrder.put(sequence, result.map { AheadFrame(frame: frame, decodedAt: decodedAt, detections: $0, milliseconds: milliseconds) })
                    }
                    inOrder.finish()
                    workersEnded.signal()
                }
                worker.name = "spotter.detect.\(number)"
                worker.start()
            }
        }

        var stats = PipelineStats()
        let start = ContinuousClock.now
        var lastReport = start
        var index = 0
        var analysisError: Error?
        while true {
            let frame: VideoFrame, decodedAt: Date
            var found: [Detection]?
            var milliseconds = 0.0
            if let inOrder {
                guard let result = inOrder.take(index) else { break }
                do {
                    let item = try result.get()
                    (frame, decodedAt, found, milliseconds) = (item.frame, item.decodedAt, item.detections, item.milliseconds)
                } catch {
                    analysisError = error
                    break
                }
            } else {
                guard let item = decoded.pop() else { break }
                (frame, decodedAt) = (item.frame, item.decodedAt)
            }
            var analysis: FrameAnalysis? = nil
            if live || index % max(1, options.every) == 0 {
                let clock = ContinuousClock.now
                let result: FrameAnalysis
                do { result = try analyze(frame, found) } catch {
                    analysisError = error
                    break
                }
                analysis = result
                milliseconds += Self.seconds(ContinuousClock.now - clock) * 1000
                if result.analyzed { stats.inferenceMilliseconds = milliseconds } else { stats.skipped += 1 }
            }
            index += 1
            stats.processed += 1
            guard detected.push(DetectedFrame(frame: frame, analysis: analysis, inferenceMilliseconds: milliseconds, decodedAt: decodedAt)) else {
                break
            }
            let now = ContinuousClock.now
            if now - lastReport > .milliseconds(500) {
                lastReport = now
                stats.received = received.value
                stats.dropped = decoded.droppedCount
                stats.elapsed = Self.seconds(now - start)
                progress(stats)
            }
            if consumeError.error != nil { break }
        }
        stop.set()
        decoded.close()
        inOrder?.abandon()
        detected.close()
        done.wait()
        for _ in 0..<(ahead?.threads ?? 0) { workersEnded.wait() }
        while decodeThread.isExecuting { usleep(1000) }
        stats.received = received.value
        stats.dropped = decoded.droppedCount
        stats.elapsed = Self.seconds(ContinuousClock.now - start)
        if let error = analysisError { throw error }
        if let error = consumeError.error { throw error }
        if let error = readError.error { throw error }
        return stats
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// A flag one thread sets and others read.
public final class StopFlag: Sendable {
    private let value = Mutex(false)
    private let onSet: (@Sendable () -> Void)?

    /// - Parameter onSet: called (on the setting thread) each time the flag is set.
    public init(onSet: (@Sendable () -> Void)? = nil) {
        self.onSet = onSet
    }

    public func set() {
        value.withLock { $0 = true }
        onSet?()
    }

    public var isSet: Bool { value.withLock { $0 } }
}

/// The first error of a thread, read after it finished.
final class ErrorBox: Sendable {
    private let stored = Mutex<(any Error)?>(nil)

    func set(_ error: any Error) {
        stored.withLock { if $0 == nil { $0 = error } }
    }

    var error: (any Error)? { stored.withLock { $0 } }
}

final class Counter: Sendable {
    private let count = Mutex(0)

    func increment() { count.withLock { $0 += 1 } }

    var value: Int { count.withLock { $0 } }
}

/// Hands the reader to the decode thread, which is then its only user until `run` returns (other
/// threads only call its thread-safe `interruptReading()`).
private struct UncheckedReader: @unchecked Sendable {
    let reader: VideoReader
}
