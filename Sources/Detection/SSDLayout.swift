import Foundation
import Inference
import TFLiteFormat

/// Where an SSD model's four post-processed outputs are: boxes, classes, scores, count.
///
/// Identified by the output tensors' names (`TFLite_Detection_PostProcess`, `:1`, `:2`, `:3`), by
/// TFLite Metadata's output names (`location`, `category`, `score`, `number of detections`), or by
/// the `outputTensorRepresentation` of an AutoML Vision Edge `tflite_metadata.json` beside the
/// model; never by position alone.
struct SSDLayout {
    let boxes, classes, scores, count: Int

    init(model: Model, modelPath: String) throws {
        let graph = model.subgraph
        let names = graph.outputs.map { graph.tensors[$0].name }
        func position(_ candidates: [String], in list: [String]) -> Int? {
            list.firstIndex { name in candidates.contains { $0.caseInsensitiveCompare(name) == .orderedSame } }
        }
        let byName = [
            position(["TFLite_Detection_PostProcess", "detection_boxes"], in: names),
            position(["TFLite_Detection_PostProcess:1", "detection_classes"], in: names),
            position(["TFLite_Detection_PostProcess:2", "detection_scores"], in: names),
            position(["TFLite_Detection_PostProcess:3", "num_detections"], in: names),
        ]
        let metadataNames = model.metadata?.outputs.map { $0.name ?? "" } ?? []
        let byMetadata = metadataNames.count == names.count ? [
            position(["location"], in: metadataNames), position(["category"], in: metadataNames),
            position(["score"], in: metadataNames), position(["number of detections"], in: metadataNames),
        ] : [nil, nil, nil, nil]
        let automl = Self.autoMLOrder(besideModel: modelPath)
        let byAutoML = automl.count == names.count ? [
            position(["bounding_boxes"], in: automl), position(["class_labels"], in: automl),
            position(["class_confidences"], in: automl), position(["num_of_boxes"], in: automl),
        ] : [nil, nil, nil, nil]
        let found = [byName, byMetadata, byAutoML].first { $0.allSatisfy { $0 != nil } } ?? byName
        guard found.allSatisfy({ $0 != nil }), Set(found.compactMap { $0 }).count == 4 else {
            throw DetectorError.unrecognizedOutputs(found: names.enumerated().map { "\($1) \(graph.tensors[graph.outputs[$0]].shape)" })
        }
        (boxes, classes, scores, count) = (found[0]!, found[1]!, found[2]!, found[3]!)
    }

    /// The output order an AutoML Vision Edge export records in `tflite_metadata.json`, if present.
    static func autoMLOrder(besideModel path: String) -> [String] {
        let file = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("tflite_metadata.json")
        guard let data = try? Data(contentsOf: file),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let order = object["outputTensorRepresentation"] as? [String] else { return [] }
        return order
    }

    /// The valid detections of the last `invoke()`.
    func read(_ interpreter: Interpreter) throws -> [RawDetection] {
        let count = try interpreter.withOutput(at: self.count) { Int($0.load(as: Float.self)) }
        return try interpreter.withOutput(at: boxes) { boxes in
            try interpreter.withOutput(at: classes) { classes in
                try interpreter.withOutput(at: scores) { scores in
                    let n = min(max(count, 0), scores.count / 4, classes.count / 4, boxes.count / 16)
                    return (0..<n).map { i in
                        RawDetection(classIndex: Int(classes.load(fromByteOffset: 4 * i, as: Float.self)),
                            score: scores.load(fromByteOffset: 4 * i, as: Float.self),
                            box: (boxes.load(fromByteOffset: 16 * i, as: Float.self), boxes.load(fromByteOffset: 16 * i + 4, as: Float.self),
                                  boxes.load(fromByteOffset: 16 * i + 8, as: Float.self), boxes.load(fromByteOffset: 16 * i + 12, as: Float.self)))
                    }
                }
            }
        }
    }
}
