import ArgumentParser
import Detection
import Foundation
import Imaging
import Media
import Rectangles
import Pipeline
import Synchronization
import Tracking

/// libx264's presets, fastest first.
enum X264Preset: String, ExpressibleByArgument, CaseIterable {
    case ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow
}

/// Stops the running pipeline on SIGINT and SIGTERM, so open files are finished before exiting.
final class Interruption: Sendable {
    /// The flag a signal sets and the signal that came: set on the main thread, read by the handlers.
    private struct State {
        var target: StopFlag?
        var number: Int32?
    }

    private let state = Mutex(State())
    /// Kept alive only: never used after `init` (Dispatch's sources are not marked Sendable).
    nonisolated(unsafe) private let sources: [any DispatchSourceSignal]

    init() {
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            sources.append(source)
        }
        self.sources = sources
        for (source, signalNumber) in zip(sources, [SIGINT, SIGTERM]) {
            source.setEventHandler { [weak self] in
                guard let self else { return }
                let flag = self.state.withLock {
                    $0.number = signalNumber
                    return $0.target
                }
                flag?.set()
            }
            source.resume()
        }
    }

    convenience init(stopping flag: StopFlag) {
        self.init()
        stop(flag)
    }

    /// The pipeline flag a signal sets from now on.
    func stop(_ flag: StopFlag) {
        let signalled = state.withLock {
            $0.target = flag
            return $0.number != nil
        }
        if signalled { flag.set() }
    }

    var signalled: Int32? { state.withLock { $0.number } }

    /// Waits `seconds`, returning early (false) when a signal arrives.
    func wait(seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if signalled != nil { return false }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return signalled == nil
    }
}

/// Progress of a video run on standard error (only on a terminal).
func reportProgress(_ bar: ProgressBar, _ stats: PipelineStats, info: VideoReader.Info) {
    let note = String(format: "%.1f fps, %.1f ms inference", stats.fps, stats.inferenceMilliseconds)
    if info.isLive {
        bar.status("received \(stats.received), processed \(stats.processed), dropped \(stats.dropped), " + note)
    } else {
        bar.update(stats.processed, note: note)
    }
}

struct Video: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "video",
        abstract: "Write a video with the detections drawn on every frame.",
        discussion: """
            Reads files (mp4, mov, mkv, avi, webm), network streams (rtsp, http(s), udp/rtp, hls) and \
            cameras (/dev/videoN); writes H.264 MP4 (index at the front, plays in browsers).

            Objects are tracked: each box is drawn as `#ID label score`, the same ID for the same \
            object from frame to frame (--trails draws the last second of each path), and --jsonl \
            gives each detection its `track`. --events writes one JSON line per event: \
            object_started, object_updated (at most once a second), object_ended, and with --zones \
            zone_enter, zone_exit, loitering and line_cross.

            Examples:
              spotter video street.mp4 --output street-boxes.mp4
              spotter video street.mp4 --output out.mp4 --jsonl boxes.jsonl --trails
              spotter video door.mp4 --output out.mp4 --zones z.json --events e.jsonl
              spotter video rtsp://camera.local/stream --output live.mp4 --every 1
            """)

    @Argument(help: "A video file, stream URL, /dev/videoN, or a sample's name (see `spotter samples list`).")
    var input: String

    @Option(help: "The annotated MP4 to write.")
    var output: String

    @OptionGroup var detector: DetectorOptions

    @Option(help: "Also write one JSON line per processed frame: {frame, t, analyzed, detections (with track), zones}.")
    var jsonl: String?

    @Option(help: "Also write one JSON line per event: object_started/updated/ended, zone_enter/exit, loitering, line_cross (with t and frame).")
    var events: String?

    @Flag(help: "Draw the last second of each tracked object's path.")
    var trails = false

    @OptionGroup(title: "Tracking, zones and motion") var analysisFlags: AnalysisFlags

    @Option(parsing: .unconditional, help: "Detect every N-th frame (the others keep the last boxes).")
    var every = 1

    @Option(help: "libx264 preset: ultrafast (fastest) ... veryslow (smallest files; veryfast is about half the size).")
    var preset: X264Preset = .ultrafast

    @Option(parsing: .unconditional, help: "Seconds without data before a network source counts as stalled.")
    var timeout: Double = 10

    @Flag(help: "Also find rectangles (pages, cards, screens) on every processed frame and outline them; the options below apply.")
    var rectangles = false

    @OptionGroup(title: "Rectangles (with --rectangles)") var rectangleFlags: RectangleFlags

    @OptionGroup(title: "Face recognition (with --faces)") var faceFlags: FaceNamingFlags

    func validate() throws {
        guard every >= 1 else { throw ValidationError("--every must be at least 1") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() throws {
        keepHeapCompactForLongRuns()
        let source = try self.detector.store.resolveVideo(input)
        // Messages name the input without its password.
        let input = VideoReader.redactingPassword(self.input)
        // Everything that can be checked before the model loads: no output over an input, folders
        // that exist and can be written.
        try refuseOverwriting(inputs: [source], with: output, flag: "--output")
        try checkWritable(output, flag: "--output")
        if let jsonl {
            try refuseOverwriting(inputs: [source, output], with: jsonl, flag: "--jsonl")
            try checkWritable(jsonl, flag: "--jsonl")
        }
        if let events {
            try refuseOverwriting(inputs: [source, output] + (jsonl.map { [$0] } ?? []), with: events, flag: "--events")
            try checkWritable(events, flag: "--events")
        }
        if trails, analysisFlags.noTracking { throw CommandFailure("--trails draws tracks: it cannot go with --no-tracking") }
        let zoneLayout = try analysisFlags.layout()
        let reader: VideoReader
        do { reader = try VideoReader(path: source, options: .init(openTimeout: max(timeout, 5), readTimeout: timeout)) } catch { throw CommandFailure("\(error)") }
        let namer = try faceFlags.makeNamer(store: self.detector.store, threads: self.detector.threads)
        let detection = try self.detector.makeVideoDetection(file: !reader.info.isLive && every == 1 && !analysisFlags.motion && namer == nil)
        let analyzer = try analysisFlags.makeAnalyzer(detect: detection.detect, namer: namer, threshold: self.detector.threshold,
                                                      rectangles: rectangles ? rectangleFlags.options(retriesAtFinerScale: false) : nil)
        let info = reader.info
        let staged = StagedFile(output)
        let upright = info.orientation.uprightSize(Size(width: info.width, height: info.height))
        let writer: VideoWriter
        do {
            writer = try VideoWriter(path: staged.temporary, width: upright.width, height: upright.height,
                                     options: .init(frameRate: info.frameRate ?? 25, preset: preset.rawValue))
        } catch {
            staged.discard()
            throw CommandFailure("cannot write \(output): \(error)")
        }
        let annotator = try Annotator()
        let stagedLines = jsonl.map(StagedFile.init), stagedEvents = events.map(StagedFile.init)
        func open(_ staged: StagedFile?) -> FileHandle? {
            guard let staged else { return nil }
            _ = FileManager.default.createFile(atPath: staged.temporary, contents: nil)
            return FileHandle(forWritingAtPath: staged.temporary)
        }
        let lines = open(stagedLines)
        let eventLines = open(stagedEvents).map { EventLines(handle: $0, source: input) }
        var pipelineOptions = FramePipeline.Options(every: every)
        pipelineOptions.detectAhead = detection.ahead
        let pipeline = FramePipeline(reader: reader, options: pipelineOptions)
        let interruption = Interruption(stopping: pipeline.stopRequested)
        let bar = ProgressBar(total: info.frameCount ?? 0, enabled: true)
        let sink = AnnotatingSink(writer: writer, annotator: annotator, lines: lines, events: eventLines,
                                  trailSeconds: trails ? 1 : 0, zones: zoneLayout?.inPixels(width: upright.width, height: upright.height))
        var stats: PipelineStats
        do {
            stats = try pipeline.run(analyze: { try analyzer.analyze($0, detected: $1) },
                                     consume: { try sink.consume($0) },
                                     progress: { reportProgress(bar, $0, info: info) })
            for event in analyzer.finish() { eventLines?.write(event, time: sink.lastTime, frame: nil) }
        } catch {
            bar.finish()
            let written = writer.framesWritten
            try? lines?.close()
            stagedEvents.map { try? FileHandle(forWritingAtPath: $0.temporary)?.close() }
            // The frames so far are kept only as a file that plays: finished (its index written)
            // and read back; a full disk usually prevents that, and the partial file is removed.
            let finished: Error? = written == 0 ? nil : { do { try writer.finish(); return nil } catch { return error } }()
            guard written > 0, finished == nil, Self.plays(staged.temporary), (try? staged.commit()) != nil else {
                staged.discard()
                stagedLines?.discard()
                stagedEvents?.discard()
                let why = finished.map { "; the partial video could not be finished (\($0)) and was removed" } ?? ""
                throw CommandFailure("\(mentioning(input, "\(error)")) (nothing was written\(why))")
            }
            try? stagedLines?.commit()
            try? stagedEvents?.commit()
            throw CommandFailure("\(mentioning(input, "\(error)")) (the \(written) frames before the problem were written to \(output), which plays)")
        }
        try lines?.close()
        guard writer.framesWritten > 0 else {
            try? writer.finish()
            staged.discard()
            stagedLines?.discard()
            stagedEvents?.discard()
            throw CommandFailure("\(input) holds no decodable video frame; nothing was written")
        }
        do {
            try writer.finish()
        } catch {
            staged.discard()
            stagedLines?.discard()
            stagedEvents?.discard()
            throw CommandFailure("cannot write \(output): \(error) (the partial video was removed; nothing was written)")
        }
        try staged.commit()
        try stagedLines?.commit()
        try stagedEvents?.commit()
        bar.finish()
        stats.elapsed = max(stats.elapsed, 1e-9)
        FileHandle.standardError.write(Data(String(format: "%@: %d frames in %.1f s (%.1f fps)%@\n", output, stats.processed, stats.elapsed, stats.fps,
                                                    interruption.signalled != nil ? ", interrupted" : "").utf8))
        // A live source does not wait for the detector: say how many of its frames are not in the video.
        if stats.dropped > 0 {
            warn("\(input): \(stats.dropped) of \(stats.received) frames were dropped while the detector was busy (a live source does not wait); they are not in \(output)")
        }
        if reader.damagedPackets > 0 { warn("\(input): skipped \(reader.damagedPackets) damaged packet(s)") }
        if interruption.signalled != nil { throw ExitCode(130) }
        if info.isLive { throw CommandFailure("\(input): the stream ended after \(stats.processed) frames (they were written to \(output))") }
    }
}

extension Video {
    /// Whether a written video opens and its first frame decodes.
    static func plays(_ path: String) -> Bool {
        guard let reader = try? VideoReader(path: path) else { return false }
        return (try? reader.nextFrame()) != nil
    }
}

/// The consumer of `spotter video`: draws (boxes with track ids, trails, zones, rectangles),
/// encodes, and writes JSON lines, on the consume thread (while the next frame is analyzed).
final class AnnotatingSink: @unchecked Sendable {
    // Used only from the pipeline's consume thread (and read by the main thread after the run).
    private let writer: VideoWriter
    private let annotator: Annotator
    private let lines: FileHandle?
    private let events: EventLines?
    private let trailSeconds: Double
    private let zones: ZoneLayout?
    private var last: FrameAnalysis?
    /// Each track's recent anchor points (bottom centres) with their times.
    private var trails: [Int: [(time: Double, point: Point)]] = [:]
    private(set) var lastTime: Double?

    init(writer: VideoWriter, annotator: Annotator, lines: FileHandle?, events: EventLines? = nil, trailSeconds: Double = 0, zones: ZoneLayout? = nil) {
        self.writer = writer
        self.annotator = annotator
        self.lines = lines
        self.events = events
        self.trailSeconds = trailSeconds
        self.zones = zones
    }

    func consume(_ item: DetectedFrame) throws {
        var image = item.frame.image
        lastTime = item.frame.time
        if let analysis = item.analysis {
            last = analysis
            if let lines { lines.write(ResultEncoding.encodeData(analysis) + Data([0x0A])) }
            events?.write(analysis)
            if trailSeconds > 0 { remember(analysis) }
        }
        if let zones { image.draw(zones) }
        if let rectangles = last?.rectangles { image.outline(rectangles) }
        if trailSeconds > 0 { drawTrails(on: &image) }
        annotator.draw(last?.detections ?? [], on: &image)
        try writer.write(image, time: item.frame.time)
    }

    private func remember(_ analysis: FrameAnalysis) {
        for detection in analysis.detections {
            guard let id = detection.track else { continue }
            trails[id, default: []].append((analysis.time, ZoneMonitor.anchor(of: detection.box)))
        }
        for id in trails.keys {
            trails[id]!.removeAll { analysis.time - $0.time > trailSeconds }
            if trails[id]!.isEmpty { trails[id] = nil }
        }
    }

    private func drawTrails(on image: inout Image) {
        if image.format != .rgb24 { image = image.converted(to: .rgb24) }
        let width = max(2, Double(min(image.width, image.height)) / 240)
        for (id, points) in trails where points.count >= 2 {
            image.strokePolyline(points.map(\.point), lineWidth: width, color: Color.forClass(id + 7))
        }
    }
}
