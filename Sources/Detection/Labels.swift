import Foundation
import TFLiteFormat

/// Class names for a detector's class indices.
public struct Labels: Sendable, Equatable {
    /// Label lines as read, including a leading `???` background row when present.
    public var lines: [String]
    /// 1 when line 0 is the `???` background row (model class `c` is line `c + 1`), else 0.
    public var offset: Int
    /// Where the labels came from (a path, or "model metadata").
    public var source: String

    public init(lines: [String], source: String) {
        self.lines = lines
        self.offset = lines.first == "???" ? 1 : 0
        self.source = source
    }

    /// The name of model class `classIndex`, or `class N` when the labels do not cover it.
    public func name(_ classIndex: Int) -> String {
        let line = classIndex + offset
        return lines.indices.contains(line) && lines[line] != "???" ? lines[line] : "class \(classIndex)"
    }

    /// The model class whose name is `name` (case-insensitive), if any.
    public func classIndex(named name: String) -> Int? {
        lines.firstIndex { $0.caseInsensitiveCompare(name) == .orderedSame && $0 != "???" }.map { $0 - offset }
    }

    /// COCO's 80 classes in the order Ultralytics and most detectors trained on COCO use: the labels
    /// of a YOLO model with 80 classes that carries none of its own.
    public static let coco80 = Labels(lines: """
        person bicycle car motorcycle airplane bus train truck boat traffic_light fire_hydrant stop_sign parking_meter bench \
        bird cat dog horse sheep cow elephant bear zebra giraffe backpack umbrella handbag tie suitcase frisbee skis \
        snowboard sports_ball kite baseball_bat baseball_glove skateboard surfboard tennis_racket bottle wine_glass cup \
        fork knife spoon bowl banana apple sandwich orange broccoli carrot hot_dog pizza donut cake chair couch \
        potted_plant bed dining_table toilet tv laptop mouse remote keyboard cell_phone microwave oven toaster sink \
        refrigerator book clock vase scissors teddy_bear hair_drier toothbrush
        """.split(separator: " ").map { $0.replacingOccurrences(of: "_", with: " ") }, source: "COCO's 80 classes (assumed)")

    /// Whether these are the 91-line COCO labels, whose line numbers are COCO category ids.
    public var isCOCO: Bool { lines.count == 91 && offset == 1 && lines[1] == "person" && lines[90] == "toothbrush" }

    /// Reads a labels file: one name per line; `labels.txt`/`labelmap.txt` style, or an AutoML
    /// `dict.txt`.
    public static func read(path: String) throws -> Labels {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw DetectorError.cannotReadLabels(path: path, reason: error.localizedDescription)
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let trimmed = Array(lines.reversed().drop(while: \.isEmpty).reversed())
        guard !trimmed.isEmpty else { throw DetectorError.cannotReadLabels(path: path, reason: "the file is empty") }
        return Labels(lines: trimmed, source: path)
    }

    /// Finds labels for a model, in order: an explicit file; the model's metadata; `labelmap.txt`,
    /// `labels.txt` or `dict.txt` (AutoML Vision Edge's labels, next to its `tflite_metadata.json`)
    /// beside the model. Nil when none is found.
    public static func find(for model: Model, modelPath: String, explicit: String?) throws -> Labels? {
        if let explicit { return try read(path: explicit) }
        if let embedded = model.embeddedLabels, !embedded.isEmpty { return Labels(lines: embedded, source: "model metadata") }
        let directory = URL(fileURLWithPath: modelPath).deletingLastPathComponent()
        for name in ["labelmap.txt", "labels.txt", "dict.txt", "coco_labels.txt"] {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.fileExists(atPath: candidate) { return try read(path: candidate) }
        }
        return nil
    }
}
