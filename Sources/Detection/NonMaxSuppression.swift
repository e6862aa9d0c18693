import Foundation

/// A detection as a model's output gives it, before mapping to the picture.
@_spi(Decoding) public struct RawDetection {
    public var classIndex: Int
    public var score: Float
    /// ymin, xmin, ymax, xmax, normalized to the model input.
    public var box: (Float, Float, Float, Float)
    /// x, y of each keypoint, normalized to the model input (BlazeFace); empty for other models.
    public var keypoints: [(Float, Float)] = []

    public init(classIndex: Int, score: Float, box: (Float, Float, Float, Float), keypoints: [(Float, Float)] = []) {
        self.classIndex = classIndex
        self.score = score
        self.box = box
        self.keypoints = keypoints
    }
}

/// Greedy non-maximum suppression, as Ultralytics and OpenCV's `NMSBoxes` do it: by descending
/// score, a box is dropped when its intersection over union with a kept box of the same class
/// (or any class, when not `classAware`) is above `iouThreshold`.
@_spi(Decoding) public enum NonMaxSuppression {
    public static func apply(_ detections: [RawDetection], iouThreshold: Float, classAware: Bool = true, limit: Int = 300) -> [RawDetection] {
        // Best first; equal scores keep the model's order.
        let order = detections.indices.sorted { detections[$0].score != detections[$1].score ? detections[$0].score > detections[$1].score : $0 < $1 }
        var kept: [RawDetection] = []
        kept.reserveCapacity(min(limit, detections.count))
        // Kept boxes by class (one group when not class-aware): a candidate meets only its own.
        var groups: [Int: [(Float, Float, Float, Float)]] = [:]
        for index in order {
            if kept.count >= limit { break }
            let candidate = detections[index]
            let group = classAware ? candidate.classIndex : 0
            if let boxes = groups[group], boxes.contains(where: { iou($0, candidate.box) > iouThreshold }) { continue }
            kept.append(candidate)
            groups[group, default: []].append(candidate.box)
        }
        return kept
    }

    /// MediaPipe's weighted NMS (its face detectors' choice): by descending score, the best
    /// remaining candidate and every other above `iouThreshold` with it become one detection whose box
    /// and keypoints are their score-weighted mean, with the best one's score and class.
    public static func weighted(_ detections: [RawDetection], iouThreshold: Float, limit: Int = 300) -> [RawDetection] {
        var remaining = detections.sorted { $0.score > $1.score }
        var merged: [RawDetection] = []
        while let best = remaining.first, merged.count < limit {
            var total: Float = 0
            var box: (Float, Float, Float, Float) = (0, 0, 0, 0)
            var keypoints = best.keypoints.map { _ in (Float(0), Float(0)) }
            var rest: [RawDetection] = []
            rest.reserveCapacity(remaining.count)
            for candidate in remaining {
                // The best one is always in its own group (IoU 1, or a degenerate box).
                guard iou(best.box, candidate.box) > iouThreshold || total == 0 else { rest.append(candidate); continue }
                let w = candidate.score
                total += w
                box = (box.0 + candidate.box.0 * w, box.1 + candidate.box.1 * w, box.2 + candidate.box.2 * w, box.3 + candidate.box.3 * w)
                for k in keypoints.indices where k < candidate.keypoints.count {
                    keypoints[k] = (keypoints[k].0 + candidate.keypoints[k].0 * w, keypoints[k].1 + candidate.keypoints[k].1 * w)
                }
            }
            var result = best
            result.box = (box.0 / total, box.1 / total, box.2 / total, box.3 / total)
            result.keypoints = keypoints.map { ($0.0 / total, $0.1 / total) }
            merged.append(result)
            remaining = rest
        }
        return merged
    }

    public static func iou(_ a: (Float, Float, Float, Float), _ b: (Float, Float, Float, Float)) -> Float {
        let height = max(0, min(a.2, b.2) - max(a.0, b.0)), width = max(0, min(a.3, b.3) - max(a.1, b.1))
        let intersection = height * width
        let union = (a.2 - a.0) * (a.3 - a.1) + (b.2 - b.0) * (b.3 - b.1) - intersection
        return union > 0 ? intersection / union : 0
    }
}
