import Foundation
import Imaging

/// Result formats: Spotter's JSON line, the seed apps' flat float array, COCO results, YOLO txt.
public enum ResultEncoding {
    /// One JSON object: image, width, height, timings_ms and detections (``Detection``'s JSON).
    public static func json(_ result: DetectionResult, image: String) -> String {
        encode(PictureResult(image: image, width: result.imageSize.width, height: result.imageSize.height,
                             timings: .init(preprocess: round3(result.timings.preprocess), inference: round3(result.timings.inference),
                                            postprocess: round3(result.timings.postprocess)),
                             detections: result.detections))
    }

    /// What `detect --json` prints per picture.
    struct PictureResult: Encodable {
        let image: String
        let width, height: Int
        let timings: DetectionResult.Timings
        let detections: [Detection]

        enum CodingKeys: String, CodingKey {
            case image, width, height, detections
            case timings = "timings_ms"
        }
    }

    /// JSON text of `value`: keys sorted, slashes unescaped, one line.
    public static func encode(_ value: some Encodable) -> String {
        String(decoding: encodeData(value), as: UTF8.self)
    }

    /// JSON bytes of `value`, as ``encode(_:)``.
    public static func encodeData(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        // Encoding our own types cannot fail.
        return (try? encoder.encode(value)) ?? Data("{}".utf8)
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

    /// `value` to 3 decimals (pixels, seconds), as every JSON output writes them.
    public static func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
    /// `value` to 4 decimals (scores).
    public static func round4(_ value: Double) -> Double { (value * 10000).rounded() / 10000 }
}
