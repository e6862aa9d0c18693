import Detection
import Foundation
import Hummingbird
import Imaging
import Media
import Pipeline
import Rectangles

/// A source as `POST /api/v1/sources` (and the config file) describe it.
public struct SourceSpec: Codable, Sendable, Equatable {
    /// A video file, a stream URL (rtsp, http(s), tcp, udp, hls), `/dev/videoN`, or a sample's name.
    public var input: String
    /// Record clips of matching frames into the album. Default true.
    public var record: Bool?
    /// Labels to detect and record; default `["person"]`, `[]` for every class.
    public var classes: [String]?
    /// Lowest score kept, 0.05...1. Default 0.5.
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

    public init(input: String, record: Bool? = nil, classes: [String]? = nil, threshold: Float? = nil, realtime: Bool? = nil, loop: Bool? = nil,
                trigger: String? = nil, rectangles: Bool? = nil) {
        self.input = input
        self.record = record
        self.classes = classes
        self.threshold = threshold
        self.realtime = realtime
        self.loop = loop
        self.trigger = trigger
        self.rectangles = rectangles
    }

    /// Whether only strangers' faces open clips.
    var recordsStrangersOnly: Bool { trigger == "unknown-face" }

    /// - Throws: a message for the API's 400 answer.
    func validate() throws {
        guard !input.trimmingCharacters(in: .whitespaces).isEmpty, input.utf8.count <= 4096 else {
            throw SpecError("input must be a file, URL, /dev/videoN or sample name (at most 4096 bytes)")
        }
        if let threshold, !(0.05...1).contains(threshold) { throw SpecError("threshold must be between 0.05 and 1") }
        if let classes, classes.count > 100 || classes.contains(where: { $0.isEmpty || $0.count > 100 }) {
            throw SpecError("classes must be up to 100 non-empty labels")
        }
        if let trigger, !["detection", "unknown-face"].contains(trigger) {
            throw SpecError("trigger must be detection or unknown-face")
        }
    }

    struct SpecError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// One running source of `spotter serve`: a thread runs its ``SourceRun`` (reader, shared detector
/// pool, clip recorder); the live view reads its latest frames, encoded to JPEG once each however
/// many people watch.
final class LiveSource: @unchecked Sendable {
    let id: String
    let spec: SourceSpec
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
    struct Shot {
        let number: Int
        let frame: DetectedFrame
        let rectangles: [RectangleObservation]
    }

    // Everything below is guarded by `lock`.
    private let lock = NSLock()
    private var state = SourceRun.State.opening
    private var message: String?
    private var info: VideoReader.Info?
    private var stats = PipelineStats()
    private var connectionBase = PipelineStats()
    private var frames = 0
    private var recording = false
    private var clips = 0
    private var recent: [Shot] = []
    /// Rectangles found with each frame's detections (by frame index), until the frame is shown.
    private var foundRectangles: [(index: Int, rectangles: [RectangleObservation])] = []
    private var stopFlag: StopFlag?
    private var stopped = false
    private var lastLatencyMilliseconds = 0.0
    // JPEGs of recent frames, made on first request; guarded by `encodeLock`.
    private let encodeLock = NSLock()
    private var encoded: [(number: Int, boxes: Bool, bytes: ByteBuffer)] = []
    private var annotator: Annotator?
    /// Signalled when the run's thread ends.
    private let ended = DispatchSemaphore(value: 0)

    init(id: String, spec: SourceSpec, access: SourcePolicy.Resolved) {
        self.id = id
        self.spec = spec
        self.access = access
        self.path = access.input
        let classes = spec.classes ?? ["person"]
        self.classes = classes.isEmpty ? nil : Set(classes.map { $0.lowercased() })
        threshold = spec.threshold ?? 0.5
        albumSource = Album.sourceName(path)
    }

    /// Starts the run on a thread of its own: opens the input, then reads, detects on the shared
    /// pool and records until stopped (a file until its end).
    func start(album: Album, pool: DetectorPool, refine: DetectionRefiner?, events: EventHub) {
        let thread = Thread { [self] in
            defer { ended.signal() }
            update(state: .opening, message: nil, events: events)
            var readerOptions = VideoReader.Options(openTimeout: 15, readTimeout: 10)
            readerOptions.allowedProtocols = access.allowedProtocols
            readerOptions.allowedFormats = access.allowedFormats
            let reader: VideoReader
            do { reader = try VideoReader(path: path, options: readerOptions) } catch {
                update(state: .failed, message: "\(error)", events: events)
                return
            }
            var recorder: ClipSession?
            if spec.record ?? true {
                do {
                    var sessionOptions = ClipSession.Options(frameRate: reader.info.frameRate ?? 25)
                    if spec.recordsStrangersOnly {
                        // The live view still shows everyone; only strangers open and keep clips.
                        sessionOptions.triggers = { $0.isStranger }
                    }
                    recorder = try ClipSession(album: album, source: albumSource, options: sessionOptions,
                                               events: { [self] event in recorderEvent(event, events: events) })
                } catch {
                    update(state: .failed, message: "\(error)", events: events)
                    return
                }
            }
            var options = SourceRun.Options(reconnect: true, loop: spec.loop ?? false, reader: readerOptions)
            options.pipeline.realTime = spec.realtime ?? false
            let threshold = threshold, classes = classes
            // Vision's defaults, which are valid.
            let rectangleDetector = (spec.rectangles ?? false) ? try? RectangleDetector(options: .init(retriesAtFinerScale: false)) : nil
            let run = SourceRun(
                input: path, options: options, recorder: recorder,
                detect: { [self] frame in
                    // Refining (face recognition) and rectangles hold the detector too: one budget for all.
                    try pool.withDetector { detector in
                        let found = try detector.detect(frame.image).detections.filter { d in
                            d.score >= threshold && (classes?.contains(d.label.lowercased()) ?? true)
                        }
                        if let rectangleDetector {
                            let rectangles = rectangleDetector.detect(in: frame.image)
                            lock.withLock {
                                foundRectangles.append((frame.index, rectangles))
                                // Frames are shown in order, one or two behind at most; a few more is a bound.
                                if foundRectangles.count > 16 { foundRectangles.removeFirst() }
                            }
                        }
                        return try refine?(found, frame.image) ?? found
                    }
                },
                events: { [self] event in handle(event, events: events) })
            let stopNow = lock.withLock {
                stopFlag = run.stopRequested
                return stopped
            }
            if stopNow { run.stopRequested.set() }
            // A failure was reported as the `failed` state with its message.
            _ = try? run.run(opened: reader)
        }
        thread.name = "spotter.source.\(id)"
        thread.start()
    }

    /// Stops the run and waits (off the caller's task) until its open clip is finished.
    func stop() async {
        let flag = lock.withLock {
            stopped = true
            return stopFlag
        }
        flag?.set()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [ended] in
                ended.wait()
                ended.signal()
                continuation.resume()
            }
        }
    }

    private func update(state: SourceRun.State, message: String?, events: EventHub) {
        lock.withLock {
            self.state = state
            self.message = message
        }
        var object: [String: Any] = ["state": state.rawValue]
        if let message { object["message"] = message }
        events.publish("source_state", source: id, object)
    }

    private func handle(_ event: SourceRun.Event, events: EventHub) {
        switch event {
        case .opened(let info):
            lock.withLock {
                self.info = info
                connectionBase = stats
            }
        case .state(let state, let message):
            update(state: state, message: message, events: events)
        case .progress(let current):
            let (fraction, snapshot) = lock.withLock { () -> (Double?, PipelineStats) in
                stats.received = connectionBase.received + current.received
                stats.processed = connectionBase.processed + current.processed
                stats.dropped = connectionBase.dropped + current.dropped
                stats.elapsed = connectionBase.elapsed + current.elapsed
                stats.inferenceMilliseconds = current.inferenceMilliseconds
                return (progressFraction, stats)
            }
            var object: [String: Any] = [
                "processed": snapshot.processed, "received": snapshot.received, "dropped": snapshot.dropped,
                "fps": round1(snapshot.fps), "inference_ms": round1(snapshot.inferenceMilliseconds),
            ]
            if let fraction {
                Self.addProgress(fraction, elapsed: snapshot.elapsed, to: &object)
                events.publish("job_progress", source: id, object)
            } else {
                events.publish("source_stats", source: id, object)
            }
        case .frame(let item):
            let (number, rectangles) = lock.withLock { () -> (Int, [RectangleObservation]?) in
                frames += 1
                // This frame's rectangles; those of frames that never came through are dropped.
                var rectangles: [RectangleObservation]?
                if let at = foundRectangles.firstIndex(where: { $0.index == item.frame.index }) {
                    rectangles = foundRectangles[at].rectangles
                    foundRectangles.removeFirst(at + 1)
                }
                recent.append(Shot(number: frames, frame: item, rectangles: rectangles ?? []))
                if recent.count > 4 { recent.removeFirst() }
                return (frames, rectangles)
            }
            guard events.subscriberCount > 0 else { return }
            let image = item.frame.image
            var event: [String: Any] = [
                "frame": number, "time": (item.frame.time * 1000).rounded() / 1000,
                "decoded_at": (item.decodedAt.timeIntervalSince1970 * 1000).rounded(),
                "width": image.width, "height": image.height, "inference_ms": round1(item.inferenceMilliseconds),
                "image_url": "/api/v1/sources/\(id)/frames/\(number).jpg",
                "detections": (item.detections ?? []).map { d in
                    let box: [Double] = [d.box.minX, d.box.minY, d.box.maxX, d.box.maxY].map { (Double($0) * 10).rounded() / 10 }
                    var object: [String: Any] = ["label": d.label, "score": (Double(d.score) * 1000).rounded() / 1000, "box": box]
                    if let identity = d.identity {
                        let name: Any = identity.name ?? NSNull()
                        let distance: Any = identity.distance.map { (Double($0) * 1000).rounded() / 1000 } ?? NSNull()
                        object["identity"] = ["name": name, "distance": distance]
                    }
                    return object
                },
            ]
            if let rectangles { event["rectangles"] = rectangles.map(\.jsonObject) }
            events.publish("detection", source: id, event, frame: number, jpeg: { [self] in try? jpeg(frame: number, boxes: false)?.bytes })
        case .recorder:
            break
        }
    }

    private func recorderEvent(_ event: RecorderEvent, events: EventHub) {
        switch event {
        case .clipStarted(_, let start):
            lock.withLock { recording = true }
            events.publish("clip_started", source: id, ["start": (start * 1000).rounded() / 1000])
        case .clipFinished(let entry):
            lock.withLock {
                recording = false
                clips += 1
            }
            events.publish("clip_finished", source: id, ["clip": clipObject(entry)])
        }
    }

    /// `percent` and, once it can be estimated, `eta_s` of a job `fraction` done after `elapsed` seconds.
    private static func addProgress(_ fraction: Double, elapsed: Double, to object: inout [String: Any]) {
        object["percent"] = round1(fraction * 100)
        if fraction > 0, elapsed > 0 { object["eta_s"] = round1(elapsed * (1 - fraction) / fraction) }
    }

    /// Share of a file done, when its length is known and it is not looped or live.
    private var progressFraction: Double? {
        guard let info, !info.isLive, !(spec.loop ?? false) else { return nil }
        if let count = info.frameCount, count > 0 { return min(1, Double(stats.received) / Double(count)) }
        if let duration = info.duration, duration > 0, let rate = info.frameRate { return min(1, Double(stats.received) / (duration * rate)) }
        return nil
    }

    /// The JPEG of frame `number` (one of the last few), with boxes drawn when asked; nil when that
    /// frame is gone. Each is encoded once.
    func jpeg(frame number: Int?, boxes: Bool) throws -> (number: Int, bytes: ByteBuffer)? {
        guard let shot = lock.withLock({ number.map { n in recent.first { $0.number == n } } ?? recent.last }) else { return nil }
        return try encodeLock.withLock {
            if let hit = encoded.first(where: { $0.number == shot.number && $0.boxes == boxes }) { return (hit.number, hit.bytes) }
            var image = shot.frame.frame.image
            if boxes {
                if annotator == nil { annotator = try Annotator() }
                image.outline(shot.rectangles)
                annotator?.draw(shot.frame.detections ?? [], on: &image)
            }
            // Kept as a ByteBuffer: every response shares its storage instead of copying it.
            let bytes = ByteBuffer(bytes: try ImageFile.encode(image, format: .jpeg(quality: 80), path: "frame \(shot.number)"))
            encoded.append((shot.number, boxes, bytes))
            if encoded.count > 8 { encoded.removeFirst() }
            return (shot.number, bytes)
        }
    }

    /// The status object of the API.
    func status() -> [String: Any] {
        lock.withLock {
            var object: [String: Any] = [
                "id": id, "input": spec.input, "state": state.rawValue, "record": spec.record ?? true,
                "classes": classes.map { $0.sorted() } ?? [], "threshold": Double(threshold),
                "kind": info.map { $0.isLive ? "live" : "file" } ?? (spec.input.contains("://") || spec.input.hasPrefix("/dev/") ? "live" : "file"),
                "realtime": spec.realtime ?? false, "loop": spec.loop ?? false, "rectangles": spec.rectangles ?? false,
                "recording": recording, "clips": clips, "frames": frames,
                "received": stats.received, "processed": stats.processed, "dropped": stats.dropped,
                "fps": round1(stats.fps), "inference_ms": round1(stats.inferenceMilliseconds),
                "snapshot_url": "/api/v1/sources/\(id)/snapshot.jpg", "album_source": albumSource,
            ]
            if let message { object["message"] = message }
            if let info {
                object["width"] = info.width
                object["height"] = info.height
                if let rate = info.frameRate { object["frame_rate"] = round1(rate) }
            }
            if let fraction = progressFraction { Self.addProgress(fraction, elapsed: stats.elapsed, to: &object) }
            return object
        }
    }

    /// Counters for /metrics.
    var metrics: (fps: Double, inference: Double, dropped: Int, processed: Int, recording: Bool) {
        lock.withLock { (stats.fps, stats.inferenceMilliseconds, stats.dropped, stats.processed, recording) }
    }
}

/// The server's sources: added and removed at run time, all detecting on one ``DetectorPool``.
final class SourceHub: @unchecked Sendable {
    let album: Album
    let pool: DetectorPool
    let refine: DetectionRefiner?
    let events: EventHub
    private let resolve: @Sendable (String) throws -> String
    let policy: SourcePolicy
    // `sources`, `order`, `next` and `closed` are guarded by `lock`.
    private let lock = NSLock()
    private var sources: [String: LiveSource] = [:]
    private var order: [String] = []
    private var next = 1
    private var closed = false
    /// Most sources at once.
    static let limit = 64

    init(album: Album, pool: DetectorPool, refine: DetectionRefiner?, events: EventHub, resolve: @escaping @Sendable (String) throws -> String,
         policy: SourcePolicy) {
        self.policy = policy
        self.album = album
        self.pool = pool
        self.refine = refine
        self.events = events
        self.resolve = resolve
    }

    enum AddError: Error, CustomStringConvertible {
        case invalid(String), tooMany, shuttingDown

        var description: String {
            switch self {
            case .invalid(let message): return message
            case .tooMany: return "at most \(SourceHub.limit) sources run at once; remove one first"
            case .shuttingDown: return "the server is shutting down"
            }
        }
    }

    /// Starts a source.
    ///
    /// - Throws: ``AddError``.
    func add(_ spec: SourceSpec, origin: SourcePolicy.Origin) throws -> LiveSource {
        do { try spec.validate() } catch { throw AddError.invalid("\(error)") }
        if spec.recordsStrangersOnly && refine == nil { throw AddError.invalid("trigger unknown-face needs spotter serve --faces GALLERY") }
        let access: SourcePolicy.Resolved
        do { access = try policy.check(try resolve(spec.input), origin: origin) } catch { throw AddError.invalid("\(error)") }
        let source: LiveSource = try lock.withLock {
            guard !closed else { throw AddError.shuttingDown }
            guard sources.count < Self.limit else { throw AddError.tooMany }
            let source = LiveSource(id: "s\(next)", spec: spec, access: access)
            next += 1
            sources[source.id] = source
            order.append(source.id)
            return source
        }
        source.start(album: album, pool: pool, refine: refine, events: events)
        events.publish("source_added", source: source.id, ["input": spec.input])
        return source
    }

    func source(_ id: String) -> LiveSource? { lock.withLock { sources[id] } }

    func list() -> [LiveSource] { lock.withLock { order.compactMap { sources[$0] } } }

    /// Stops a source (its open clip is finished and indexed) and forgets it.
    func remove(_ id: String) async -> Bool {
        guard let source = lock.withLock({ sources.removeValue(forKey: id) }) else { return false }
        lock.withLock { order.removeAll { $0 == id } }
        await source.stop()
        events.publish("source_removed", source: id, [:])
        return true
    }

    /// Stops every source, finishing their clips, and refuses new ones.
    func shutdown() async {
        let all = lock.withLock {
            closed = true
            return Array(sources.values)
        }
        await withTaskGroup(of: Void.self) { group in
            for source in all { group.addTask { await source.stop() } }
        }
        events.finishAll()
    }
}

func round1(_ value: Double) -> Double { (value * 10).rounded() / 10 }

/// A clip as the API shows it.
func clipObject(_ clip: ClipEntry) -> [String: Any] {
    let name = URL(fileURLWithPath: clip.clip).lastPathComponent
    var object: [String: Any] = [
        "id": clip.id ?? 0, "source": clip.source, "start": clip.start, "end": clip.end, "duration": clip.duration,
        "frames": clip.frames, "labels": clip.labels.split(separator: ",").map(String.init), "best_score": clip.bestScore,
        "incomplete": clip.incomplete, "created_at": clip.createdAt, "url": "/media/clips/\(name)",
    ]
    if let thumbnail = clip.thumbnail {
        object["thumbnail_url"] = "/media/thumbnails/\(URL(fileURLWithPath: thumbnail).lastPathComponent)"
        object["snapshot_url"] = "/media/thumbnails/\(URL(fileURLWithPath: thumbnail).deletingPathExtension().lastPathComponent)-full.jpg"
    }
    return object
}
