import Detection
import Foundation
import Imaging
import Media
import Rectangles
import Tracking

/// What the analysis of one frame found: its detections (with track ids when tracking), the
/// tracked objects alive, rectangles, who is in which zone, and the events the frame caused.
///
/// JSON (a line of `video --jsonl`, the server's `detection` event): `frame`, `t` (seconds),
/// `analyzed` (false when motion gating skipped inference: the detections are then the tracks'
/// last boxes), `detections`, and when asked for `rectangles` and `zones` [{`name`, `tracks`}].
/// The events are encoded on their own (``SourceEvent``).
public struct FrameAnalysis: Sendable, Encodable {
    /// Position of the frame in decoding order.
    public var frame: Int
    /// Seconds of source time.
    public var time: Double
    /// Whether inference ran on this frame (false: motion gating skipped it).
    public var analyzed: Bool
    public var detections: [Detection]
    /// Confirmed tracks alive after this frame (seen now or lately), with their history.
    public var tracks: [TrackedObject]
    /// Nil unless rectangles were asked for.
    public var rectangles: [RectangleObservation]?
    /// Nil unless zones were given: the tracks in each zone.
    public var zones: [ZoneOccupancy]?
    /// Whether the frame was compared for motion and moved (nil without motion gating).
    public var motion: Bool?
    /// What happened at this frame: objects that started, ended or changed, zone and line events.
    public var events: [AnalysisEvent]
    /// Whether the detections carry track ids.
    public var isTracked: Bool

    enum CodingKeys: String, CodingKey {
        case frame, analyzed, detections, rectangles, zones
        case time = "t"
    }

    public init(frame: Int, time: Double, analyzed: Bool = true, detections: [Detection], tracks: [TrackedObject] = [],
                rectangles: [RectangleObservation]? = nil, zones: [ZoneOccupancy]? = nil, motion: Bool? = nil,
                events: [AnalysisEvent] = [], isTracked: Bool = false) {
        self.frame = frame
        self.time = time
        self.analyzed = analyzed
        self.detections = detections
        self.tracks = tracks
        self.rectangles = rectangles
        self.zones = zones
        self.motion = motion
        self.events = events
        self.isTracked = isTracked
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(frame, forKey: .frame)
        try container.encode(ResultEncoding.round3(time), forKey: .time)
        try container.encode(analyzed, forKey: .analyzed)
        try container.encode(detections, forKey: .detections)
        try container.encodeIfPresent(rectangles, forKey: .rectangles)
        try container.encodeIfPresent(zones, forKey: .zones)
    }
}

/// The tracks inside one zone.
public struct ZoneOccupancy: Sendable, Encodable, Equatable {
    public var name: String
    public var tracks: [Int]
}

/// An object followed over time: one confirmed track.
///
/// JSON: `track`, `label`, `class_id`, `first_t` and `last_t` (seconds of source time it was first
/// and last seen), `score` and `box` (its last detection), `best_score` and `best_t`, `stationary`,
/// `zones` (names it is in), and from the server `snapshot_url` (object_ended).
public struct TrackedObject: Sendable, Encodable, Equatable {
    public var track: Int
    public var label: String
    public var classIndex: Int
    public var firstSeen: Double
    public var lastSeen: Double
    public var score: Float
    public var box: Rect
    public var bestScore: Float
    public var bestTime: Double
    public var isStationary: Bool
    public var zones: [String]
    /// The best-scoring detection's box cut from its frame (with a margin), kept with an ended
    /// object for its snapshot; never encoded.
    public var snapshot: Image?
    /// Where the server serves that snapshot (`snapshot_url`, object_ended only).
    public var snapshotURL: String?

    enum CodingKeys: String, CodingKey {
        case track, label, score, box, zones
        case classIndex = "class_id"
        case firstSeen = "first_t"
        case lastSeen = "last_t"
        case bestScore = "best_score"
        case bestTime = "best_t"
        case isStationary = "stationary"
        case snapshotURL = "snapshot_url"
    }

    private struct Box: Encodable { let xmin, ymin, xmax, ymax: Double }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(track, forKey: .track)
        try container.encode(label, forKey: .label)
        try container.encode(classIndex, forKey: .classIndex)
        try container.encode(ResultEncoding.round3(firstSeen), forKey: .firstSeen)
        try container.encode(ResultEncoding.round3(lastSeen), forKey: .lastSeen)
        try container.encode(ResultEncoding.round4(Double(score)), forKey: .score)
        try container.encode(Box(xmin: ResultEncoding.round3(box.minX), ymin: ResultEncoding.round3(box.minY),
                                 xmax: ResultEncoding.round3(box.maxX), ymax: ResultEncoding.round3(box.maxY)), forKey: .box)
        try container.encode(ResultEncoding.round4(Double(bestScore)), forKey: .bestScore)
        try container.encode(ResultEncoding.round3(bestTime), forKey: .bestTime)
        try container.encode(isStationary, forKey: .isStationary)
        try container.encode(zones, forKey: .zones)
        try container.encodeIfPresent(snapshotURL, forKey: .snapshotURL)
    }

    public static func == (a: TrackedObject, b: TrackedObject) -> Bool {
        a.track == b.track && a.label == b.label && a.classIndex == b.classIndex && a.firstSeen == b.firstSeen && a.lastSeen == b.lastSeen
            && a.score == b.score && a.box == b.box && a.bestScore == b.bestScore && a.bestTime == b.bestTime && a.isStationary == b.isStationary
            && a.zones == b.zones
    }
}

/// Something that happened in a source: the one event type of every JSON stream (`record --json`,
/// `video --events`, the server's SSE, live stream and webhooks).
///
/// JSON: `{"type": TYPE, ...fields}`; ``SourceEvent`` adds `source`, `t` and `frame`.
/// - `object_started`, `object_updated` (at most once a second per object), `object_ended`: the
///   ``TrackedObject``'s fields;
/// - `zone_enter`, `zone_exit`, `loitering`: `track`, `zone`; `line_cross`: `track`, `line`,
///   `direction` (`in`, `out`);
/// - `clip_started`: `start` (and the clip's `path` on the command line); `clip_finished`: `clip`
///   (``ClipReport``).
public enum AnalysisEvent: Sendable, Encodable {
    case objectStarted(TrackedObject)
    case objectUpdated(TrackedObject)
    case objectEnded(TrackedObject)
    case zone(ZoneEvent)
    /// `path`: the clip's file (command line only).
    case clipStarted(path: String?, start: Double)
    case clipFinished(ClipReport)

    public var type: String {
        switch self {
        case .objectStarted: return "object_started"
        case .objectUpdated: return "object_updated"
        case .objectEnded: return "object_ended"
        case .zone(let event): return event.type
        case .clipStarted: return "clip_started"
        case .clipFinished: return "clip_finished"
        }
    }

    enum CodingKeys: String, CodingKey { case type, path, start, clip }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        switch self {
        case .objectStarted(let object), .objectUpdated(let object), .objectEnded(let object):
            try object.encode(to: encoder)
        case .zone(let event):
            try event.encode(to: encoder)
        case .clipStarted(let path, let start):
            try container.encodeIfPresent(path, forKey: .path)
            try container.encode(ResultEncoding.round3(start), forKey: .start)
        case .clipFinished(let clip):
            try container.encode(clip, forKey: .clip)
        }
    }
}

/// An event with where and when it happened: `source` (the server's source id, or the input),
/// `t` (seconds of source time) and `frame`, each when known.
public struct SourceEvent: Sendable, Encodable {
    public var source: String?
    public var time: Double?
    public var frame: Int?
    public var event: AnalysisEvent
    /// Written as `event` too, for readers of `record --json` from before `type` (deprecated).
    public var legacyName = false

    enum CodingKeys: String, CodingKey {
        case source, frame, event
        case time = "t"
    }

    public init(source: String? = nil, time: Double? = nil, frame: Int? = nil, event: AnalysisEvent, legacyName: Bool = false) {
        self.source = source
        self.time = time
        self.frame = frame
        self.event = event
        self.legacyName = legacyName
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(source, forKey: .source)
        try container.encodeIfPresent(time.map(ResultEncoding.round3), forKey: .time)
        try container.encodeIfPresent(frame, forKey: .frame)
        if legacyName { try container.encode(event.type, forKey: .event) }
        try event.encode(to: encoder)
    }
}

/// Turns a frame into a ``FrameAnalysis``: the one analysis step `record`, `video`, the server's
/// sources and its detect endpoints share. ``StandardAnalyzer`` is the implementation; tests may
/// substitute their own.
///
/// Not thread-safe: one analyzer per source, called with its frames in order from one thread.
public protocol FrameAnalyzer: AnyObject {
    /// Analyzes the next frame (times increasing). `detected`: the detector's findings in it, found
    /// ahead on other threads (``DetectAhead``); nil to detect now.
    func analyze(_ frame: VideoFrame, detected: [Detection]?) throws -> FrameAnalysis
    /// The input ended: events for the objects still open (`object_ended`).
    func finish() -> [AnalysisEvent]
}

extension FrameAnalyzer {
    /// Analyzes the next frame (times increasing), detecting in it now.
    public func analyze(_ frame: VideoFrame) throws -> FrameAnalysis {
        try analyze(frame, detected: nil)
    }
}

/// Runs the detector on a picture and keeps what `keep` accepts, then names faces (or whatever
/// else refines detections): the shell's part of an analysis (a detector of its own, or one taken
/// from the server's shared pool for the call).
public typealias DetectStep = (_ image: Image, _ keep: (Detection) -> Bool) throws -> [Detection]

/// The standard analysis: detect (through the shell's ``DetectStep``), filter by score and class,
/// cap the count, find rectangles, track, follow zones and lines, raise object events, and with
/// motion gating skip inference on frames where nothing moves and no tracked object is moving
/// (the tracks then keep their last boxes).
///
/// ```swift
/// let analyzer = StandardAnalyzer(options: .init(classes: ["person"]), detect: { image, keep in
///     try detector.detect(image).detections.filter(keep)
/// })
/// let analysis = try analyzer.analyze(frame)   // analysis.detections[i].track: the person's id
/// ```
///
/// Not thread-safe: one per source.
public final class StandardAnalyzer: FrameAnalyzer {
    public struct Options: Sendable {
        /// Lowest score kept (nil: whatever the detector keeps); tracks start from it too.
        public var threshold: Float?
        /// Labels kept, lowercased (nil: all).
        public var classes: Set<String>?
        /// Most detections kept per frame, best first (nil: all).
        public var maxResults: Int?
        /// Give detections track ids and raise object events. Default true.
        public var tracking = true
        public var tracker = ObjectTracker.Options()
        /// Zones and lines (pixels, or normalized to the frame's size). Default none.
        public var zones: ZoneLayout?
        /// Skip inference on frames without motion (nil: analyze every frame). Default nil.
        public var motion: MotionDetector.Options?
        /// Under motion gating, the longest time between two analyzed frames, in seconds of
        /// source time (an object that arrives too slowly to move a pixel is still found). Default
        /// 10; each analyzer takes a random 80-100% of it, so sources started together do not
        /// all analyze the same instant.
        public var longestSkip: Double = 10
        /// Find rectangles with these options (nil: not). Default nil.
        public var rectangles: RectangleDetector.Options?
        /// Least seconds between two `object_updated` events of one object. Default 1.
        public var updateInterval: Double = 1

        public init(threshold: Float? = nil, classes: Set<String>? = nil, maxResults: Int? = nil, tracking: Bool = true) {
            self.threshold = threshold
            self.classes = classes
            self.maxResults = maxResults
            self.tracking = tracking
        }
    }

    public let options: Options
    private let detect: DetectStep
    private let rectangleDetector: RectangleDetector?
    private var tracker: ObjectTracker
    private var motion: MotionDetector?
    /// ``Options/longestSkip`` with this analyzer's jitter.
    private let longestSkip: Double
    private var zones: ZoneMonitor?
    private var objects: [Int: TrackedObject] = [:]
    private var lastUpdateEvent: [Int: Double] = [:]
    private var lastAnalyzed: (time: Double, detections: [Detection], rectangles: [RectangleObservation]?)?
    /// Frames analyzed and skipped by motion gating.
    public private(set) var analyzedFrames = 0
    public private(set) var skippedFrames = 0

    /// - Throws: ``RectangleDetector``'s error for invalid rectangle options.
    public init(options: Options = Options(), detect: @escaping DetectStep) throws {
        self.options = options
        self.detect = detect
        rectangleDetector = try options.rectangles.map { try RectangleDetector(options: $0) }
        // A detection the source keeps may start and continue a track: the tracker's confident
        // level is never above the source's threshold (its defaults suit detectors that score
        // people 0.7 and up; SSD MobileNet scores many at 0.5-0.7).
        var trackerOptions = options.tracker
        if let threshold = options.threshold {
            trackerOptions.highScore = min(trackerOptions.highScore, threshold)
            trackerOptions.newTrackScore = min(trackerOptions.newTrackScore, threshold)
        }
        tracker = ObjectTracker(options: trackerOptions)
        motion = options.motion.map { MotionDetector(options: $0) }
        longestSkip = options.longestSkip * Double.random(in: 0.8...1)
    }

    public func analyze(_ frame: VideoFrame, detected: [Detection]?) throws -> FrameAnalysis {
        let time = frame.time
        if zones == nil, let layout = options.zones, !layout.isEmpty {
            zones = ZoneMonitor(layout: layout.inPixels(width: frame.image.width, height: frame.image.height))
        }
        var moved: Bool?
        if motion != nil {
            let result = motion!.detect(in: frame.image)
            moved = result.hasMotion
            let movingTrack = tracker.tracks.contains { !$0.isStationary }
            if let last = lastAnalyzed, !result.hasMotion, !movingTrack, time - last.time < longestSkip {
                skippedFrames += 1
                return FrameAnalysis(frame: frame.index, time: time, analyzed: false, detections: last.detections, tracks: Array(objects.values).sorted { $0.track < $1.track },
                                     rectangles: last.rectangles, zones: occupancy(), motion: false, isTracked: options.tracking)
            }
        }
        analyzedFrames += 1
        let threshold = options.threshold, classes = options.classes
        let keep: (Detection) -> Bool = { d in
            (threshold.map { d.score >= $0 } ?? true) && (classes.map { $0.contains(d.label.lowercased()) } ?? true)
        }
        var detections = try detected?.filter(keep) ?? detect(frame.image, keep)
        if let limit = options.maxResults, detections.count > limit {
            detections = Array(detections.sorted { $0.score > $1.score }.prefix(limit))
        }
        let rectangles = rectangleDetector.map { $0.detect(in: frame.image) }
        var events: [AnalysisEvent] = []
        if options.tracking { track(&detections, frame: frame, events: &events) }
        lastAnalyzed = (time, detections.filter { $0.track != nil }, rectangles)
        return FrameAnalysis(frame: frame.index, time: time, detections: detections, tracks: objects.values.sorted { $0.track < $1.track },
                             rectangles: rectangles, zones: occupancy(), motion: moved, events: events, isTracked: options.tracking)
    }

    /// Tracks `detections` (setting their ids), follows zones, and raises object events.
    private func track(_ detections: inout [Detection], frame: VideoFrame, events: inout [AnalysisEvent]) {
        let time = frame.time
        let ids = tracker.update(detections.map { .init(box: $0.box, score: $0.score, classIndex: $0.classIndex) }, time: time)
        let states = Dictionary(tracker.tracks.filter(\.isConfirmed).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for index in detections.indices {
            guard let id = ids[index], let state = states[id] else { continue }
            detections[index].track = id
            detections[index].isStationary = state.isStationary
            let detection = detections[index]
            for event in zones?.observe(track: id, box: detection.box, time: time) ?? [] { events.append(.zone(event)) }
            let inZones = zones?.zones(of: id) ?? []
            if var object = objects[id] {
                let changed = object.isStationary != state.isStationary || object.zones != inZones
                object.lastSeen = time
                object.score = detection.score
                object.box = detection.box
                object.isStationary = state.isStationary
                object.zones = inZones
                if detection.score > object.bestScore {
                    object.bestScore = detection.score
                    object.bestTime = time
                    object.snapshot = Self.crop(detection.box, from: frame.image)
                }
                objects[id] = object
                if changed || time - (lastUpdateEvent[id] ?? -.infinity) >= options.updateInterval {
                    lastUpdateEvent[id] = time
                    events.append(.objectUpdated(Self.withoutSnapshot(object)))
                }
            } else {
                let object = TrackedObject(track: id, label: detection.label, classIndex: detection.classIndex, firstSeen: state.firstSeen,
                                           lastSeen: time, score: detection.score, box: detection.box, bestScore: detection.score, bestTime: time,
                                           isStationary: state.isStationary, zones: inZones, snapshot: Self.crop(detection.box, from: frame.image))
                objects[id] = object
                lastUpdateEvent[id] = time
                events.append(.objectStarted(Self.withoutSnapshot(object)))
            }
        }
        for ended in tracker.ended {
            zones?.forget(track: ended.id)
            lastUpdateEvent[ended.id] = nil
            if let object = objects.removeValue(forKey: ended.id) { events.append(.objectEnded(object)) }
        }
    }

    public func finish() -> [AnalysisEvent] {
        let open = objects.values.sorted { $0.track < $1.track }
        objects.removeAll()
        lastUpdateEvent.removeAll()
        return open.map { .objectEnded($0) }
    }

    private func occupancy() -> [ZoneOccupancy]? {
        guard let zones else { return nil }
        return zones.layout.zones.map { zone in
            ZoneOccupancy(name: zone.name, tracks: objects.keys.filter { zones.zones(of: $0).contains(zone.name) }.sorted())
        }
    }

    private static func withoutSnapshot(_ object: TrackedObject) -> TrackedObject {
        var copy = object
        copy.snapshot = nil
        return copy
    }

    /// The box with a margin of a tenth of its size, cut from `image`.
    static func crop(_ box: Rect, from image: Image) -> Image? {
        let marginX = (box.maxX - box.minX) * 0.1, marginY = (box.maxY - box.minY) * 0.1
        let x0 = max(0, Int((box.minX - marginX).rounded(.down))), y0 = max(0, Int((box.minY - marginY).rounded(.down)))
        let x1 = min(image.width, Int((box.maxX + marginX).rounded(.up))), y1 = min(image.height, Int((box.maxY + marginY).rounded(.up)))
        guard x1 > x0, y1 > y0 else { return nil }
        return image.cropped(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }
}
