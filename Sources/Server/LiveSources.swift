import Detection
import Foundation
import Hummingbird
import Imaging
import Logging
import Media
import Pipeline
import Rectangles
import Synchronization
import Tracking

/// A source as `POST /api/v1/sources` (and the config file) describe it.
public struct SourceSpec: Codable, Sendable, Equatable {
    /// A video file, a stream URL (rtsp, http(s), tcp, udp, hls), `/dev/videoN`, or a sample's name.
    public var input: String
    /// Record clips of matching frames into the album. Default true.
    public var record: Bool?
    /// Labels to detect and record; default `serve --classes`, else `["person"]`; `[]` for every class.
    public var classes: [String]?
    /// Lowest score kept, 0.05...1. Default `serve --threshold` (0.5).
    public var threshold: Float?
    /// Play a file at the pace of its timestamps, as a camera would deliver it (frames dropped while
    /// the detector is busy). Default false: a file is a job processed as fast as the cores allow.
    public var realtime: Bool?
    /// Start a file again at its end (a demo camera that never ends). Default false.
    public var loop: Bool?
    /// What records: `detection` (any detection of `classes`, the default) or `unknown-face` (a
    /// person whose face matches no one in the gallery; needs `serve --faces`).
    public var trigger: String?
    /// Also find rectangles (pages, cards, screens) on every frame, with Vision's default options
    /// (``RectangleDetector/Options``): listed in the detection events, outlined in the live view
    /// and on snapshots. Default false.
    public var rectangles: Bool?
    /// Kept in the list but not read. Default false.
    public var paused: Bool?
    /// RTSP only: `tcp` (the default, as Frigate uses: no packets lost to a firewall) or `udp`.
    public var rtspTransport: String?
    /// Zones and lines (a zones file's JSON): zone and line events, hourly counts.
    public var zones: ZoneLayout?
    /// Only objects inside one of these zones open and keep clips. Default: anywhere.
    public var requiredZones: [String]?
    /// Skip inference on frames where nothing moves and no tracked object is moving. Default: on
    /// for live sources (cameras, streams), off for files.
    public var motion: Bool?
    /// Polygons (source pixels, [[x, y], ...]) where motion is ignored.
    public var motionMasks: [[[Double]]]?
    /// Seconds a tracked object must stay in place to be stationary. Default 10.
    public var stationarySeconds: Double?

    enum CodingKeys: String, CodingKey {
        case input, record, classes, threshold, realtime, loop, trigger, rectangles, paused, zones, motion
        case rtspTransport = "rtsp_transport"
        case requiredZones = "required_zones"
        case motionMasks = "motion_masks"
        case stationarySeconds = "stationary_seconds"
    }

    public init(input: String, record: Bool? = nil, classes: [String]? = nil, threshold: Float? = nil, realtime: Bool? = nil, loop: Bool? = nil,
                trigger: String? = nil, rectangles: Bool? = nil, paused: Bool? = nil, rtspTransport: String? = nil, zones: ZoneLayout? = nil,
                requiredZones: [String]? = nil, motion: Bool? = nil, motionMasks: [[[Double]]]? = nil, stationarySeconds: Double? = nil) {
        self.zones = zones
        self.requiredZones = requiredZones
        self.motion = motion
        self.motionMasks = motionMasks
        self.stationarySeconds = stationarySeconds
        self.input = input
        self.record = record
        self.classes = classes
        self.threshold = threshold
        self.realtime = realtime
        self.loop = loop
        self.trigger = trigger
        self.rectangles = rectangles
        self.paused = paused
        self.rtspTransport = rtspTransport
    }

    /// Whether only strangers' faces open clips.
    var recordsStrangersOnly: Bool { trigger == "unknown-face" }

    /// - Parameter labels: the detector's class names; a class not among them is refused.
    /// - Throws: a message for the API's 400 answer.
    func validate(labels: Labels?) throws {
        guard !input.trimmingCharacters(in: .whitespaces).isEmpty, input.utf8.count <= 4096 else {
            throw SpecError("input must be a file, URL, /dev/videoN or sample name (at most 4096 bytes)")
        }
        if let threshold, !(0.05...1).contains(threshold) { throw SpecError("threshold must be between 0.05 and 1") }
        if let classes, classes.count > 100 || classes.contains(where: { $0.isEmpty || $0.count > 100 }) {
            throw SpecError("classes must be up to 100 non-empty labels")
        }
        if let classes, let labels { try Self.checkClasses(classes, labels: labels) }
        if let trigger, !["detection", "unknown-face"].contains(trigger) {
            throw SpecError("trigger must be detection or unknown-face")
        }
        if let rtspTransport, !["tcp", "udp"].contains(rtspTransport) { throw SpecError("rtsp_transport must be tcp or udp") }
        if let zones {
            do { try zones.validate() } catch { throw SpecError("zones: \(error)") }
        }
        if let requiredZones {
            let names = Set(zones?.zones.map(\.name) ?? [])
            let unknown = requiredZones.filter { !names.contains($0) }
            guard unknown.isEmpty else { throw SpecError("required_zones names no zone of this source: \(unknown.joined(separator: ", "))") }
        }
        if let masks = motionMasks {
            guard masks.count <= ZoneLayout.maximumShapes, masks.allSatisfy({ (3...ZoneLayout.maximumPoints).contains($0.count) }),
                  masks.allSatisfy({ $0.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isFinite) } }) else {
                throw SpecError("motion_masks must be up to \(ZoneLayout.maximumShapes) polygons of 3 to \(ZoneLayout.maximumPoints) [x, y] points")
            }
        }
        if let seconds = stationarySeconds, !(seconds > 0 && seconds <= 86400) { throw SpecError("stationary_seconds must be between 0 and 86400") }
    }

    /// The motion masks as polygons.
    var maskPolygons: [[Point]] { (motionMasks ?? []).map { $0.map { Point(x: $0[0], y: $0[1]) } } }

    /// Throws naming the classes `labels` does not have, and the ones it has.
    static func checkClasses(_ classes: [String], labels: Labels) throws {
        let unknown = classes.filter { labels.classIndex(named: $0) == nil }
        guard unknown.isEmpty else {
            let known = labels.lines.filter { $0 != "???" }
            throw SpecError("no class named \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")) in the model's labels; they are: \(known.joined(separator: ", "))")
        }
    }

    /// The spec with the fields `patch` sets replaced.
    /// The settings as the album's index and the cluster store them: JSON with sorted keys, so
    /// equal settings are equal text.
    func storedSettings() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    func merging(_ patch: SourcePatch) -> SourceSpec {
        var spec = self
        if let value = patch.record { spec.record = value }
        if let value = patch.classes { spec.classes = value }
        if let value = patch.threshold { spec.threshold = value }
        if let value = patch.realtime { spec.realtime = value }
        if let value = patch.loop { spec.loop = value }
        if let value = patch.trigger { spec.trigger = value }
        if let value = patch.rectangles { spec.rectangles = value }
        if let value = patch.paused { spec.paused = value }
        if let value = patch.rtspTransport { spec.rtspTransport = value }
        if let value = patch.zones { spec.zones = value }
        if let value = patch.requiredZones { spec.requiredZones = value }
        if let value = patch.motion { spec.motion = value }
        if let value = patch.motionMasks { spec.motionMasks = value }
        if let value = patch.stationarySeconds { spec.stationarySeconds = value }
        return spec
    }

    struct SpecError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// What `PATCH /api/v1/sources/{id}` changes: any of a source's settings but its input.
public struct SourcePatch: Codable, Sendable, Equatable {
    public var record: Bool?
    public var classes: [String]?
    public var threshold: Float?
    public var realtime: Bool?
    public var loop: Bool?
    public var trigger: String?
    public var rectangles: Bool?
    public var paused: Bool?
    public var rtspTransport: String?
    public var zones: ZoneLayout?
    public var requiredZones: [String]?
    public var motion: Bool?
    public var motionMasks: [[[Double]]]?
    public var stationarySeconds: Double?

    enum CodingKeys: String, CodingKey {
        case record, classes, threshold, realtime, loop, trigger, rectangles, paused, zones, motion
        case rtspTransport = "rtsp_transport"
        case requiredZones = "required_zones"
        case motionMasks = "motion_masks"
        case stationarySeconds = "stationary_seconds"
    }
}

/// The detection settings of `spotter serve` (its `--threshold`, `--classes`, `--max-results`):
/// the defaults of the detect endpoints and of new sources.
public struct DetectionDefaults: Sendable, Equatable {
    /// Lowest score kept. Default 0.5.
    public var threshold: Float = 0.5
    /// Classes the detect endpoints keep (nil: all) and new sources record (nil: person).
    public var classes: [String]?
    /// Most detections a detect endpoint answers (nil: all; DeepStack's answer at most 20).
    public var maxResults: Int?

    public init(threshold: Float = 0.5, classes: [String]? = nil, maxResults: Int? = nil) {
        self.threshold = threshold
        self.classes = classes
        self.maxResults = maxResults
    }
}

/// One running source of `spotter serve`: a thread runs its ``SourceRun`` (reader, shared detector
/// pool, clip recorder); the live view reads its latest frames, encoded to JPEG once each however
/// many people watch.
final class LiveSource: Sendable {
    private static let logger = Logger(label: "spotter.sources")
    let id: String
    let spec: SourceSpec
    /// Where the source was given: the API (kept across restarts) or the config file.
    let origin: SourcePolicy.Origin
    /// The input as opened (a sample's name resolved to its cached file, a file to its real path).
    let path: String
    /// What the reader may open for it (``SourcePolicy``).
    let access: SourcePolicy.Resolved
    let classes: Set<String>?
    let threshold: Float
    /// The source's name in the album: URLs and devices as given, files as absolute paths.
    let albumSource: String
    let created = Date()

    /// What the live view needs of one frame.
    struct Shot: Sendable {
        let number: Int
        let frame: DetectedFrame
    }

    /// What the run's threads update and the API reads.
    private struct Status: Sendable {
        var state = SourceRun.State.opening
        var message: String?
        var info: VideoReader.Info?
        var stats = PipelineStats()
        var connectionBase = PipelineStats()
        var frames = 0
        var recording = false
        var clips = 0
        var recent: [Shot] = []
        /// The last analyzed frame's analysis (for drawing the frames motion gating skipped).
        var lastAnalysis: FrameAnalysis?
        /// Tracked objects now, and zone and line counts not yet written to the album.
        var objects = 0
        /// JPEGs of the best frames of the objects that ended last, by track id.
        var snapshots: [(track: Int, bytes: ByteBuffer)] = []
        var stopFlag: StopFlag?
        var stopped = false
        /// When the file was read to the end (``StoredSource/finishedAt``); such a source is not read again.
        var finishedAt: String?

        /// How far a file job is (nil for live sources, loops and unknown lengths).
        func progress(loops: Bool) -> Double? {
            guard let info, !info.isLive, !loops else { return nil }
            if let count = info.frameCount, count > 0 { return min(1, Double(stats.received) / Double(count)) }
            if let duration = info.duration, duration > 0, let rate = info.frameRate { return min(1, Double(stats.received) / (duration * rate)) }
            return nil
        }
    }

    private let guarded = Mutex(Status())

    /// JPEGs of recent frames, made on first request, and the annotator that draws their boxes.
    private struct Encoded {
        var frames: [(number: Int, boxes: Bool, bytes: ByteBuffer)] = []
        var annotator: Annotator?
    }

    private let encoded = Mutex(Encoded())
    /// Signalled when the run's thread ends.
    private let ended = DispatchSemaphore(value: 0)

    /// The server's address for URLs in events and webhooks (``ServerConfiguration/externalBase``).
    let publicBase: String
    /// In a cluster, the lease this node runs the source under (its clips' rows and counts are fenced by it).
    let lease: SourceLease?
    /// Zone entries and line crossings not yet in the album.
    let counts: CountBuffer

    /// - Parameter finishedAt: when the file was read to the end, before: the source shows it as
    ///   `finished` and does not read it again.
    init(id: String, spec: SourceSpec, access: SourcePolicy.Resolved, origin: SourcePolicy.Origin, defaults: DetectionDefaults, publicBase: String,
         finishedAt: String? = nil, lease: SourceLease? = nil) {
        self.id = id
        self.lease = lease
        counts = CountBuffer(lease: lease)
        if let finishedAt {
            guarded.withLock {
                $0.finishedAt = finishedAt
                $0.state = .finished
            }
        }
        self.publicBase = publicBase
        self.spec = spec
        self.access = access
        self.origin = origin
        self.path = access.input
        let classes = spec.classes ?? defaults.classes ?? ["person"]
        self.classes = classes.isEmpty ? nil : Set(classes.map { $0.lowercased() })
        threshold = spec.threshold ?? defaults.threshold
        albumSource = Album.sourceName(path)
    }

    /// When the file was read to the end (nil: not yet, or a live source).
    var finishedTime: String? { guarded.withLock { s in s.finishedAt } }

    /// The input as people may see it: a password in its URL as `***`.
    var shownInput: String { Album.redactingPassword(spec.input) }

    /// The source's analysis: its threshold and classes, tracking, zones, rectangles, and motion
    /// gating (on by default for live inputs).
    var analysisOptions: StandardAnalyzer.Options {
        var options = StandardAnalyzer.Options(threshold: threshold, classes: classes, tracking: true)
        options.zones = spec.zones
        // Vision's defaults, which are valid.
        options.rectangles = (spec.rectangles ?? false) ? RectangleDetector.Options(retriesAtFinerScale: false) : nil
        options.tracker.stationarySeconds = spec.stationarySeconds ?? 10
        if spec.motion ?? SourceRun.isLive(path) {
            var motion = MotionDetector.Options()
            motion.masks = spec.maskPolygons
            options.motion = motion
        }
        return options
    }

    /// Starts the run on a thread of its own: opens the input, then reads, detects on the shared
    /// pool and records until stopped (a file until its end). A paused source does not start, nor
    /// does a file read to the end before (add it again to read it again).
    func start(album: Album, pool: DetectorPool, refine: DetectionRefiner?, events: EventHub) {
        guard !(spec.paused ?? false), guarded.withLock({ s in s.finishedAt }) == nil else {
            ended.signal()
            return
        }
        let thread = Thread { [self] in
            defer { ended.signal() }
            update(state: .opening, message: nil, events: events)
            var readerOptions = VideoReader.Options(openTimeout: 15, readTimeout: 10)
            readerOptions.allowedProtocols = access.allowedProtocols
            readerOptions.allowedFormats = access.allowedFormats
            if let transport = spec.rtspTransport { readerOptions.formatOptions["rtsp_transport"] = transport }
            let record = spec.record ?? true, strangersOnly = spec.recordsStrangersOnly, albumSource = albumSource
            let requiredZones = spec.requiredZones.map(Set.init)
            // The recorder is made once the source opens (a camera that is down is waited for).
            let makeRecorder: (VideoReader.Info) throws -> ClipSession? = { [self] info in
                guard record else { return nil }
                var sessionOptions = ClipSession.Options(frameRate: info.frameRate ?? 25)
                sessionOptions.requiredZones = requiredZones
                sessionOptions.sourceID = id
                sessionOptions.lease = lease
                if strangersOnly {
                    // The live view still shows everyone; only strangers open and keep clips.
                    sessionOptions.triggers = { $0.isStranger }
                }
                return try ClipSession(album: album, source: albumSource, options: sessionOptions,
                                       events: { [self] event in recorderEvent(event, events: events) })
            }
            var options = SourceRun.Options(reconnect: true, loop: spec.loop ?? false, reader: readerOptions)
            options.pipeline.realTime = spec.realtime ?? false
            let analyzer: StandardAnalyzer
            do {
                analyzer = try StandardAnalyzer(options: analysisOptions) { image, keep in
                    // Face recognition holds the detector too: one budget for all.
                    try pool.withDetector { detector in
                        let found = try detector.detect(image).detections.filter(keep)
                        return try refine?(found, image) ?? found
                    }
                }
            } catch {
                update(state: .failed, message: "\(error)", events: events)
                return
            }
            let run = SourceRun(input: path, options: options, recorder: makeRecorder, analyzer: analyzer,
                                events: { [self] event in handle(event, events: events, album: album) })
            let stopNow = guarded.withLock { s in
                s.stopFlag = run.stopRequested
                return s.stopped
            }
            if stopNow { run.stopRequested.set() }
            // A failure was reported as the `failed` state with its message.
            _ = try? run.run()
        }
        thread.name = "spotter.source.\(id)"
        thread.start()
    }

    /// Stops the run and waits (off the caller's task) until its open clip is finished.
    func stop() async {
        let flag = guarded.withLock { s in
            s.stopped = true
            return s.stopFlag
        }
        flag?.set()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [ended, counts] in
                ended.wait()
                ended.signal()
                // Its last counts are written while the lease is still this node's.
                counts.waitForVerdicts(seconds: 30)
                continuation.resume()
            }
        }
    }

    private func update(state: SourceRun.State, message: String?, events: EventHub) {
        guarded.withLock { s in
            s.state = state
            s.message = message
        }
        var object: [String: Any] = ["state": state.rawValue]
        if let message { object["message"] = message }
        events.publish("source_state", source: id, object)
    }

    private func handle(_ event: SourceRun.Event, events: EventHub, album: Album) {
        switch event {
        case .opened(let info):
            guarded.withLock { s in
                s.info = info
                s.connectionBase = s.stats
            }
        case .state(let state, let message):
            if state == .finished {
                // Kept, so that neither the next start nor a change of settings reads it again.
                let time = Album.timestamp()
                guarded.withLock { s in s.finishedAt = time }
                if origin == .api { try? album.markSourceFinished(id: id, at: time) }
            }
            update(state: state, message: message, events: events)
            if [.finished, .stopped, .failed].contains(state) { flushCounts(album) }
        case .progress(let current):
            let (fraction, snapshot) = guarded.withLock { s -> (Double?, PipelineStats) in
                s.stats.received = s.connectionBase.received + current.received
                s.stats.processed = s.connectionBase.processed + current.processed
                s.stats.dropped = s.connectionBase.dropped + current.dropped
                s.stats.skipped = s.connectionBase.skipped + current.skipped
                s.stats.elapsed = s.connectionBase.elapsed + current.elapsed
                s.stats.inferenceMilliseconds = current.inferenceMilliseconds
                return (s.progress(loops: spec.loop ?? false), s.stats)
            }
            var object: [String: Any] = [
                "processed": snapshot.processed, "received": snapshot.received, "dropped": snapshot.dropped,
                "analyzed": snapshot.processed - snapshot.skipped, "skipped": snapshot.skipped,
                "fps": round1(snapshot.fps), "inference_ms": round1(snapshot.inferenceMilliseconds),
            ]
            if let fraction {
                Self.addProgress(fraction, elapsed: snapshot.elapsed, to: &object)
                events.publish("job_progress", source: id, object)
            } else {
                events.publish("source_stats", source: id, object)
            }
            flushCounts(album, ifOlderThan: .seconds(10))
        case .frame(let item):
            let number = guarded.withLock { s -> Int in
                s.frames += 1
                if let analysis = item.analysis {
                    s.lastAnalysis = analysis
                    s.objects = analysis.tracks.count
                }
                s.recent.append(Shot(number: s.frames, frame: item))
                if s.recent.count > 4 { s.recent.removeFirst() }
                return s.frames
            }
            if let analysis = item.analysis {
                publish(analysis.events, time: analysis.time, frame: number, events: events)
                count(analysis.events)
            }
            guard events.subscriberCount > 0, let analysis = item.analysis ?? guarded.withLock({ s in s.lastAnalysis }) else { return }
            let frame = LiveFrame(source: id, number: number, analysis: analysis, decodedAt: item.decodedAt, width: item.frame.image.width,
                                  height: item.frame.image.height, inferenceMilliseconds: item.inferenceMilliseconds)
            events.publish("detection", source: id, encoding: frame, frame: number, jpeg: { [self] in try? jpeg(frame: number, boxes: false)?.bytes })
        case .analysis(let ended):
            publish(ended, time: nil, frame: nil, events: events)
        case .recorder:
            break
        }
    }

    /// Publishes analysis events; an ended object's best frame becomes its snapshot.
    private func publish(_ analysisEvents: [AnalysisEvent], time: Double?, frame: Int?, events: EventHub) {
        for var event in analysisEvents {
            if case .objectEnded(var object) = event, let picture = object.snapshot,
               let bytes = try? ImageFile.encode(picture, format: .jpeg(quality: 85), path: "object \(object.track)") {
                guarded.withLock { s in
                    s.snapshots.append((object.track, ByteBuffer(bytes: bytes)))
                    if s.snapshots.count > 64 { s.snapshots.removeFirst() }
                }
                object.snapshotURL = "\(publicBase)/api/v1/sources/\(id)/objects/\(object.track)/snapshot.jpg"
                event = .objectEnded(object)
            }
            events.publish(event, source: id, time: time, frame: frame)
        }
    }

    /// The JPEG of an ended object's best detection (one of the last 64), nil when gone.
    func snapshot(track: Int) -> ByteBuffer? {
        guarded.withLock { s in s.snapshots.last { $0.track == track }?.bytes }
    }

    /// Adds zone entries and line crossings to this hour's counts.
    private func count(_ analysisEvents: [AnalysisEvent]) {
        let hour = Album.hour(of: Date())
        for event in analysisEvents {
            guard case .zone(let zoneEvent) = event else { continue }
            let entry: CountEntry
            switch zoneEvent {
            case .enter(_, let zone): entry = CountEntry(source: id, hour: hour, kind: "zone", name: zone, direction: "", count: 1)
            case .cross(_, let line, let direction): entry = CountEntry(source: id, hour: hour, kind: "line", name: line, direction: direction.rawValue, count: 1)
            case .exit, .loitering: continue
            }
            counts.add(entry)
        }
    }

    /// Writes the counts not yet in the album (at most every `interval`).
    func flushCounts(_ album: Album, ifOlderThan interval: Duration = .zero) {
        counts.flush(to: album, ifOlderThan: interval)
    }

    private func recorderEvent(_ event: RecorderEvent, events: EventHub) {
        switch event {
        case .clipStarted(_, let start):
            guarded.withLock { s in s.recording = true }
            events.publish(.clipStarted(path: nil, start: start), source: id, time: start)
        case .clipFinished(let entry):
            guarded.withLock { s in
                s.recording = false
                s.clips += 1
            }
            events.publish(.clipFinished(ClipReport(entry, base: publicBase)), source: id, time: entry.end)
        case .clipRefused(let entry):
            // Another node runs the source now: this one shows and announces nothing more of it.
            guarded.withLock { s in s.recording = false }
            Self.logger.warning("source \(id): the row of \(entry.clip) was refused (the source's lease has moved on); a repair indexes it as incomplete")
        }
    }

    /// `percent` and, once it can be estimated, `eta_s` of a job `fraction` done after `elapsed` seconds.
    private static func addProgress(_ fraction: Double, elapsed: Double, to object: inout [String: Any]) {
        object["percent"] = round1(fraction * 100)
        if fraction > 0, elapsed > 0 { object["eta_s"] = round1(elapsed * (1 - fraction) / fraction) }
    }

    /// The JPEG of frame `number` (one of the last few), with boxes drawn when asked; nil when that
    /// frame is gone. Each is encoded once.
    func jpeg(frame number: Int?, boxes: Bool) throws -> (number: Int, bytes: ByteBuffer)? {
        guard let shot = guarded.withLock({ s in number.map { n in s.recent.first { $0.number == n } } ?? s.recent.last }) else { return nil }
        let analysis = boxes ? shot.frame.analysis ?? guarded.withLock { $0.lastAnalysis } : nil
        return try encoded.withLock { encoded in
            if let hit = encoded.frames.first(where: { $0.number == shot.number && $0.boxes == boxes }) { return (hit.number, hit.bytes) }
            var image = shot.frame.frame.image
            if boxes {
                if encoded.annotator == nil { encoded.annotator = try Annotator() }
                if let zones = spec.zones { image.draw(zones.inPixels(width: image.width, height: image.height)) }
                image.outline(analysis?.rectangles ?? [])
                encoded.annotator?.draw(analysis?.detections ?? [], on: &image)
            }
            // Kept as a ByteBuffer: every response shares its storage instead of copying it.
            let bytes = ByteBuffer(bytes: try ImageFile.encode(image, format: .jpeg(quality: 80), path: "frame \(shot.number)"))
            encoded.frames.append((shot.number, boxes, bytes))
            if encoded.frames.count > 8 { encoded.frames.removeFirst() }
            return (shot.number, bytes)
        }
    }

    /// The status object of the API.
    func status() -> [String: Any] {
        let s = guarded.withLock { $0 }
        var object: [String: Any] = [
            "id": id, "input": shownInput, "state": (spec.paused ?? false) ? "paused" : s.state.rawValue, "record": spec.record ?? true,
            "origin": origin.rawValue, "paused": spec.paused ?? false, "trigger": spec.trigger ?? "detection",
            "classes": classes.map { $0.sorted() } ?? [], "threshold": round4(Double(threshold)),
            "kind": s.info.map { $0.isLive ? "live" : "file" } ?? (spec.input.contains("://") || spec.input.hasPrefix("/dev/") ? "live" : "file"),
            "realtime": spec.realtime ?? false, "loop": spec.loop ?? false, "rectangles": spec.rectangles ?? false,
            "recording": s.recording, "clips": s.clips, "frames": s.frames,
            "received": s.stats.received, "processed": s.stats.processed, "dropped": s.stats.dropped,
            "analyzed": s.stats.processed - s.stats.skipped, "skipped": s.stats.skipped, "motion": analysisOptions.motion != nil,
            "objects": s.objects, "stationary_seconds": spec.stationarySeconds ?? 10,
            "fps": round1(s.stats.fps), "inference_ms": round1(s.stats.inferenceMilliseconds),
            "snapshot_url": "/api/v1/sources/\(id)/snapshot.jpg", "album_source": albumSource,
            "rtsp_transport": spec.rtspTransport ?? "tcp",
        ]
        if let message = s.message { object["message"] = message }
        if let finishedAt = s.finishedAt { object["finished_at"] = finishedAt }
        if let zones = spec.zones, let data = try? JSONEncoder().encode(zones), let json = try? JSONSerialization.jsonObject(with: data) {
            object["zones"] = json
        }
        if let required = spec.requiredZones { object["required_zones"] = required }
        if let masks = spec.motionMasks { object["motion_masks"] = masks }
        if let info = s.info {
            // As displayed: a phone video's rotation applied.
            let upright = info.orientation.uprightSize(Size(width: info.width, height: info.height))
            object["width"] = upright.width
            object["height"] = upright.height
            if let rate = info.frameRate { object["frame_rate"] = round1(rate) }
        }
        if let fraction = s.progress(loops: spec.loop ?? false) { Self.addProgress(fraction, elapsed: s.stats.elapsed, to: &object) }
        return object
    }

    /// Counters for /metrics.
    var metrics: (fps: Double, inference: Double, dropped: Int, processed: Int, skipped: Int, recording: Bool) {
        guarded.withLock { s in (s.stats.fps, s.stats.inferenceMilliseconds, s.stats.dropped, s.stats.processed, s.stats.skipped, s.recording) }
    }
}

/// The server's sources: added and removed at run time, all detecting on one ``DetectorPool``.
final class SourceHub: Sendable {
    let album: Album
    let pool: DetectorPool
    let refine: DetectionRefiner?
    let events: EventHub
    private let resolve: @Sendable (String) throws -> String
    let policy: SourcePolicy
    let defaults: DetectionDefaults
    /// The server's address for URLs in events and webhooks.
    let publicBase: String
    private let table = Mutex(SourceList())

    /// The sources in the list's order, the next free ids, and whether new ones are refused.
    private struct SourceList {
        var sources: [String: LiveSource] = [:]
        var order: [String] = []
        var next = 1
        var nextConfig = 1
        var closed = false
    }
    /// Most sources at once.
    static let limit = 64

    init(album: Album, pool: DetectorPool, refine: DetectionRefiner?, events: EventHub, resolve: @escaping @Sendable (String) throws -> String,
         policy: SourcePolicy, defaults: DetectionDefaults, publicBase: String) {
        self.policy = policy
        self.defaults = defaults
        self.publicBase = publicBase
        self.album = album
        self.pool = pool
        self.refine = refine
        self.events = events
        self.resolve = resolve
    }

    enum AddError: Error, CustomStringConvertible {
        case invalid(String), tooMany, shuttingDown, notFound(String), cannotStore(String)

        var description: String {
            switch self {
            case .invalid(let message): return message
            case .tooMany: return "at most \(SourceHub.limit) sources run at once; remove one first"
            case .shuttingDown: return "the server is shutting down"
            case .notFound(let id): return "no source \(id)"
            case .cannotStore(let reason): return "the source runs, but cannot be kept for the next start: \(reason)"
            }
        }
    }

    /// Checks `spec` and what its input may open.
    private func prepare(_ spec: SourceSpec, origin: SourcePolicy.Origin) throws -> SourcePolicy.Resolved {
        do { try spec.validate(labels: pool.labels) } catch { throw AddError.invalid("\(error)") }
        if spec.recordsStrangersOnly && refine == nil { throw AddError.invalid("trigger unknown-face needs spotter serve --faces GALLERY") }
        do { return try policy.check(try resolve(spec.input), origin: origin) } catch { throw AddError.invalid("\(error)") }
    }

    /// Starts a source; one from the API is kept in the album's index for the next start (unless
    /// `keep` is false: a cluster's sources are kept in its database).
    ///
    /// - Parameters:
    ///   - id: the id to use (a restored source's); default the next free one.
    ///   - finishedAt: a restored file source's end (``StoredSource/finishedAt``): it is not read again.
    ///   - lease: in a cluster, the lease this node runs the source under.
    /// - Throws: ``AddError``.
    @discardableResult
    func add(_ spec: SourceSpec, origin: SourcePolicy.Origin, id: String? = nil, finishedAt: String? = nil, keep keeping: Bool = true,
             lease: SourceLease? = nil) throws -> LiveSource {
        let access = try prepare(spec, origin: origin)
        let source: LiveSource = try table.withLock { list in
            guard !list.closed else { throw AddError.shuttingDown }
            guard list.sources.count < Self.limit else { throw AddError.tooMany }
            let chosen: String
            if let id {
                chosen = id
                if id.hasPrefix("s"), let number = Int(id.dropFirst()) { list.next = max(list.next, number + 1) }
            } else if origin == .config {
                chosen = "c\(list.nextConfig)"
                list.nextConfig += 1
            } else {
                chosen = "s\(list.next)"
                list.next += 1
            }
            let source = LiveSource(id: chosen, spec: spec, access: access, origin: origin, defaults: defaults, publicBase: publicBase,
                                    finishedAt: finishedAt, lease: lease)
            list.sources[source.id] = source
            list.order.append(source.id)
            return source
        }
        if origin == .api && keeping {
            do { try keep(source) } catch {
                table.withLock { list in
                    list.sources[source.id] = nil
                    list.order.removeAll { $0 == source.id }
                }
                throw error
            }
        }
        source.start(album: album, pool: pool, refine: refine, events: events)
        events.publish("source_added", source: source.id, ["input": source.shownInput])
        return source
    }

    /// Writes an API source's settings to the album's index.
    private func keep(_ source: LiveSource) throws {
        let position = table.withLock { $0.order.firstIndex(of: source.id) ?? $0.order.count }
        do {
            let settings = try source.spec.storedSettings()
            try album.store(StoredSource(id: source.id, settings: settings, position: position, finishedAt: source.finishedTime))
        } catch {
            throw AddError.cannotStore("\(error)")
        }
    }

    /// Starts the config file's sources (ids `c1`, `c2`...) and the sources the API added before
    /// the last stop, with their ids and settings (paused ones stay paused). Returns what could not
    /// be started, with why.
    func restore(config: [SourceSpec]) -> [(input: String, error: Error)] {
        var failures: [(String, Error)] = []
        for spec in config {
            do { try add(spec, origin: .config) } catch { failures.append((Album.redactingPassword(spec.input), error)) }
        }
        let stored: [StoredSource]
        do { stored = try album.storedSources() } catch { return failures + [("the album's sources", error)] }
        for entry in stored {
            do {
                let spec = try JSONDecoder().decode(SourceSpec.self, from: Data(entry.settings.utf8))
                try add(spec, origin: .api, id: entry.id, finishedAt: entry.finishedAt)
            } catch {
                failures.append((entry.id, error))
            }
        }
        return failures
    }

    /// Changes a source's settings: it stops (its open clip finished and indexed) and starts again
    /// with them under the same id, unless paused; an API source's new settings are kept.
    ///
    /// - Throws: ``AddError``.
    func update(_ id: String, with patch: SourcePatch) async throws -> LiveSource {
        guard let old = source(id) else { throw AddError.notFound(id) }
        let spec = old.spec.merging(patch)
        let access = try prepare(spec, origin: old.origin)
        await old.stop()
        // A file read to the end stays finished: its new settings apply if it is added again.
        let source = LiveSource(id: id, spec: spec, access: access, origin: old.origin, defaults: defaults, publicBase: publicBase,
                                finishedAt: old.finishedTime)
        try table.withLock { list in
            guard !list.closed else { throw AddError.shuttingDown }
            list.sources[id] = source
        }
        // Kept first: a change that cannot be stored is still applied (the old run has stopped).
        var stored: Error?
        if source.origin == .api {
            do { try keep(source) } catch { stored = error }
        }
        source.start(album: album, pool: pool, refine: refine, events: events)
        events.publish("source_changed", source: id, [:])
        if let stored { throw stored }
        return source
    }

    func source(_ id: String) -> LiveSource? { table.withLock { $0.sources[id] } }

    func list() -> [LiveSource] { table.withLock { list in list.order.compactMap { list.sources[$0] } } }

    /// Stops a source (its open clip is finished and indexed) and forgets it, also for the next start.
    func remove(_ id: String) async throws -> Bool {
        guard let source = table.withLock({ list in
            defer { list.order.removeAll { $0 == id } }
            return list.sources.removeValue(forKey: id)
        }) else { return false }
        await source.stop()
        events.publish("source_removed", source: id, [:])
        if source.origin == .api {
            do { try album.forgetSource(id: id) } catch { throw AddError.cannotStore("\(error)") }
        }
        return true
    }

    /// Checks a new source's settings and what its input may open, without starting it (a
    /// cluster node does so before it stores the source for some node to run).
    ///
    /// - Throws: ``AddError``.
    func check(_ spec: SourceSpec) throws { _ = try prepare(spec, origin: .api) }

    /// Stops a source here (its open clip finished and indexed) without forgetting it: another
    /// cluster node runs it now.
    func drop(_ id: String) async {
        guard let source = table.withLock({ list in
            defer { list.order.removeAll { $0 == id } }
            return list.sources.removeValue(forKey: id)
        }) else { return }
        await source.stop()
    }

    /// Stops every source, finishing their clips, and refuses new ones.
    func shutdown() async {
        let all = table.withLock { list in
            list.closed = true
            return Array(list.sources.values)
        }
        await withTaskGroup(of: Void.self) { group in
            for source in all { group.addTask { await source.stop() } }
        }
        events.finishAll()
    }
}

func round1(_ value: Double) -> Double { (value * 10).rounded() / 10 }

/// `value` to the millisecond (times in seconds).
func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

/// `value` to 4 decimals (scores).
func round4(_ value: Double) -> Double { (value * 10000).rounded() / 10000 }

/// `GET /api/v1/counts`'s answer: `from`, `to` (null: now) and `counts` [{`source`, `hour`,
/// `kind` (`zone`: entries, `line`: crossings), `name`, `direction` (`in`, `out`, or "" for a
/// zone), `count`}].
struct CountsAnswer: Encodable {
    let from: String
    let to: String?
    let counts: [CountEntry]

    enum CodingKeys: String, CodingKey { case from, to, counts }

    /// A row as the API shows it: `direction` only for a line.
    private struct Row: Encodable {
        let source, hour, kind, name: String
        let direction: String?
        let count: Int
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(from, forKey: .from)
        try container.encode(to, forKey: .to)
        try container.encode(counts.map {
            Row(source: $0.source, hour: $0.hour, kind: $0.kind, name: $0.name, direction: $0.direction.isEmpty ? nil : $0.direction, count: $0.count)
        }, forKey: .counts)
    }
}

/// `GET /api/v1/album`'s answer: a page of clips and the URL of the next (null on the last).
struct ClipPage: Encodable {
    let clips: [ClipReport]
    let next: String?

    enum CodingKeys: String, CodingKey { case clips, next }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(clips, forKey: .clips)
        try container.encode(next, forKey: .next)
    }
}

/// The `clip_deleted` event: `{"type": "clip_deleted", "clip": ..., "reason": "retention"}`.
struct ClipDeleted: Encodable {
    let type = "clip_deleted"
    let clip: ClipReport
    let reason = "retention"
}

/// The `detection` event of a source (SSE and the live stream): the frame's analysis (`t`,
/// `analyzed`, `detections`, `rectangles`, `zones`) with `source`, `frame` (the number its JPEG is
/// served under, `image_url`), `decoded_at` (ms since 1970), `width`, `height`, `inference_ms`.
struct LiveFrame: Encodable {
    let source: String
    let number: Int
    let analysis: FrameAnalysis
    let decodedAt: Date
    let width, height: Int
    let inferenceMilliseconds: Double

    enum CodingKeys: String, CodingKey {
        case type, source, frame, analyzed, detections, rectangles, zones, width, height
        case time = "t"
        case decodedAt = "decoded_at"
        case inferenceMilliseconds = "inference_ms"
        case imageURL = "image_url"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode("detection", forKey: .type)
        try container.encode(source, forKey: .source)
        try container.encode(number, forKey: .frame)
        try container.encode(ResultEncoding.round3(analysis.time), forKey: .time)
        try container.encode(analysis.analyzed, forKey: .analyzed)
        try container.encode(analysis.detections, forKey: .detections)
        try container.encodeIfPresent(analysis.rectangles, forKey: .rectangles)
        try container.encodeIfPresent(analysis.zones, forKey: .zones)
        try container.encode((decodedAt.timeIntervalSince1970 * 1000).rounded(), forKey: .decodedAt)
        try container.encode(width, forKey: .width)
        try container.encode(height, forKey: .height)
        try container.encode(round1(inferenceMilliseconds), forKey: .inferenceMilliseconds)
        try container.encode("/api/v1/sources/\(source)/frames/\(number).jpg", forKey: .imageURL)
    }
}
