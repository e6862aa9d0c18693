import Detection
import Foundation
import Imaging
import Synchronization

/// Puts names on person detections: on frames with a person, finds the faces, and gives each
/// person box the identity of the recognizable face inside it (its centre in the box; the largest
/// such face, each face used once). Frames without a person cost nothing.
///
/// Not thread-safe (it owns a ``FaceRecognizer``): use it from the thread that detects.
public final class PersonNamer {
    public let recognizer: FaceRecognizer
    /// Label of the detections to name. Default `person`.
    public let label: String
    public let threshold: Float
    private let enrolled: [(name: String, embedding: [Float])]

    /// - Parameter gallery: read once; people enrolled later are not seen.
    public init(recognizer: FaceRecognizer, gallery: FaceGallery, threshold: Float = FaceGallery.defaultThreshold, label: String = "person") throws {
        self.recognizer = recognizer
        self.label = label
        self.threshold = threshold
        enrolled = try gallery.embeddings()
        if let first = enrolled.first, first.embedding.count != recognizer.embedder.dimension {
            throw FaceError.dimensionMismatch(gallery: first.embedding.count, embedder: recognizer.embedder.dimension)
        }
    }

    /// `detections` (boxes in pixels of `image`, upright) with identities on the person boxes
    /// that hold a recognizable face.
    public func name(_ detections: [Detection], in image: Image) throws -> [Detection] {
        guard detections.contains(where: { $0.label == label }) else { return detections }
        var faces = try recognizer.faces(in: image).filter { $0.quality == .good }
        var named = detections
        // Most confident people first; each takes the largest face centred in its box.
        for index in named.indices.sorted(by: { named[$0].score > named[$1].score }) where named[index].label == label {
            let box = named[index].box
            let inside = faces.indices.filter { box.contains(faces[$0].box.center) }
            guard let best = inside.max(by: { faces[$0].box.area < faces[$1].box.area }), let embedding = faces[best].embedding else { continue }
            let match = FaceGallery.nearest(embedding, in: enrolled, threshold: threshold)
            named[index].identity = Detection.Identity(name: match.name, distance: match.distance)
            faces.remove(at: best)
        }
        return named
    }
}

/// Person namers shared by threads (the server's sources): each call borrows one, waiting while
/// all are busy. Give it as many namers as the detector pool has detectors and call it while
/// holding a detector, so face work stays inside the same per-core budget and never waits.
public final class NamerPool: @unchecked Sendable {
    // Unchecked only for `namers`, which are not Sendable: the array is immutable and each namer
    // is used only by the caller that took its index from `free`.
    private let namers: [PersonNamer]
    private let free: Mutex<[Int]>
    private let available: DispatchSemaphore

    /// - Parameter namers: at least one; each is used by one thread at a time.
    public init(_ namers: [PersonNamer]) {
        precondition(!namers.isEmpty, "a namer pool needs a namer")
        self.namers = namers
        free = Mutex(Array(namers.indices))
        available = DispatchSemaphore(value: namers.count)
    }

    /// ``PersonNamer/name(_:in:)`` on a free namer.
    public func name(_ detections: [Detection], in image: Image) throws -> [Detection] {
        available.wait()
        let index = free.withLock { $0.removeLast() }
        defer {
            free.withLock { $0.append(index) }
            available.signal()
        }
        return try namers[index].name(detections, in: image)
    }
}
