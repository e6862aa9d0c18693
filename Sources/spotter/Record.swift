import ArgumentParser
import Detection
import Foundation
import Media
import Pipeline
import Synchronization

/// What starts and keeps a clip going.
enum RecordTrigger: String, ExpressibleByArgument, CaseIterable {
    /// Any detection of the chosen classes.
    case detection
    /// A person whose face is recognizable but matches no one in the `--faces` gallery.
    case unknownFace = "unknown-face"
}

struct Record: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a clip whenever a person (or another class) appears, into an album.",
        discussion: """
            Objects are tracked: a clip starts when a tracked object of the wanted classes is \
            confirmed (seen in two frames in a row; a single-frame detection opens nothing), from \
            the frame it was first seen, and stops once --post-roll seconds of video time pass \
            without one; a later one starts a new clip. An object that stays in place \
            (--stationary-seconds: a parked car) opens no new clip, even after frames that missed it; \
            a clip open when it arrived goes on while it is seen. Clips are \
            H.264 MP4 with boxes drawn (`#ID label score`), each with a thumbnail of its best frame \
            and an entry in the album's index (DIR/index.sqlite) that lists its objects. \
            Ctrl-C finishes the open clip before exiting.

            --json prints one JSON line per event: object_started, object_updated, object_ended, \
            zone_enter, zone_exit, loitering, line_cross (with --zones), clip_started, \
            clip_finished, progress, finished.

            Examples:
              spotter record doorbell.mp4 --album ~/Clips
              spotter record rtsp://cam.local/live --album ~/Clips --reconnect
              spotter record street.mp4 --album clips/ --json | jq .type
              spotter record rtsp://cam.local/live --album ~/Clips \\
                --zones door.json --require-zone door
              spotter record rtsp://cam.local/live --album ~/Clips \\
                --faces ~/faces.sqlite --trigger unknown-face
            """)

    @Argument(help: "A video file, stream URL, /dev/videoN, or a sample's name (see `spotter samples list`).")
    var input: String

    @Option(help: "Folder for clips, thumbnails and index.sqlite (created if needed).")
    var album: String

    @OptionGroup var detector: DetectorOptions

    @Option(parsing: .unconditional, help: "Seconds of video time to keep recording after the last match.")
    var postRoll: Double = 5

    @Option(parsing: .unconditional, help: "Seconds of video before the first match to include (kept in memory, at most 256 MiB of frames).")
    var preRoll: Double = 0

    @Flag(help: "Record the frames without boxes.")
    var noBoxes = false

    @Flag(help: "Print one JSON line per event: clip_started, clip_finished, progress.")
    var json = false

    @Option(help: "libx264 preset for the clips: ultrafast (fastest) ... veryslow (smallest files).")
    var preset: X264Preset = .ultrafast

    @Flag(help: "Live sources: when the stream ends or stalls, finish the open clip and reconnect (waiting 1, 2, 4 ... 30 s between attempts) until interrupted.")
    var reconnect = false

    @Option(parsing: .unconditional, help: "Seconds without data before a network source counts as stalled.")
    var timeout: Double = 10

    @OptionGroup(title: "Face recognition (with --faces)") var faceFlags: FaceNamingFlags

    @Option(help: "What records: detection (any detection of --classes) or unknown-face (a person whose face matches no one in the --faces gallery).")
    var trigger: RecordTrigger = .detection

    @OptionGroup(title: "Tracking, zones and motion") var analysisFlags: AnalysisFlags

    @Option(help: "Only objects inside this zone (of --zones) open and keep clips; repeat for several.")
    var requireZone: [String] = []

    /// Frames of pre-roll that fit in 256 MiB of RGB pixels.
    static func preRollFrames(_ info: VideoReader.Info) -> Int {
        max(1, (256 << 20) / max(1, info.width * info.height * 3))
    }

    func validate() throws {
        guard postRoll >= 0, preRoll >= 0 else { throw ValidationError("--post-roll and --pre-roll cannot be negative") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        if trigger == .unknownFace, faceFlags.faces == nil { throw ValidationError("--trigger unknown-face needs --faces GALLERY") }
        if !requireZone.isEmpty, analysisFlags.zones == nil { throw ValidationError("--require-zone needs --zones FILE") }
    }

    func run() throws {
        keepHeapCompactForLongRuns()
        var options = detector
        if options.classes == nil { options.classes = "person" }
        // The album first: a folder that cannot be written fails before the model loads.
        let albumStore: Album
        do { albumStore = try Album(directory: URL(fileURLWithPath: album)) } catch { throw CommandFailure("--album: \(error)") }
        if let recovery = albumStore.recovery { warn(describe(recovery, album: album)) }
        let repair = try albumStore.repair()
        if !repair.adopted.isEmpty || !repair.removed.isEmpty {
            warn("\(album): indexed \(repair.adopted.count) clip(s) an earlier run left without a row, removed \(repair.removed.count) unreadable one(s)")
        }
        let source = try self.detector.store.resolveVideo(input)
        let interruption = Interruption()
        let readerOptions = VideoReader.Options(openTimeout: max(timeout, 5), readTimeout: timeout)
        // A file is opened now, so a bad one fails before the model loads; a live source is opened
        // by the run, which with --reconnect waits for a camera that is not up yet.
        var reader: VideoReader?
        if !(reconnect && SourceRun.isLive(source)) {
            do { reader = try VideoReader(path: source, options: readerOptions) } catch { throw CommandFailure("\(error)") }
        }
        if let layout = try analysisFlags.layout() {
            let names = Set(layout.zones.map(\.name))
            let unknown = requireZone.filter { !names.contains($0) }
            guard unknown.isEmpty else { throw CommandFailure("--require-zone \(unknown.joined(separator: ", ")): no such zone in \(analysisFlags.zones ?? "")") }
        }
        let namer = try faceFlags.makeNamer(store: self.detector.store, threads: self.detector.threads)
        let isFile = reader.map { !$0.info.isLive } ?? false
        let detection = try options.makeVideoDetection(file: isFile && !analysisFlags.motion && namer == nil)
        let analyzer = try analysisFlags.makeAnalyzer(detect: detection.detect, namer: namer, threshold: options.threshold)
        let requiredZones = requireZone.isEmpty ? nil : Set(requireZone)
        let strangersOnly = trigger == .unknownFace
        let json = self.json
        let albumDirectory = albumStore.directory
        let emit: @Sendable (String) -> Void = { line in
            print(line)
            fflush(nil)
        }
        let (postRoll, preRoll, noBoxes, preset) = (self.postRoll, self.preRoll, self.noBoxes, self.preset)
        let recorded = Recorded()
        // Messages name the input without its password.
        let input = VideoReader.redactingPassword(self.input)
        let eventLines = json ? EventLines(handle: .standardOutput, source: input, legacyName: true) : nil
        let clipEvents: @Sendable (RecorderEvent) -> Void = { event in
                switch event {
                case .clipStarted(let path, let start):
                    if let eventLines {
                        eventLines.write(LegacyClipEvent(event: .clipStarted(path: path, start: start), path: path, thumbnail: nil), time: start)
                    }
                case .clipFinished(let entry):
                    if let eventLines {
                        // Absolute paths, like clip_started's; the index keeps them relative to the album.
                        let report = ClipReport(entry, album: albumDirectory)
                        eventLines.write(LegacyClipEvent(event: .clipFinished(report), path: albumDirectory.appendingPathComponent(entry.clip).path,
                                                         thumbnail: entry.thumbnail.map { albumDirectory.appendingPathComponent($0).path } ?? ""), time: entry.end)
                    } else {
                        emit(String(format: "%@  %.1f-%.1f s  %d frames  %@ (best %.2f)", entry.clip, entry.start, entry.end,
                                    entry.frames, entry.labels, entry.bestScore))
                    }
                case .clipRefused:
                    break  // only a cluster's sources record under a lease
                }
            }
        let progressLines = Throttle(seconds: 2)
        var runOptions = SourceRun.Options(reconnect: reconnect, reader: readerOptions)
        runOptions.pipeline.detectAhead = detection.ahead
        let run = SourceRun(
            input: source, options: runOptions,
            recorder: { info in
                var sessionOptions = ClipSession.Options(
                    policy: .init(postRoll: postRoll, preRoll: preRoll, maxPreRollFrames: Self.preRollFrames(info)), drawBoxes: !noBoxes,
                    frameRate: info.frameRate ?? 25, preset: preset.rawValue)
                if strangersOnly {
                    // A clip runs while a stranger is in view; known people are still drawn with their names.
                    sessionOptions.triggers = { $0.isStranger }
                }
                sessionOptions.requiredZones = requiredZones
                let session = try ClipSession(album: albumStore, source: Album.sourceName(source), options: sessionOptions, events: clipEvents)
                recorded.session = session
                return session
            },
            analyzer: analyzer,
            events: { event in
                switch event {
                case .frame(let item):
                    if let eventLines, let analysis = item.analysis { eventLines.write(analysis) }
                case .analysis(let ended):
                    for event in ended { eventLines?.write(event, time: nil, frame: nil) }
                case .opened(let info):
                    recorded.opened(info, bar: ProgressBar(total: info.frameCount ?? 0, enabled: !json))
                case .progress(let stats):
                    if let (bar, info) = recorded.progress { reportProgress(bar, stats, info: info) }
                    if json, progressLines.ready() {
                        emit(ResultEncoding.encode(RunReport(type: "progress", received: stats.received, processed: stats.processed, dropped: stats.dropped,
                                                             skipped: stats.skipped, fps: (stats.fps * 10).rounded() / 10,
                                                             inferenceMilliseconds: (stats.inferenceMilliseconds * 100).rounded() / 100)))
                    }
                case .state(.reconnecting, let message?):
                    warn(mentioning(input, message))
                case .state(.waiting, let message?):
                    warn("waiting for the source: " + mentioning(input, message))
                default:
                    break
                }
            })
        interruption.stop(run.stopRequested)
        func kept() -> String {
            let session = recorded.session
            // Rows a locked index delayed: once more now that recording is over.
            if let pending = session?.pendingRows, !pending.isEmpty { _ = try? albumStore.repair() }
            let finished = session?.clipsFinished ?? 0
            let waiting = (session?.pendingRows.count ?? 0) + (session?.unindexed.count ?? 0)
            var text = finished == 0 ? "no clip was indexed" : "\(finished) clip(s) are in \(album)"
            if waiting > 0 { text += "; \(waiting) recorded clip(s) are on disk without an index row: `spotter album repair \(album)` indexes them" }
            for (clip, bytes) in session?.unreadable ?? [] { text += "; \(clip) had no readable frame in its \(bytes) bytes and was removed" }
            return text
        }
        let total: PipelineStats
        do {
            total = try run.run(opened: reader)
        } catch SourceRunError.streamEnded(let frames) {
            recorded.progress?.bar.finish()
            throw CommandFailure("\(input): the stream ended after \(frames) frames (\(kept()); --reconnect waits for it to come back)")
        } catch {
            recorded.progress?.bar.finish()
            throw CommandFailure("\(mentioning(input, "\(error)")) (\(kept()))")
        }
        recorded.progress?.bar.finish()
        let afterRun = kept()
        if afterRun.contains("without an index row") { warn(afterRun) }
        if let reader, reader.damagedPackets > 0 { warn("\(input): skipped \(reader.damagedPackets) damaged packet(s)") }
        if total.processed == 0 && interruption.signalled == nil {
            throw CommandFailure("\(input) holds no decodable video frame; nothing was recorded")
        }
        let summary = String(format: "%d frames in %.1f s (%.1f fps), %d dropped, %d clip(s); album: %@", total.processed, total.elapsed, total.fps,
                             total.dropped, recorded.session?.clipsFinished ?? 0, album)
        if json {
            emit(ResultEncoding.encode(RunReport(type: "finished", processed: total.processed, dropped: total.dropped, skipped: total.skipped,
                                                 fps: (total.fps * 10).rounded() / 10, interrupted: interruption.signalled != nil)))
        } else {
            FileHandle.standardError.write(Data((summary + "\n").utf8))
        }
        if interruption.signalled != nil { throw ExitCode(130) }
    }
}

/// What a record run learns from its threads: the clip session (made once the source is open) and
/// the progress bar of the current connection.
private final class Recorded: Sendable {
    // Written by the run's threads, read by the main thread after or during the run.
    private let storedSession = Mutex<ClipSession?>(nil)
    private let storedProgress = Mutex<(bar: ProgressBar, info: VideoReader.Info)?>(nil)

    var session: ClipSession? {
        get { storedSession.withLock { $0 } }
        set { storedSession.withLock { $0 = newValue } }
    }

    var progress: (bar: ProgressBar, info: VideoReader.Info)? { storedProgress.withLock { $0 } }

    /// A new connection: a bar of its own (the earlier one is finished).
    func opened(_ info: VideoReader.Info, bar: ProgressBar) {
        let previous = storedProgress.withLock { stored in
            defer { stored = (bar, info) }
            return stored?.bar
        }
        previous?.finish()
    }
}

/// Seconds rounded to the millisecond, for JSON.
func milliseconds(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }

/// `record --json`'s clip events: the event (``AnalysisEvent``) with, for scripts written before
/// the clip was nested, `path` and `thumbnail` (absolute) at the top level too.
struct LegacyClipEvent: Encodable {
    let event: AnalysisEvent
    let path: String?
    let thumbnail: String?

    enum CodingKeys: String, CodingKey { case path, thumbnail }

    /// Only the legacy fields: the event is encoded by ``EventLines``.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(path, forKey: .path)
        try container.encodeIfPresent(thumbnail, forKey: .thumbnail)
    }
}

/// `record --json`'s `progress` and `finished` lines.
struct RunReport: Encodable {
    let type: String
    var received: Int?
    let processed: Int
    let dropped: Int
    let skipped: Int
    let fps: Double
    var inferenceMilliseconds: Double?
    var interrupted: Bool?

    init(type: String, received: Int? = nil, processed: Int, dropped: Int, skipped: Int, fps: Double, inferenceMilliseconds: Double? = nil,
         interrupted: Bool? = nil) {
        self.type = type
        self.received = received
        self.processed = processed
        self.dropped = dropped
        self.skipped = skipped
        self.fps = fps
        self.inferenceMilliseconds = inferenceMilliseconds
        self.interrupted = interrupted
    }

    enum CodingKeys: String, CodingKey {
        case type, event, received, processed, dropped, skipped, fps, interrupted
        case inferenceMilliseconds = "inference_ms"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        // Readers from before `type`.
        try container.encode(type, forKey: .event)
        try container.encodeIfPresent(received, forKey: .received)
        try container.encode(processed, forKey: .processed)
        try container.encode(dropped, forKey: .dropped)
        try container.encode(skipped, forKey: .skipped)
        try container.encode(fps, forKey: .fps)
        try container.encodeIfPresent(inferenceMilliseconds, forKey: .inferenceMilliseconds)
        try container.encodeIfPresent(interrupted, forKey: .interrupted)
    }
}
