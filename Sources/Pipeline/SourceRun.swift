import Detection
import Foundation
import Imaging
import Media

/// One video source from open to end: reader → detector → consumers (clip recorder, live view),
/// with reconnection for live sources. `spotter record` and `spotter serve` both run their sources
/// through it.
///
/// A file ends at its last frame (or starts over with ``Options/loop``). A live source that ends
/// or stalls either ends the run (``SourceRunError/streamEnded(frames:)``) or, with
/// ``Options/reconnect``, finishes the open clip, waits 1, 2, 4 ... ``Options/maxBackoff``
/// seconds, and opens it again until ``stop()``.
///
/// ```swift
/// let run = SourceRun(input: "rtsp://cam.local/live", options: .init(reconnect: true), recorder: session,
///                     detect: { try detector.detect($0.image).detections }, events: { print($0) })
/// let stats = try run.run()   // blocks; run.stopRequested.set() from another thread ends it
/// ```
///
/// Not thread-safe: one thread calls ``run()``; others only hold ``stopRequested``.
public final class SourceRun {
    public struct Options: Sendable {
        /// Reopen a live source that ended or stalled, until stopped. Default false.
        public var reconnect = false
        /// Longest wait between reconnection attempts, in seconds. Default 30.
        public var maxBackoff: Double = 30
        /// Start a file again at its end, its times continuing (a demo camera). Default false.
        public var loop = false
        /// How the source is opened and read.
        public var reader = VideoReader.Options()
        /// Queues, `every`, and real-time pacing of files.
        public var pipeline = FramePipeline.Options()

        public init(reconnect: Bool = false, maxBackoff: Double = 30, loop: Bool = false, reader: VideoReader.Options = .init(),
                    pipeline: FramePipeline.Options = .init()) {
            self.reconnect = reconnect
            self.maxBackoff = maxBackoff
            self.loop = loop
            self.reader = reader
            self.pipeline = pipeline
        }
    }

    /// Where a run is.
    public enum State: String, Codable, Sendable {
        case opening, running, reconnecting, finished, stopped, failed
    }

    /// What a run reports, in order, from its threads.
    public enum Event: Sendable {
        /// The source opened (again).
        case opened(VideoReader.Info)
        case state(State, message: String?)
        /// Every frame after detection, from the consume thread, before the recorder sees it.
        case frame(DetectedFrame)
        /// Counters of the current connection, twice a second and once at its end.
        case progress(PipelineStats)
        case recorder(RecorderEvent)
    }

    public let input: String
    public let options: Options
    /// Set to end the run (a signal handler may hold it): the current read returns at once, the
    /// open clip is finished, and ``run()`` returns.
    public let stopRequested: StopFlag
    private let control: Control
    private let recorder: ClipSession?
    private let detect: (VideoFrame) throws -> [Detection]
    private let events: @Sendable (Event) -> Void

    /// - Parameters:
    ///   - input: a file, URL or `/dev/videoN` (sample names are resolved by the caller).
    ///   - recorder: records clips of matching frames; nil to only detect.
    ///   - detect: runs on the run's detect thread, one frame at a time.
    ///   - events: called on the run's threads; keep it short.
    public init(input: String, options: Options = Options(), recorder: ClipSession?,
                detect: @escaping (VideoFrame) throws -> [Detection], events: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.input = input
        self.options = options
        self.recorder = recorder
        self.detect = detect
        self.events = events
        let control = Control()
        self.control = control
        stopRequested = StopFlag(onSet: { control.stop() })
    }

    /// Reads, detects and records until the end of a file, ``stop()``, or a failure. Blocks.
    ///
    /// - Returns: the counters summed over every connection.
    /// - Throws: ``MediaError`` when the source cannot be opened or fails (without `reconnect`),
    ///   ``SourceRunError/streamEnded(frames:)`` when a live source ends without `reconnect`,
    ///   ``MediaError``/``AlbumError`` when a clip cannot be written. The open clip is finished
    ///   (or indexed as incomplete) before anything is thrown.
    /// - Parameter opened: the source already opened by the caller (to read its info first).
    @discardableResult
    public func run(opened: VideoReader? = nil) throws -> PipelineStats {
        var total = PipelineStats()
        var timeOffset = 0.0
        var reader: VideoReader
        if let opened { reader = opened } else {
            events(.state(.opening, message: nil))
            do { reader = try VideoReader(path: input, options: options.reader) } catch {
                events(.state(.failed, message: "\(error)"))
                throw error
            }
        }
        var backoff = 1.0
        while true {
            events(.opened(reader.info))
            events(.state(.running, message: nil))
            let pipeline = FramePipeline(reader: reader, options: options.pipeline)
            control.attach(pipeline.stopRequested)
            var failure: Error?
            let offset = timeOffset
            let lastTime = LastTime()
            do {
                let stats = try pipeline.run(
                    detect: detect,
                    consume: { [recorder, events] item in
                        var item = item
                        item.frame.time += offset
                        lastTime.value = item.frame.time
                        events(.frame(item))
                        try recorder?.consume(item)
                    },
                    progress: { [events] in events(.progress($0)) })
                events(.progress(stats))
                total.received += stats.received
                total.processed += stats.processed
                total.dropped += stats.dropped
                total.elapsed += stats.elapsed
                total.inferenceMilliseconds = stats.inferenceMilliseconds
            } catch {
                failure = error
            }
            if stopRequested.isSet { break }
            if !reader.info.isLive {
                if let failure { return try end(.failed, throwing: failure) }
                guard options.loop, total.processed > 0 else { break }
                // The next pass continues the clock one frame after this one's last frame.
                timeOffset = lastTime.value + 1 / (reader.info.frameRate ?? 25)
                do { reader = try VideoReader(path: input, options: options.reader) } catch { return try end(.failed, throwing: error) }
                continue
            }
            guard options.reconnect else {
                return try end(.failed, throwing: failure ?? SourceRunError.streamEnded(frames: total.processed))
            }
            // A live source that ended or stalled: finish the open clip, then reconnect with backoff.
            do { try recorder?.finish() } catch { return try end(.failed, throwing: error) }
            events(.state(.reconnecting, message: "\(failure.map { "\($0)" } ?? "the stream ended"); reconnecting in \(Int(backoff)) s"))
            var reopened: VideoReader?
            while reopened == nil, control.wait(seconds: backoff) {
                backoff = min(backoff * 2, options.maxBackoff)
                do { reopened = try VideoReader(path: input, options: options.reader) } catch {
                    events(.state(.reconnecting, message: "\(error); next attempt in \(Int(backoff)) s"))
                }
            }
            guard let reopened else { break }
            reader = reopened
            backoff = 1
        }
        do { try recorder?.finish() } catch {
            events(.state(.failed, message: "\(error)"))
            throw error
        }
        events(.state(stopRequested.isSet ? .stopped : .finished, message: nil))
        return total
    }

    /// Finishes the open clip, reports `state` and throws `error`.
    private func end(_ state: State, throwing error: Error) throws -> PipelineStats {
        try? recorder?.finish()
        events(.state(state, message: "\(error)"))
        throw error
    }

    /// The time of the last frame consumed, read after the pipeline's threads ended.
    private final class LastTime: @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var stored = 0.0
        var value: Double {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }

    /// The stop flag of the current connection and the wait between connections.
    private final class Control: @unchecked Sendable {
        // Guarded by `condition`.
        private let condition = NSCondition()
        private var stopped = false
        private var current: StopFlag?

        func attach(_ flag: StopFlag) {
            let stop = condition.withLock {
                current = flag
                return stopped
            }
            if stop { flag.set() }
        }

        func stop() {
            let flag = condition.withLock {
                stopped = true
                condition.broadcast()
                return current
            }
            flag?.set()
        }

        /// Waits `seconds`; false (at once) when stopped.
        func wait(seconds: Double) -> Bool {
            condition.withLock {
                let deadline = Date().addingTimeInterval(seconds)
                while !stopped, condition.wait(until: deadline) {}
                return !stopped
            }
        }
    }
}

/// Why a source run ended other than by a media or album error.
public enum SourceRunError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A live source ended (or stalled) and reconnection was not asked for.
    case streamEnded(frames: Int)

    public var description: String {
        switch self {
        case .streamEnded(let frames): return "the stream ended after \(frames) frames"
        }
    }
}
