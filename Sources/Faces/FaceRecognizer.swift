import Detection
import Foundation
import Imaging
import Inference

/// A face found in a picture: where, how well it can be recognized, and its embedding.
public struct Face: Sendable {
    /// Whether the face can be recognized.
    public enum Quality: String, Sendable, Codable {
        case good
        /// The eyes are closer than ``FaceRecognizer/Options/minimumEyeDistance``.
        case tooSmall = "too small"
        /// The nose is off the eyes' midline by more than ``FaceRecognizer/Options/maximumTurn``.
        case notFrontal = "not frontal"
    }

    /// In pixels of the upright picture.
    public var box: Rect
    public var score: Float
    /// The detector's keypoints in upright pixels (BlazeFace: right eye, left eye, nose tip, mouth
    /// centre, right ear tragion, left ear tragion).
    public var keypoints: [Point]
    public var quality: Quality
    /// Upright picture pixels to the aligned crop's (the template's).
    public var transform: AffineMap
    /// The aligned crop; nil unless `quality` is good.
    public var crop: Image?
    /// Unit length; nil unless `quality` is good.
    public var embedding: [Float]?
}

/// Finds faces, aligns them on ArcFace's template and embeds them: BlazeFace (or another detector
/// with eye, nose and mouth keypoints), then a recognition network such as MobileFaceNet.
///
/// ```swift
/// let recognizer = try FaceRecognizer(detectorPath: "face_detection_short_range.tflite", embedderPath: "mobile_face_net.tflite")
/// let gallery = try FaceGallery(path: FaceGallery.defaultPath)
/// for face in try recognizer.faces(in: picture) where face.quality == .good {
///     print(try gallery.identify(face.embedding!).name ?? "unknown")
/// }
/// ```
///
/// Not thread-safe: one recognizer per thread (or behind an actor).
public final class FaceRecognizer {
    public struct Options: Sendable {
        /// Faces below this detection score are ignored. Default 0.5 (MediaPipe's).
        public var scoreThreshold: Float = 0.5
        /// Faces whose eyes are closer than this many pixels are reported `tooSmall`: the crop would
        /// be upscaled from too little. Default 16 (a face about 40 px wide).
        public var minimumEyeDistance: Double = 16
        /// Faces whose nose tip is farther than this from the eyes' midline, in eye distances, are
        /// reported `notFrontal` (half profile or more). Default 0.4; frontal faces are within 0.1.
        public var maximumTurn: Double = 0.4
        /// Finds each face's keypoints again on a square region 2.5 times the face, where the face
        /// fills the detector's input: sharper landmarks, better alignment (one person's two shared
        /// photos come 0.25 apart instead of 0.79). About one more detector run per face. Default true.
        public var refinesKeypoints = true
        /// Default: all cores.
        public var threadCount: Int = Processors.available
        /// Default: `.xnnpack`.
        public var backend: Interpreter.Options.Backend = .xnnpack

        public init(scoreThreshold: Float = 0.5, minimumEyeDistance: Double = 16, maximumTurn: Double = 0.4, refinesKeypoints: Bool = true,
                    threadCount: Int = Processors.available, backend: Interpreter.Options.Backend = .xnnpack) {
            self.scoreThreshold = scoreThreshold
            self.minimumEyeDistance = minimumEyeDistance
            self.maximumTurn = maximumTurn
            self.refinesKeypoints = refinesKeypoints
            self.threadCount = threadCount
            self.backend = backend
        }
    }

    public let options: Options
    public let detector: ObjectDetector
    public let embedder: FaceEmbedder
    /// The workers both models run on (nil: one thread).
    private let threads: SharedThreads?

    /// - Throws: ``FaceError/unsupportedDetector(path:reason:)`` for a detector without eye, nose
    ///   and mouth keypoints; the errors of ``ObjectDetector`` and ``FaceEmbedder``.
    public init(detectorPath: String, embedderPath: String, options: Options = Options()) throws {
        self.options = options
        // The two models take turns on the same workers, which spin from one model to the next and
        // sleep between pictures; the pool or the calling thread is chosen per picture. With a pool
        // and a choice of its own per model (the detector runs twice a picture), two threads ran no
        // faster than one.
        threads = options.backend == .xnnpack && options.threadCount > 1 ? SharedThreads(count: options.threadCount) : nil
        let detectorOptions = ObjectDetector.Options(scoreThreshold: options.scoreThreshold, threadCount: options.threadCount, backend: options.backend)
        detector = try ObjectDetector(modelPath: detectorPath, options: detectorOptions, threads: threads)
        guard detector.keypointCount >= 4 else {
            throw FaceError.unsupportedDetector(path: detectorPath, reason: "its detections carry no eye, nose and mouth keypoints (\(detector.layoutDescription))")
        }
        let embedderOptions = FaceEmbedder.Options(threadCount: options.threadCount, backend: options.backend)
        embedder = try FaceEmbedder(modelPath: embedderPath, options: embedderOptions, threads: threads)
    }

    /// The faces in `image` (stored pixels, turned upright by `orientation`), best first; those of
    /// good quality aligned and embedded.
    public func faces(in image: Image, orientation: Orientation = .up) throws -> [Face] {
        threads?.begin()
        defer { threads?.end() }
        // Turned upright once: the detector, the second pass and the crops all read these pixels.
        let upright = image.converted(to: .rgb24).oriented(orientation)
        let found = try detector.detect(upright).detections
        return try found.compactMap { detection in
            guard var keypoints = detection.keypoints, keypoints.count >= 4 else { return nil }
            if options.refinesKeypoints, let refined = try refine(detection.box, in: upright) { keypoints = refined }
            let transform = FaceAlignment.transform(keypoints: keypoints)
            var face = Face(box: detection.box, score: detection.score, keypoints: keypoints, quality: quality(of: keypoints),
                            transform: transform, crop: nil, embedding: nil)
            if face.quality == .good {
                let crop = upright.warpedAffine(transform, to: embedder.inputSize)
                face.crop = crop
                face.embedding = try embedder.embed(crop)
            }
            return face
        }
    }

    /// Side of the square region the second pass looks at (the detector letterboxes it to its input).
    static let regionSize = Size(width: 256, height: 256)

    /// The keypoints of the face in `box` found again on a square region 2.5 times its longer side
    /// around its centre (black beyond the picture): the detection nearest the region's centre,
    /// mapped back to the picture. Nil when the second pass finds no face.
    func refine(_ box: Rect, in upright: Image) throws -> [Point]? {
        let side = 2.5 * max(box.width, box.height)
        guard side > 0 else { return nil }
        let scale = Double(Self.regionSize.width) / side, centre = Double(Self.regionSize.width) / 2
        let toRegion = AffineMap.scale(scale, scale, translate: centre - box.center.x * scale, centre - box.center.y * scale)
        let region = upright.warpedAffine(toRegion, to: Self.regionSize)
        let again = try detector.detect(region).detections.filter { ($0.keypoints?.count ?? 0) >= 4 }
        let middle = Point(x: centre, y: centre)
        guard let nearest = again.min(by: { $0.box.center.distance(to: middle) < $1.box.center.distance(to: middle) }) else { return nil }
        let back = toRegion.inverted
        return nearest.keypoints!.map { back.apply($0) }
    }

    /// Whether a face with these keypoints (right eye, left eye, nose tip, ...) can be recognized.
    public func quality(of keypoints: [Point]) -> Face.Quality {
        let (right, left, nose) = (keypoints[0], keypoints[1], keypoints[2])
        let eyes = right.distance(to: left)
        if eyes < options.minimumEyeDistance { return .tooSmall }
        // The nose tip's offset along the eye axis from the eyes' midpoint, in eye distances.
        let mid = Point(x: (right.x + left.x) / 2, y: (right.y + left.y) / 2)
        let along = ((nose.x - mid.x) * (left.x - right.x) + (nose.y - mid.y) * (left.y - right.y)) / (eyes * eyes)
        return abs(along) > options.maximumTurn ? .notFrontal : .good
    }
}
