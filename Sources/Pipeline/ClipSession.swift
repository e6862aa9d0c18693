import Detection
import Foundation
import Imaging
import Media

/// What a recording run reports as it goes.
public enum RecorderEvent: Sendable {
    case clipStarted(path: String, start: Double)
    case clipFinished(ClipEntry)
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

    private struct OpenClip {
        /// Created at the first frame, when the frame size is known.
        var writer: VideoWriter?
        var path: String
        var names: (clip: String, thumbnail: String)
        var start: Double
        var end: Double = 0
        var labels: Set<String> = []
        var bestScore: Float = -1
        var bestFrame: Image?
    }

    public init(album: Album, source: String, options: Options, events: @escaping @Sendable (RecorderEvent) -> Void) throws {
        self.album = album
        self.source = source
        self.options = options
        self.events = events
        annotator = options.drawBoxes ? try Annotator() : nil
        recorder = ClipRecorder(policy: options.policy)
    }

    /// Feeds one detected frame (in order). A frame matches when it has any detection.
    public func consume(_ item: DetectedFrame) throws {
        let matched = !(item.detections ?? []).isEmpty
        try perform(recorder.feed(item, time: item.frame.time, matched: matched))
    }

    /// Closes the open clip, if any (end of input, SIGINT, SIGTERM).
    public func finish() throws {
        try perform(recorder.finish())
    }

    private func perform(_ actions: [ClipRecorder<DetectedFrame>.Action]) throws {
        for action in actions {
            switch action {
            case .open(let start):
                let names = album.nextClipNames()
                let path = album.directory.appendingPathComponent(names.clip).path
                current = OpenClip(writer: nil, path: path, names: names, start: start)
                events(.clipStarted(path: path, start: start))
            case .write(let item, let time):
                try write(item, time: time)
            case .close(let end):
                try close(end: end)
            }
        }
    }

    private func write(_ item: DetectedFrame, time: Double) throws {
        guard var clip = current else { return }
        var image = item.frame.image
        let detections = item.detections ?? []
        if let annotator { annotator.draw(detections, on: &image) }
        if clip.writer == nil {
            clip.writer = try VideoWriter(
                path: clip.path, width: image.width, height: image.height,
                options: .init(frameRate: options.frameRate, preset: options.preset, fragmented: true))
        }
        try clip.writer!.write(image, time: time)
        clip.end = time
        for d in detections {
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
        guard let clip = current, let writer = clip.writer else {
            current = nil
            return
        }
        current = nil
        try writer.finish()
        var thumbnail: String? = nil
        if let best = clip.bestFrame {
            try ImageFile.write(best, to: album.directory.appendingPathComponent(clip.names.thumbnail).path, format: .jpeg(quality: 85))
            thumbnail = clip.names.thumbnail
        }
        let entry = try album.add(ClipEntry(
            id: nil, source: source, clip: clip.names.clip, thumbnail: thumbnail, start: clip.start, end: clip.end,
            duration: clip.end - clip.start + 1 / options.frameRate, frames: writer.framesWritten,
            labels: clip.labels.sorted().joined(separator: ","), bestScore: Double(max(clip.bestScore, 0)),
            createdAt: Album.timestamp()))
        events(.clipFinished(entry))
    }
}
