import Foundation
import Imaging

/// Result formats: Spotter's JSON line, the seed apps' flat float array, COCO results, YOLO txt.
public enum ResultEncoding {
    /// One JSON object: image, width, height, timings_ms and detections with label, class_id,
    /// score, box {xmin, ymin, xmax, ymax} in source pixels and, for models that give them,
    /// keypoints [[x, y], ...]; with face recognition, identity {name (null for a stranger), distance}.
    public static func json(_ result: DetectionResult, image: String) -> String {
        let object: [String: Any] = [
            "image": image, "width": result.imageSize.width, "height": result.imageSize.height,
            "timings_ms": ["preprocess": round3(result.timings.preprocess), "inference": round3(result.timings.inference),
                           "postprocess": round3(result.timings.postprocess)],
            "detections": result.detections.map(detectionObject),
        ]
        return serialize(object)
    }

    /// A detection as a JSON-ready dictionary (shared with the video and recorder outputs and the
    /// server): boxes to 1/1000 pixel, scores to 4 decimals (COCO results keep exact scores).
    public static func detectionObject(_ d: Detection) -> [String: Any] {
        var object: [String: Any] = ["label": d.label, "class_id": d.classIndex, "score": round4(Double(d.score)),
         "box": ["xmin": round3(d.box.minX), "ymin": round3(d.box.minY), "xmax": round3(d.box.maxX), "ymax": round3(d.box.maxY)]]
        if let keypoints = d.keypoints { object["keypoints"] = keypoints.map { [round3($0.x), round3($0.y)] } }
        if let identity = d.identity {
            let name: Any = identity.name ?? NSNull(), distance: Any = identity.distance.map { round3(Double($0)) } ?? NSNull()
            object["identity"] = ["name": name, "distance": distance]
        }
        return object
    }

    /// The seed app's layout: 6 numbers per detection, `[classId, score, xmin, xmax, ymin, ymax]`, pixels.
    public static func floats(_ result: DetectionResult) -> [Float] {
        result.detections.flatMap { d in
            [Float(d.classIndex), d.score, Float(d.box.minX), Float(d.box.maxX), Float(d.box.minY), Float(d.box.maxY)]
        }
    }

    /// COCO detection results: `image_id`, `category_id` (COCO's 91-id scheme when the labels are
    /// COCO's, else the class index), `bbox` [x, y, width, height] in pixels, `score`.
    public static func coco(_ result: DetectionResult, imageID: Int, labels: Labels?) -> [[String: Any]] {
        result.detections.map { d in
            ["image_id": imageID, "category_id": labels?.isCOCO == true ? d.classIndex + 1 : d.classIndex,
             "bbox": [round3(d.box.minX), round3(d.box.minY), round3(d.box.width), round3(d.box.height)], "score": Double(d.score)]
        }
    }

    /// YOLO txt lines: `class x_center y_center width height confidence`, normalized.
    public static func yolo(_ result: DetectionResult) -> String {
        result.detections.map { d in
            let b = d.normalizedBox
            return String(format: "%d %.6f %.6f %.6f %.6f %.6f", d.classIndex, b.center.x, b.center.y, b.width, b.height, d.score)
        }.joined(separator: "\n")
    }

    public static func serialize(_ object: Any) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
    static func round4(_ value: Double) -> Double { (value * 10000).rounded() / 10000 }
}
