import ArgumentParser
import Detection
import Foundation
import Imaging
import Media
import Rectangles
import Pipeline

/// libx264's presets, fastest first.
enum X264Preset: String, ExpressibleByArgument, CaseIterable {
    case ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow
}

/// Stops the running pipeline on SIGINT and SIGTERM, so open files are finished before exiting.
final class Interruption: @unchecked Sendable {
    // `target` and `signalled` are guarded by `lock`: set on the main thread, read by the handlers.
    private let lock = NSLock()
    private var sources: [DispatchSourceSignal] = []
    private var target: StopFlag?
    private var number: Int32?

    init() {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [weak self] in
                guard let self else { return }
                let flag = self.lock.withLock {
                    self.number = signalNumber
                    return self.target
                }
                flag?.set()
            }
            source.resume()
            sources.append(source)
        }
    }

    convenience init(stopping flag: StopFlag) {
        self.init()
        stop(flag)
    }

    /// The pipeline flag a signal sets from now on.
    func stop(_ flag: StopFlag) {
        let signalled = lock.withLock {
            target = flag
            return number != nil
        }
        if signalled { flag.set() }
    }

    var signalled: Int32? { lock.withLock { number } }

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

            Examples:
              spotter video street.mp4 --output street-boxes.mp4
              spotter video street.mp4 --output out.mp4 --jsonl boxes.jsonl
              spotter video rtsp://camera.local/stream --output live.mp4 --every 1
            """)

    @Argument(help: "A video file, stream URL, /dev/videoN, or a sample's name (see `spotter samples list`).")
    var input: String

    @Option(help: "The annotated MP4 to write.")
    var output: String

    @OptionGroup var detector: DetectorOptions

    @Option(help: "Also write one JSON line per processed frame: {frame, t, detections}.")
    var jsonl: String?

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
        let reader: VideoReader
        do { reader = try VideoReader(path: source, options: .init(openTimeout: max(timeout, 5), readTimeout: timeout)) } catch { throw CommandFailure("\(error)") }
        let detector = try self.detector.makeDetector(pipelined: true)
        let namer = try faceFlags.makeNamer(store: self.detector.store, threads: self.detector.threads)
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
        let stagedLines = jsonl.map(StagedFile.init)
        let lines: FileHandle?
        if let stagedLines {
            FileManager.default.createFile(atPath: stagedLines.temporary, contents: nil)
            lines = FileHandle(forWritingAtPath: stagedLines.temporary)
        } else {
            lines = nil
        }
        let pipeline = FramePipeline(reader: reader, options: .init(every: every))
        let interruption = Interruption(stopping: pipeline.stopRequested)
        let bar = ProgressBar(total: info.frameCount ?? 0, enabled: true)
        let sink = AnnotatingSink(writer: writer, annotator: annotator, lines: lines,
                                  rectangles: rectangles ? try rectangleFlags.makeDetector(retriesAtFinerScale: false) : nil)
        var stats: PipelineStats
        do {
            stats = try pipeline.run(detect: { frame in
                                         let found = try detector.detect(frame.image).detections
                                         return try namer?.name(found, in: frame.image) ?? found
                                     },
                                     consume: { try sink.consume($0) },
                                     progress: { reportProgress(bar, $0, info: info) })
        } catch {
            bar.finish()
            let written = writer.framesWritten
            try? lines?.close()
            // The frames so far are kept only as a file that plays: finished (its index written)
            // and read back; a full disk usually prevents that, and the partial file is removed.
            let finished: Error? = written == 0 ? nil : { do { try writer.finish(); return nil } catch { return error } }()
            guard written > 0, finished == nil, Self.plays(staged.temporary), (try? staged.commit()) != nil else {
                staged.discard()
                stagedLines?.discard()
                let why = finished.map { "; the partial video could not be finished (\($0)) and was removed" } ?? ""
                throw CommandFailure("\(mentioning(input, "\(error)")) (nothing was written\(why))")
            }
            try? stagedLines?.commit()
            throw CommandFailure("\(mentioning(input, "\(error)")) (the \(written) frames before the problem were written to \(output), which plays)")
        }
        try lines?.close()
        guard writer.framesWritten > 0 else {
            try? writer.finish()
            staged.discard()
            stagedLines?.discard()
            throw CommandFailure("\(input) holds no decodable video frame; nothing was written")
        }
        do {
            try writer.finish()
        } catch {
            staged.discard()
            stagedLines?.discard()
            throw CommandFailure("cannot write \(output): \(error) (the partial video was removed; nothing was written)")
        }
        try staged.commit()
        try stagedLines?.commit()
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

/// The consumer of `spotter video`: finds rectangles (with `--rectangles`), draws, encodes, and
/// writes JSON lines, on the consume thread (while inference runs on the next frame).
final class AnnotatingSink: @unchecked Sendable {
    // Used only from the pipeline's consume thread.
    private let writer: VideoWriter
    private let annotator: Annotator
    private let lines: FileHandle?
    private let rectangleDetector: RectangleDetector?
    private var last: [Detection] = []
    private var lastRectangles: [RectangleObservation] = []

    init(writer: VideoWriter, annotator: Annotator, lines: FileHandle?, rectangles: RectangleDetector? = nil) {
        self.writer = writer
        self.annotator = annotator
        self.lines = lines
        rectangleDetector = rectangles
    }

    func consume(_ item: DetectedFrame) throws {
        var image = item.frame.image
        if let detections = item.detections {
            last = detections
            if let rectangleDetector { lastRectangles = rectangleDetector.detect(in: image) }
            if let lines {
                var object: [String: Any] = ["frame": item.frame.index, "t": (item.frame.time * 1000).rounded() / 1000,
                                             "detections": detections.map(ResultEncoding.detectionObject)]
                if rectangleDetector != nil { object["rectangles"] = lastRectangles.map(\.jsonObject) }
                lines.write(Data((ResultEncoding.serialize(object) + "\n").utf8))
            }
        }
        image.outline(lastRectangles)
        annotator.draw(last, on: &image)
        try writer.write(image, time: item.frame.time)
    }
}
