import ArgumentParser
import Detection
import Faces
import Foundation
import Imaging
import Pipeline
import Rectangles
import Tracking

/// The flags of `video` and `record` that shape their frame analysis beyond detection: tracking,
/// zones and lines, stationary objects, motion gating.
struct AnalysisFlags: ParsableArguments {
    @Option(help: "A zones file (JSON: zones with polygons, lines with from and to; see `spotter track --help`): zone and line events, counted per track.")
    var zones: String?

    @Flag(help: "Skip inference on frames where nothing moves and no tracked object is moving (the tracks keep their boxes).")
    var motion = false

    @Option(parsing: .unconditional, help: "Seconds a tracked object must stay in place to be stationary (a parked car opens no clip).")
    var stationarySeconds: Double = 10

    @Flag(help: "Do not track: detections carry no ids and every detection counts on its own.")
    var noTracking = false

    func validate() throws {
        guard stationarySeconds > 0, stationarySeconds.isFinite else { throw ValidationError("--stationary-seconds must be positive") }
        if noTracking, zones != nil { throw ValidationError("--zones follows tracks: it cannot go with --no-tracking") }
    }

    /// The zones file, read and checked.
    func layout() throws -> ZoneLayout? {
        try zones.map(ZoneFile.read)
    }

    /// The analyzer for `detect` (and faces named by `namer`, rectangles found with `rectangles`).
    func makeAnalyzer(detect: @escaping (Image) throws -> [Detection], namer: PersonNamer?, threshold: Float,
                      rectangles: RectangleDetector.Options? = nil) throws -> StandardAnalyzer {
        var options = StandardAnalyzer.Options(threshold: threshold, tracking: !noTracking)
        options.zones = try layout()
        options.motion = motion ? MotionDetector.Options() : nil
        options.rectangles = rectangles
        options.tracker.stationarySeconds = stationarySeconds
        return try StandardAnalyzer(options: options) { image, keep in
            let found = try detect(image).filter(keep)
            return try namer?.name(found, in: image) ?? found
        }
    }
}

/// One JSON line per event, flushed at once (a pipe reader sees each as it happens).
final class EventLines: Sendable {
    /// Written from one thread at a time: the pipeline's consume thread, then the main thread after the run.
    private let handle: FileHandle
    private let source: String?
    private let legacyName: Bool

    init(handle: FileHandle, source: String?, legacyName: Bool = false) {
        self.handle = handle
        self.source = source
        self.legacyName = legacyName
    }

    func write(_ event: AnalysisEvent, time: Double?, frame: Int?) {
        var line = ResultEncoding.encodeData(SourceEvent(source: source, time: time, frame: frame, event: event, legacyName: legacyName))
        line.append(0x0A)
        handle.write(line)
    }

    /// A clip event of `record --json` (with its legacy top-level fields).
    func write(_ clip: LegacyClipEvent, time: Double?) {
        var line = ResultEncoding.encodeData(SourceEvent(source: source, time: time, event: clip.event, legacyName: legacyName))
        // The clip event's own fields, then the legacy ones, in one object.
        let extra = ResultEncoding.encodeData(clip)
        if extra.count > 2, line.count > 2 {
            line.removeLast()
            line.append(contentsOf: Data(",".utf8) + extra.dropFirst())
        }
        line.append(0x0A)
        handle.write(line)
    }

    func write(_ analysis: FrameAnalysis) {
        for event in analysis.events { write(event, time: analysis.time, frame: analysis.frame) }
    }
}
