import Detection
import Foundation
import Imaging
import Media
import Pipeline

/// Detection for the HTTP endpoints, on the pool the sources share: requests and sources take
/// turns on one single-threaded detector per core, so neither oversubscribes the cores.
struct DetectionService: Sendable {
    let pool: DetectorPool
    /// Runs on each request's kept detections while its detector is held (`serve --faces` names
    /// people), as it does on source frames. Default none.
    var refine: DetectionRefiner?

    /// The lowest score any request or source may ask for; each filters above it.
    static let floorThreshold: Float = 0.05

    /// The pool of `options.threadCount` detectors (one thread each) scoring down to the floor,
    /// with no class filter (each request and source applies its own).
    static func makePool(modelPath: String, options: ObjectDetector.Options) throws -> DetectorPool {
        var options = options
        options.scoreThreshold = floorThreshold
        options.categoryAllowlist = nil
        options.categoryDenylist = nil
        return try DetectorPool(modelPath: modelPath, count: max(1, options.threadCount), options: options)
    }

    /// Detects objects in an uploaded picture with the analysis sources use (``StandardAnalyzer``,
    /// without tracking: one picture), keeping those at or above `threshold` whose label is in
    /// `classes` (all when nil). Runs off Swift's cooperative threads: inference blocks.
    func detect(_ image: Image, threshold: Float, classes: Set<String>?) async throws -> DetectionResult {
        let pool = self.pool, refine = self.refine
        return try await offCooperativeThreads {
            let raw = Locked<DetectionResult?>(nil)
            let analyzer = try StandardAnalyzer(options: .init(threshold: threshold, classes: classes, tracking: false)) { image, keep in
                try pool.withDetector { detector in
                    var result = try detector.detect(image)
                    result.detections = result.detections.filter(keep)
                    if let refine { result.detections = try refine(result.detections, image) }
                    raw.value = result
                    return result.detections
                }
            }
            let analysis = try analyzer.analyze(VideoFrame(image: image, time: 0, index: 0))
            // Without tracking or motion gating, an analysis always runs the detector once.
            guard var result = raw.value else { preconditionFailure("the analysis ran no detection") }
            result.detections = analysis.detections
            return result
        }
    }
}
