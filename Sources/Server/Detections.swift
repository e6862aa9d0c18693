import Detection
import Foundation
import Imaging
import Media

/// Runs the detector for the HTTP endpoints, one picture at a time (an `ObjectDetector` is not
/// thread-safe; the actor is its one owner).
actor DetectionService {
    private let detector: ObjectDetector
    private(set) var requests = 0
    private(set) var totalMilliseconds = 0.0

    /// The lowest score any request may ask for; each request filters above it.
    static let floorThreshold: Float = 0.05

    init(modelPath: String, options: ObjectDetector.Options) throws {
        var options = options
        options.scoreThreshold = Self.floorThreshold
        options.categoryAllowlist = nil
        options.categoryDenylist = nil
        detector = try ObjectDetector(modelPath: modelPath, options: options)
    }

    /// Detects objects in an uploaded picture, keeping those at or above `threshold` whose label
    /// is in `classes` (all when nil).
    func detect(_ image: Image, threshold: Float, classes: Set<String>?) throws -> DetectionResult {
        let start = ContinuousClock.now
        var result = try detector.detect(image)
        result.detections = result.detections.filter { d in
            d.score >= threshold && (classes.map { $0.contains(d.label.lowercased()) } ?? true)
        }
        let elapsed = (ContinuousClock.now - start).components
        requests += 1
        totalMilliseconds += Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15
        return result
    }
}
