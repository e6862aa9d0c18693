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
/// seconds, and opens it again until ``stopRequested`` is set. With `reconnect`, a live source
/// that cannot be opened at all yet (a camera that is down, a stream not started) is waited for
/// the same way, reported as ``State/waiting``.
///
/// ```
///            open fails (live, reconnect)          stream ends or stalls (reconnect)
///   opening ──────────────────────────▶ waiting ◀──────────────────────── running
///      │  ▲                                │ backoff 1, 2, 4 ... 30 s          ▲
///      │  └────────────────────────────────┘                                   │
///      └──────────────── opened ───────────────────────────────────────────────┘
///   running ──end of file──▶ finished      any state ──stopRequested──▶ stopped
///   opening ──fails (file, or no reconnect)──▶ failed
/// ```
///
/// ```swift
/// let run = SourceRun(input: "rtsp://cam.local/live", options: .init(reconnect: true), recorder: { info in session(for: info) },
///                     analyzer: analyzer, events: { print($0) })
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
        /// Connecting or opening; `waiting` between attempts.
        case opening, waiting, running, reconnecting, finished, stopped, failed
    }

    /// What a run reports, in order, from its threads.
    public enum Event: Sendable {
        /// The source opened (again).
        case opened(VideoReader.Info)
        case state(State, message: String?)
        /// Every frame after its analysis, from the consume thread, before the recorder sees it.
        case frame(DetectedFrame)
        /// Events of no frame: the objects still open when the run ends (`object_ended`).
        case analysis([AnalysisEvent])
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
    /// Ends a blocking open or read of this run's readers when a stop is requested.
    private let cancellation: ReadCancellation
    private let makeRecorder: (VideoReader.Info) throws -> ClipSession?
    private var recorder: ClipSession?
    private let analyzer: FrameAnalyzer
    private let events: @Sendable (Event) -> Void

    /// - Parameters:
    ///   - input: a file, URL or `/dev/videoN` (sample names are resolved by the caller).
    ///   - recorder: makes the clip recorder once the source is first opened (its frame rate and
    ///     frame size known); returns nil to only detect.
    ///   - analyzer: runs on the run's thread, one frame at a time, in order, across reconnections
    ///     (the frames' times continue, so tracks do too).
    ///   - events: called on the run's threads; keep it short.
    public init(input: String, options: Options = Options(), recorder: @escaping (VideoReader.Info) throws -> ClipSession?,
                analyzer: FrameAnalyzer, events: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.input = input
        self.options = options
        makeRecorder = recorder
        self.analyzer = analyzer
        self.events = events
        let control = Control(), cancellation = ReadCancellation()
        self.control = control
        self.cancellation = cancellation
        stopRequested = StopFlag(onSet: {
            cancellation.cancel()
            control.stop()
        })
    }

    /// A run whose recorder exists before the source is opened (nil: detect only), with plain
    /// detections (no tracking).
    public convenience init(input: String, options: Options = Options(), recorder: ClipSession?,
                            detect: @escaping (VideoFrame) throws -> [Detection], events: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.init(input: input, options: options, recorder: { _ in recorder }, analyzer: DetectionsOnly(detect), events: events)
    }

    /// An analysis that is only a detector's detections.
    private final class DetectionsOnly: FrameAnalyzer {
        let detect: (VideoFrame) throws -> [Detection]
        init(_ detect: @escaping (VideoFrame) throws -> [Detection]) { self.detect = detect }
        func analyze(_ frame: VideoFrame, detected: [Detection]?) throws -> FrameAnalysis {
            FrameAnalysis(frame: frame.index, time: frame.time, detections: try detected ?? detect(frame))
        }
        func finish() -> [AnalysisEvent] { [] }
    }

    /// Whether `input` names a source that delivers frames as they happen and may come back: a
    /// network stream or a camera (files never come back by waiting).
    public static func isLive(_ input: String) -> Bool {
        VideoReader.isDevice(input) || ["rtsp", "rtsps", "rtmp", "rtmps", "udp", "rtp", "srt", "tcp", "http", "https"]
            .contains(VideoReader.scheme(of: input) ?? "")
    }

    /// Opens the input; with ``Options/reconnect``, a live input that cannot be opened yet is tried
    /// again after 1, 2, 4 ... ``Options/maxBackoff`` seconds (``State/waiting``) until it opens or
    /// a stop is requested.
    ///
    /// - Returns: the reader, or nil when a stop was requested first.
    /// - Throws: ``MediaError`` for an input that cannot be opened and is not waited for.
    private func open() throws -> VideoReader? {
        var backoff = 1.0
        while !stopRequested.isSet {
            events(.state(.opening, message: nil))
            do {
                return try VideoReader(path: input, options: options.reader, cancellation: cancellation)
            } catch {
                if stopRequested.isSet { return nil }
                guard options.reconnect, Self.isLive(input) else { throw error }
                events(.state(.waiting, message: "\(error); next attempt in \(Int(backoff)) s"))
                guard control.wait(seconds: backoff) else { return nil }
                backoff = min(backoff * 2, options.maxBackoff)
            }
        }
        return nil
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
            let first: VideoReader?
            do { first = try open() } catch {
                events(.state(.failed, message: "\(error)"))
                throw error
            }
            guard let first else {
                events(.state(.stopped, message: nil))
                return total
            }
            reader = first
        }
        do { recorder = try makeRecorder(reader.info) } catch {
            events(.state(.failed, message: "\(error)"))
            throw error
        }
        var backoff = 1.0
        // The time of the last frame consumed (the pipeline's threads write it).
        let lastTime = Locked(0.0)
        while true {
            events(.opened(reader.info))
            events(.state(.running, message: nil))
            var pipelineOptions = options.pipeline
            pipelineOptions.timeOffset = timeOffset
            let pipeline = FramePipeline(reader: reader, options: pipelineOptions)
            control.attach(pipeline.stopRequested)
            var failure: Error?
            // The connection's counters as it goes: a failed connection's frames still count.
            let connection = Locked(PipelineStats())
            var stats: PipelineStats
            do {
                let analyzer = self.analyzer
                stats = try pipeline.run(
                    analyze: { try analyzer.analyze($0, detected: $1) },
                    consume: { [recorder, events] item in
                        lastTime.value = item.frame.time
                        events(.frame(item))
                        try recorder?.consume(item)
                    },
                    progress: { [events] in
                        connection.value = $0
                        events(.progress($0))
                    })
            } catch {
                failure = error
                stats = connection.value
            }
            events(.progress(stats))
            total.received += stats.received
            total.processed += stats.processed
            total.dropped += stats.dropped
            total.skipped += stats.skipped
            total.elapsed += stats.elapsed
            total.inferenceMilliseconds = stats.inferenceMilliseconds
            if stopRequested.isSet { break }
            if !reader.info.isLive {
                if let failure { return try end(.failed, throwing: failure) }
                guard options.loop, total.processed > 0 else { break }
                // The next pass continues the clock one frame after this one's last frame.
                timeOffset = lastTime.value + 1 / (reader.info.frameRate ?? 25)
                do { reader = try VideoReader(path: input, options: options.reader, cancellation: cancellation) } catch {
                    return try end(.failed, throwing: error)
                }
                continue
            }
            guard options.reconnect else {
                return try end(.failed, throwing: failure ?? SourceRunError.streamEnded(frames: total.processed))
            }
            // A live source that ended or stalled: finish the open clip, then reconnect with backoff.
            do { try recorder?.finish() } catch { return try end(.failed, throwing: error) }
            let lost = ContinuousClock.now
            events(.state(.reconnecting, message: "\(failure.map { "\($0)" } ?? "the stream ended"); reconnecting in \(Int(backoff)) s"))
            var reopened: VideoReader?
            while reopened == nil, control.wait(seconds: backoff) {
                backoff = min(backoff * 2, options.maxBackoff)
                do { reopened = try VideoReader(path: input, options: options.reader, cancellation: cancellation) } catch {
                    if stopRequested.isSet { break }
                    events(.state(.reconnecting, message: "\(error); next attempt in \(Int(backoff)) s"))
                }
            }
            guard let reopened else { break }
            reader = reopened
            backoff = 1
            // A new connection's timestamps start again at 0: its frames continue the run's clock
            // after the time spent away, so positions in the source never go back.
            let away = lost.duration(to: .now)
            timeOffset = lastTime.value + max(1 / (reader.info.frameRate ?? 25), Double(away.components.seconds) + Double(away.components.attoseconds) * 1e-18)
        }
        events(.analysis(analyzer.finish()))
        do { try recorder?.finish() } catch {
            events(.state(.failed, message: "\(error)"))
            throw error
        }
        events(.state(stopRequested.isSet ? .stopped : .finished, message: nil))
        return total
    }

    /// Finishes the open clip, reports `state` and throws `error`.
    private func end(_ state: State, throwing error: Error) throws -> PipelineStats {
        events(.analysis(analyzer.finish()))
        try? recorder?.finish()
        events(.state(state, message: "\(error)"))
        throw error
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
