import Detection
import Foundation
import Imaging
import Media

/// What a recording run reports as it goes.
public enum RecorderEvent: Sendable {
    case clipStarted(path: String, start: Double)
    case clipFinished(ClipEntry)
    /// The clip's row was refused: the source's lease has a newer generation (``SourceLease``).
    case clipRefused(ClipEntry)
}

/// The lease a cluster node runs a source under. What it writes for the source carries the node
/// and the lease generation (each clip's tags and row), and is written only when `admit` confirms
/// the lease is still the source's newest: clip rows (here) and counts (the server's). `admit`
/// names what waits (for its log), may take its time (the database away) and calls back once, on
/// any thread; until then a clip stays locked, so no repair indexes it meanwhile.
public struct SourceLease: Sendable {
    public typealias Verdict = @Sendable (Bool) -> Void
    public var node: String
    public var generation: Int64
    public var admit: @Sendable (_ what: String, _ decided: @escaping Verdict) -> Void

    public init(node: String, generation: Int64, admit: @escaping @Sendable (_ what: String, _ decided: @escaping Verdict) -> Void) {
        self.node = node
        self.generation = generation
        self.admit = admit
    }
}

/// Records clips of the frames the detector matched into an album: the consumer stage of
/// `spotter record`. Clips are fragmented MP4 while written (readable if the process is killed),
/// each with a thumbnail of its best-scoring frame and an index entry when it closes.
///
/// Used only from the pipeline's consume thread (hence `@unchecked Sendable`: the writer, the
/// annotator and the recorder state are never touched concurrently).
public final class ClipSession: @unchecked Sendable {
    public struct Options: Sendable {
        public var policy = ClipRecorder<DetectedFrame>.Policy()
        /// Draw boxes and labels on the recorded frames. Default true.
        public var drawBoxes = true
        /// Nominal frame rate of the clips (the source's). Default 25.
        public var frameRate: Double = 25
        /// libx264 preset. Default `ultrafast`.
        public var preset = "ultrafast"
        /// Which detections make a frame match (open or keep a clip); all of a frame's detections
        /// are still drawn. Default nil: any detection.
        public var triggers: (@Sendable (Detection) -> Bool)?
        /// With tracking, only objects inside one of these zones open and keep clips. Default nil: anywhere.
        public var requiredZones: Set<String>?
        /// The server's id of the source, stored with each clip. Default nil.
        public var sourceID: String?
        /// In a cluster, the lease the source runs under: a clip's row is written only while it
        /// is the source's newest (fencing); a refused clip stays on disk without its record, and
        /// a later repair indexes it as incomplete. Default nil: rows are always written.
        public var lease: SourceLease?

        public init(policy: ClipRecorder<DetectedFrame>.Policy = .init(), drawBoxes: Bool = true, frameRate: Double = 25, preset: String = "ultrafast") {
            self.policy = policy
            self.drawBoxes = drawBoxes
            self.frameRate = frameRate
            self.preset = preset
        }
    }

    private let album: Album
    private let source: String
    private let options: Options
    private let annotator: Annotator?
    private let events: @Sendable (RecorderEvent) -> Void
    private var recorder: ClipRecorder<DetectedFrame>
    private var current: OpenClip?

    /// Clips indexed so far (complete or not).
    public var clipsFinished: Int { finishedCount.value }
    private let finishedCount = Locked(0)
    /// Clips whose row waits for the lease's verdict (``Options/lease``).
    private let admitting = DispatchGroup()
    /// Finished clips whose index row could not be written yet (the index locked by another
    /// program for longer than its busy timeout): tried again after each later clip and at
    /// ``finish()``; each has its record beside it, so a repair indexes it with its labels.
    public private(set) var pendingRows: [ClipEntry] = []

    private struct OpenClip {
        /// Created at the first frame, when the frame size is known.
        var writer: VideoWriter?
        var reservation: ClipReservation
        var start: Double
        var end: Double = 0
        var labels: Set<String> = []
        var bestScore: Float = -1
        var bestFrame: Image?
        /// Wall-clock time of the first and last frame written.
        var startedAt: Date?
        var endedAt: Date?
        /// The tracked objects seen in it, by track id, in order of appearance.
        var objects: [Int: ClipObject] = [:]
        var objectOrder: [Int] = []
    }

    public init(album: Album, source: String, options: Options, events: @escaping @Sendable (RecorderEvent) -> Void) throws {
        self.album = album
        self.source = source
        self.options = options
        self.events = events
        annotator = options.drawBoxes ? try Annotator() : nil
        recorder = ClipRecorder(policy: options.policy)
    }

    /// Whether the last analyzed frame held an object not yet confirmed (frames skipped by
    /// `every` keep holding).
    private var holding = false

    /// Feeds one detected frame (in order). Without tracking, a frame matches when it has a
    /// detection that `options.triggers` accepts (any detection without it). With tracking, it
    /// matches when such a detection belongs to a confirmed track (in a required zone) that is not
    /// stationary, or while a clip is open, stationary: a clip opens at that track's first frame,
    /// so a detection seen in a single frame opens none, and a parked car opens none once it
    /// settled, even after frames that missed it (a clip open when it arrived goes on while it is
    /// seen, so someone waiting at the door stays recorded).
    ///
    /// - Throws: ``MediaError`` or ``AlbumError`` when a clip cannot be written (a full disk); the
    ///   clip so far is then indexed as incomplete (or removed if nothing of it is readable) before
    ///   the error is thrown, so the album stays consistent.
    public func consume(_ item: DetectedFrame) throws {
        var matched = false
        var since: Double?
        if let analysis = item.analysis {
            let wanted = options.triggers.map { analysis.detections.filter($0) } ?? analysis.detections
            if analysis.isTracked {
                holding = wanted.contains { $0.track == nil }
                // A stationary object (a parked car, someone standing still) keeps an open clip going
                // while it is seen (a person waiting at the door stays recorded) but never opens one.
                for detection in wanted where !detection.isStationary || recorder.isRecording {
                    guard let id = detection.track, let object = analysis.tracks.first(where: { $0.track == id }) else { continue }
                    if let required = options.requiredZones, required.isDisjoint(with: object.zones) { continue }
                    matched = true
                    since = min(since ?? object.firstSeen, object.firstSeen)
                }
            } else {
                holding = false
                matched = !wanted.isEmpty
            }
        }
        do {
            try perform(recorder.feed(item, time: item.frame.time, matched: matched, hold: holding, since: since))
        } catch {
            salvage()
            throw error
        }
    }

    /// Closes the open clip, if any (end of input, SIGINT, SIGTERM), and tries once more to write
    /// the rows still pending.
    public func finish() throws {
        do {
            try perform(recorder.finish())
        } catch {
            salvage()
            throw error
        }
        try indexPending()
        // The last clips' rows are written (or refused) before the source's lease may go.
        if admitting.wait(timeout: .now() + Self.admitSeconds) == .timedOut {
            throw AlbumError.indexFailed(path: album.directory.path, reason: "the cluster did not answer within \(Int(Self.admitSeconds)) s whether the last clips' rows may be written")
        }
    }

    /// How long ``finish()`` waits for the lease's verdicts on the last clips.
    static let admitSeconds = 30.0

    /// Clips left on disk without an index row (a full disk took the row too): `album repair`
    /// indexes them once there is room. Relative paths.
    public private(set) var unindexed: [String] = []

    /// Clips a failed write left with no readable frame, removed: each with its size on disk when
    /// it was given up (relative path, bytes).
    public private(set) var unreadable: [(clip: String, bytes: Int)] = []

    /// After a failed write: closes what can be closed of the open clip and indexes what of it is
    /// readable as incomplete, or removes it.
    private func salvage() {
        guard let clip = current else { return }
        current = nil
        try? clip.writer?.finish()
        let bytes = (try? FileManager.default.attributesOfItem(atPath: clip.reservation.path)[.size] as? Int) ?? 0
        do {
            if try album.adopt(clip.reservation.clip, source: source, start: clip.start) != nil {
                finishedCount.withLock { $0 += 1 }
            } else {
                unreadable.append((clip.reservation.clip, bytes))
            }
        } catch {
            unindexed.append(clip.reservation.clip)
        }
        clip.reservation.release()
    }

    private func perform(_ actions: [ClipRecorder<DetectedFrame>.Action]) throws {
        for action in actions {
            switch action {
            case .open(let start):
                let reservation = try album.reserveClip()
                current = OpenClip(writer: nil, reservation: reservation, start: start)
                events(.clipStarted(path: reservation.path, start: start))
            case .write(let item, let time):
                try write(item, time: time)
            case .close(let end):
                try close(end: end)
            }
        }
    }

    /// What the clip's file says of itself, for a repair that finds it without its row.
    private func metadata(start: Double) -> [String: String] {
        var tags = ["spotter_source": source, "spotter_start": String(start)]
        tags["spotter_source_id"] = options.sourceID
        tags["spotter_node"] = options.lease?.node
        tags["spotter_generation"] = options.lease.map { String($0.generation) }
        return tags
    }

    private func write(_ item: DetectedFrame, time: Double) throws {
        guard var clip = current else { return }
        var image = item.frame.image
        let detections = item.detections ?? []
        if let annotator { annotator.draw(detections, on: &image) }
        if clip.writer == nil {
            // The source and start are stored in the clip, so an album repair can index it if this
            // run dies before writing its row.
            clip.writer = try VideoWriter(
                path: clip.reservation.path, width: image.width, height: image.height,
                options: .init(frameRate: options.frameRate, preset: options.preset, fragmented: true,
                               metadata: metadata(start: clip.start)))
            current = clip
        }
        try clip.writer!.write(image, time: time)
        clip.end = time
        if clip.startedAt == nil { clip.startedAt = item.decodedAt }
        clip.endedAt = item.decodedAt
        // Frames motion gating skipped carry the last boxes: drawn, not counted again.
        let counted = item.analysis?.analyzed ?? false ? detections : []
        for d in counted {
            if let track = d.track {
                if var object = clip.objects[track] {
                    object.lastSeen = time
                    if Double(d.score) > object.bestScore {
                        object.bestScore = Double(d.score)
                        object.bestTime = time
                    }
                    clip.objects[track] = object
                } else {
                    // From the track's first frame, which a clip that opened on it holds too.
                    let first = item.analysis?.tracks.first { $0.track == track }.map { max(clip.start, $0.firstSeen) } ?? time
                    clip.objects[track] = ClipObject(track: track, label: d.label, firstSeen: min(first, time), lastSeen: time, bestScore: Double(d.score), bestTime: time)
                    clip.objectOrder.append(track)
                }
            }
            clip.labels.insert(d.label)
            if d.score > clip.bestScore {
                clip.bestScore = d.score
                clip.bestFrame = image
            }
        }
        if clip.bestFrame == nil { clip.bestFrame = image }
        current = clip
    }

    private func close(end: Double) throws {
        guard let clip = current else { return }
        guard let writer = clip.writer else {
            current = nil
            try? FileManager.default.removeItem(atPath: clip.reservation.path)
            clip.reservation.release()
            return
        }
        try writer.finish()
        var thumbnail: String? = nil
        if let best = clip.bestFrame {
            thumbnail = try album.writeThumbnail(best, named: clip.reservation.thumbnail)
        }
        current = nil
        let entry = ClipEntry(
            id: nil, source: source, clip: clip.reservation.clip, thumbnail: thumbnail, start: clip.start, end: clip.end,
            duration: clip.end - clip.start + 1 / options.frameRate, frames: writer.framesWritten,
            labels: clip.labels.sorted().joined(separator: ","), bestScore: Double(max(clip.bestScore, 0)),
            createdAt: Album.timestamp(), startedAt: clip.startedAt.map(UTCTime.iso8601WithOffset),
            endedAt: clip.endedAt.map(UTCTime.iso8601WithOffset), objects: clip.objectOrder.compactMap { clip.objects[$0] },
            sourceID: options.sourceID, node: options.lease?.node, generation: options.lease?.generation)
        // The record beside the clip first: a row that cannot be written now is not lost.
        do { try album.writeRecord(entry) } catch {
            clip.reservation.release()
            throw error
        }
        if let lease = options.lease {
            admit(entry, reservation: clip.reservation, lease: lease)
            return
        }
        defer { clip.reservation.release() }
        pendingRows.append(entry)
        // Each try may wait out the index's busy timeout (30 s): after a failure, the next tries
        // come a minute later or at the end, so a long lock stalls recording once, not per clip.
        if let failed = lastIndexFailure, failed.duration(to: .now) < .seconds(60) { return }
        try indexPending()
    }

    /// Asks the lease whether the clip's row may be written, and writes it, or leaves the clip
    /// without its record for a repair to index as incomplete; the clip stays locked until then.
    private func admit(_ entry: ClipEntry, reservation: ClipReservation, lease: SourceLease) {
        admitting.enter()
        let (album, events, finished, admitting) = (album, events, finishedCount, admitting)
        lease.admit(entry.clip) { admitted in
            // Writing may block and is retried: on a thread of its own, not the verdict's.
            DispatchQueue.global().async {
                defer {
                    reservation.release()
                    admitting.leave()
                }
                do {
                    guard admitted else { throw AlbumError.rowRefused(clip: entry.clip, reason: "the lease has moved on") }
                    let added = try Self.add(entry, to: album, within: Self.indexPatience)
                    finished.withLock { $0 += 1 }
                    events(.clipFinished(added))
                } catch AlbumError.rowRefused {
                    // A repair indexes the clip as incomplete, from what its file holds.
                    album.forgetRecord(of: entry.clip)
                    events(.clipRefused(entry))
                } catch {
                    // A row that cannot be written in time is added from the record by a repair.
                }
            }
        }
    }

    /// How long an admitted clip's row is retried while the index fails (a database that just
    /// came back, a busy index), in seconds: within ``finish()``'s wait.
    static let indexPatience = 20.0

    /// Adds `entry`, trying again every second while the index fails, for up to `seconds`.
    private static func add(_ entry: ClipEntry, to album: Album, within seconds: Double) throws -> ClipEntry {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            do { return try album.add(entry) } catch AlbumError.indexFailed(let path, let reason) {
                guard Date() < deadline else { throw AlbumError.indexFailed(path: path, reason: reason) }
                Thread.sleep(forTimeInterval: 1)
            }
        }
    }

    /// When writing a row last failed.
    private var lastIndexFailure: ContinuousClock.Instant?

    /// Writes the rows of finished clips that are still waiting; a row that fails stays pending.
    private func indexPending() throws {
        var waiting: [ClipEntry] = []
        for entry in pendingRows {
            guard waiting.isEmpty else {
                waiting.append(entry)
                continue
            }
            do {
                let added = try album.add(entry)
                finishedCount.withLock { $0 += 1 }
                events(.clipFinished(added))
            } catch let error as AlbumError {
                // The index is busy or damaged: the clip and its record stay; a later try or a
                // repair adds the row.
                guard case .indexFailed = error else { throw error }
                lastIndexFailure = .now
                waiting.append(entry)
            }
        }
        pendingRows = waiting
    }
}
