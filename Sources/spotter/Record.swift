import ArgumentParser
import Detection
import Foundation
import Media
import Pipeline

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
            A clip starts at the first frame with a matching detection and stops once --post-roll \
            seconds of video time pass without one; a later match starts a new clip. Clips are H.264 \
            MP4 with boxes drawn, each with a thumbnail of its best frame and an entry in the album's \
            index (DIR/index.sqlite). Ctrl-C finishes the open clip before exiting.

            Examples:
              spotter record doorbell.mp4 --album ~/Clips
              spotter record rtsp://cam.local/live --album ~/Clips --reconnect
              spotter record street.mp4 --album clips/ --json | jq .event
              spotter record rtsp://cam.local/live --album ~/Clips --faces ~/faces.sqlite --trigger unknown-face
            """)

    @Argument(help: "A video file, stream URL, /dev/videoN, or a sample's name (see `spotter samples list`).")
    var input: String

    @Option(help: "Folder for clips, thumbnails and index.sqlite (created if needed).")
    var album: String

    @OptionGroup var detector: DetectorOptions

    @Option(help: "Seconds of video time to keep recording after the last match.")
    var postRoll: Double = 5

    @Option(help: "Seconds of video before the first match to include (kept in memory, at most 256 MiB of frames).")
    var preRoll: Double = 0

    @Flag(help: "Record the frames without boxes.")
    var noBoxes = false

    @Flag(help: "Print one JSON line per event: clip_started, clip_finished, progress.")
    var json = false

    @Option(help: "libx264 preset for the clips: ultrafast (fastest) ... veryslow (smallest files).")
    var preset: X264Preset = .ultrafast

    @Flag(help: "Live sources: when the stream ends or stalls, finish the open clip and reconnect (waiting 1, 2, 4 ... 30 s between attempts) until interrupted.")
    var reconnect = false

    @Option(help: "Seconds without data before a network source counts as stalled.")
    var timeout: Double = 10

    @OptionGroup(title: "Face recognition (with --faces)") var faceFlags: FaceNamingFlags

    @Option(help: "What records: detection (any detection of --classes) or unknown-face (a person whose face matches no one in the --faces gallery).")
    var trigger: RecordTrigger = .detection

    /// Frames of pre-roll that fit in 256 MiB of RGB pixels.
    static func preRollFrames(_ info: VideoReader.Info) -> Int {
        max(1, (256 << 20) / max(1, info.width * info.height * 3))
    }

    func validate() throws {
        guard postRoll >= 0, preRoll >= 0 else { throw ValidationError("--post-roll and --pre-roll cannot be negative") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        if trigger == .unknownFace, faceFlags.faces == nil { throw ValidationError("--trigger unknown-face needs --faces GALLERY") }
    }

    func run() throws {
        keepHeapCompactForLongRuns()
        var options = detector
        if options.classes == nil { options.classes = "person" }
        // The album first: a folder that cannot be written fails before the model loads.
        let albumStore: Album
        do { albumStore = try Album(directory: URL(fileURLWithPath: album)) } catch { throw CommandFailure("--album: \(error)") }
        let repair = try albumStore.repair()
        if !repair.adopted.isEmpty || !repair.removed.isEmpty {
            warn("\(album): indexed \(repair.adopted.count) clip(s) an earlier run left unfinished (marked incomplete), removed \(repair.removed.count) unreadable one(s)")
        }
        let source = try self.detector.store.resolveVideo(input)
        let interruption = Interruption()
        let readerOptions = VideoReader.Options(openTimeout: max(timeout, 5), readTimeout: timeout)
        let reader: VideoReader
        do { reader = try VideoReader(path: source, options: readerOptions) } catch { throw CommandFailure("\(error)") }
        let detector = try options.makeDetector(pipelined: true)
        let namer = try faceFlags.makeNamer(store: self.detector.store, threads: self.detector.threads)
        let strangersOnly = trigger == .unknownFace
        let info = reader.info
        let json = self.json
        let albumDirectory = albumStore.directory
        let emit: @Sendable (String) -> Void = { line in
            print(line)
            fflush(nil)
        }
        var sessionOptions = ClipSession.Options(
            policy: .init(postRoll: postRoll, preRoll: preRoll, maxPreRollFrames: Self.preRollFrames(info)), drawBoxes: !noBoxes,
            frameRate: info.frameRate ?? 25, preset: preset.rawValue)
        if strangersOnly {
            // A clip runs while a stranger is in view; known people are still drawn with their names.
            sessionOptions.triggers = { $0.isStranger }
        }
        let session = try ClipSession(
            album: albumStore, source: Album.sourceName(source), options: sessionOptions,
            events: { event in
                switch event {
                case .clipStarted(let path, let start):
                    if json { emit(ResultEncoding.serialize(["event": "clip_started", "path": path, "start": milliseconds(start)])) }
                case .clipFinished(let entry):
                    if json {
                        emit(ResultEncoding.serialize([
                            // Absolute paths, like clip_started's; the index keeps them relative to the album.
                            "event": "clip_finished", "path": albumDirectory.appendingPathComponent(entry.clip).path,
                            "start": milliseconds(entry.start), "end": milliseconds(entry.end),
                            "frames": entry.frames, "duration": milliseconds(entry.duration), "labels": entry.labels, "best_score": entry.bestScore,
                            "incomplete": entry.incomplete,
                            "thumbnail": entry.thumbnail.map { albumDirectory.appendingPathComponent($0).path } ?? ""]))
                    } else {
                        emit(String(format: "%@  %.1f-%.1f s  %d frames  %@ (best %.2f)", entry.clip, entry.start, entry.end,
                                    entry.frames, entry.labels, entry.bestScore))
                    }
                }
            })
        let bar = ProgressBar(total: info.frameCount ?? 0, enabled: !json)
        let progressLines = Throttle(seconds: 2)
        let input = self.input
        let run = SourceRun(
            input: source, options: .init(reconnect: reconnect, reader: readerOptions), recorder: session,
            detect: { frame in
                let found = try detector.detect(frame.image).detections
                guard let namer else { return found }
                return try namer.name(found, in: frame.image)
            },
            events: { event in
                switch event {
                case .progress(let stats):
                    reportProgress(bar, stats, info: info)
                    if json, progressLines.ready() {
                        emit(ResultEncoding.serialize(["event": "progress", "received": stats.received, "processed": stats.processed,
                                                       "dropped": stats.dropped, "fps": (stats.fps * 10).rounded() / 10,
                                                       "inference_ms": (stats.inferenceMilliseconds * 100).rounded() / 100]))
                    }
                case .state(.reconnecting, let message?):
                    warn("\(input): \(message)")
                default:
                    break
                }
            })
        interruption.stop(run.stopRequested)
        func kept() -> String { session.clipsFinished == 0 ? "no clip was recorded" : "\(session.clipsFinished) clip(s) are in \(album)" }
        let total: PipelineStats
        do {
            total = try run.run(opened: reader)
        } catch SourceRunError.streamEnded(let frames) {
            bar.finish()
            throw CommandFailure("\(input): the stream ended after \(frames) frames (\(kept()); --reconnect waits for it to come back)")
        } catch {
            bar.finish()
            throw CommandFailure("\(input): \(error) (\(kept()))")
        }
        bar.finish()
        if reader.damagedPackets > 0 { warn("\(input): skipped \(reader.damagedPackets) damaged packet(s)") }
        if total.processed == 0 && interruption.signalled == nil {
            throw CommandFailure("\(input) holds no decodable video frame; nothing was recorded")
        }
        let summary = String(format: "%d frames in %.1f s (%.1f fps), %d dropped, %d clip(s); album: %@", total.processed, total.elapsed, total.fps,
                             total.dropped, session.clipsFinished, album)
        if json {
            emit(ResultEncoding.serialize(["event": "finished", "processed": total.processed, "dropped": total.dropped,
                                           "fps": (total.fps * 10).rounded() / 10, "interrupted": interruption.signalled != nil]))
        } else {
            FileHandle.standardError.write(Data((summary + "\n").utf8))
        }
        if interruption.signalled != nil { throw ExitCode(130) }
    }
}

/// Seconds rounded to the millisecond, for JSON.
func milliseconds(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
