import Foundation
import Inference
import TFLiteFormat

/// The single output of an Ultralytics YOLO export: `[1, N, 5 + C]` for YOLOv5 (centre x, centre y,
/// width, height, objectness, C class scores per candidate), `[1, 4 + C, N]` for YOLOv8 and 11
/// (the same without objectness, transposed), or `[1, N, 6]` for end-to-end heads that suppress
/// overlaps themselves (YOLOv10, YOLO26, exports with `nms=True`: corners x1, y1, x2, y2, score,
/// class; no suppression in Spotter). Boxes are relative to the model input (0...1, or pixels when
/// a model says so by values above 1.5). Quantized outputs are read through their scale and zero
/// point without copying.
@_spi(Decoding) public struct YOLOLayout {
    public enum Version: String, Sendable { case v5, v8, endToEnd }
    public let version: Version
    public let candidates: Int
    public let classCount: Int
    public let type: TensorType
    public let scale: Float
    public let zeroPoint: Int

    /// A layout for decoding tensors directly.
    public init(version: Version, candidates: Int, classCount: Int, type: TensorType = .float32, scale: Float = 1, zeroPoint: Int = 0) {
        (self.version, self.candidates, self.classCount, self.type, self.scale, self.zeroPoint) = (version, candidates, classCount, type, scale, zeroPoint)
    }

    /// Values per candidate.
    var fields: Int {
        switch version {
        case .v5: return classCount + 5
        case .v8: return classCount + 4
        case .endToEnd: return 6
        }
    }

    /// Recognizes the layout from the one output's shape; nil when it is not YOLO's.
    init?(model: Model, interpreter: Interpreter) {
        let graph = model.subgraph
        guard graph.outputs.count == 1 else { return nil }
        let tensor = graph.tensors[graph.outputs[0]]
        let shape = interpreter.shape(ofTensor: tensor.index)
        guard shape.count == 3, shape[0] == 1, [.float32, .uint8, .int8].contains(tensor.type) else { return nil }
        let names = model.embeddedLabels?.count ?? 0
        if shape[2] == 6, shape[1] > 6, Self.isEndToEnd(settings: model.ultralyticsSettings, classNames: names) {
            // [1, N, 6] is also a one-class YOLOv5: the export's settings (end2end, nms) or more
            // than one class name tell them apart.
            (version, candidates, classCount) = (.endToEnd, shape[1], names > 0 ? names : 80)
        } else if shape[1] > shape[2], shape[2] > 5 {
            (version, candidates, classCount) = (.v5, shape[1], shape[2] - 5)
        } else if shape[2] > shape[1], shape[1] > 4 {
            (version, candidates, classCount) = (.v8, shape[2], shape[1] - 4)
        } else {
            return nil
        }
        type = tensor.type
        scale = tensor.quantization?.scales.first ?? 1
        zeroPoint = tensor.quantization?.zeroPoint ?? 0
    }

    /// Whether a `[1, N, 6]` output is an end-to-end head: the export's settings say `end2end` or
    /// `nms` is on, or the model names more than one class (a YOLOv5 of this shape has one).
    public static func isEndToEnd(settings: String?, classNames: Int) -> Bool {
        if let settings, settings.contains("'end2end': True") || settings.contains("'nms': True") { return true }
        return classNames > 1
    }

    var description: String {
        switch version {
        case .v5: return "YOLOv5 [1, \(candidates), \(5 + classCount)]: \(classCount) classes, non-maximum suppression in Spotter"
        case .v8: return "YOLOv8/11 [1, \(4 + classCount), \(candidates)]: \(classCount) classes, non-maximum suppression in Spotter"
        case .endToEnd: return "end-to-end YOLO [1, \(candidates), 6]: boxes, score and class per candidate, already suppressed by the model"
        }
    }

    /// Whether Spotter suppresses overlapping boxes (end-to-end heads did it themselves).
    public var needsSuppression: Bool { version != .endToEnd }

    /// Candidates scoring at least `threshold` (objectness times class score for v5), the best
    /// class of each, boxes as ymin, xmin, ymax, xmax normalized to the input.
    func read(_ interpreter: Interpreter, threshold: Float, inputSize: (width: Int, height: Int)) throws -> [RawDetection] {
        try interpreter.withOutput(at: 0) { decode($0, threshold: threshold, inputSize: inputSize) }
    }

    /// Candidates of the output tensor's bytes; empty when they are fewer than the layout needs.
    public func decode(_ bytes: UnsafeRawBufferPointer, threshold: Float, inputSize: (width: Int, height: Int)) -> [RawDetection] {
        let count = candidates * fields
        let (scale, zeroPoint) = (self.scale, Float(self.zeroPoint))
        switch type {
        case .uint8:
            let values = bytes.bindMemory(to: UInt8.self)
            guard values.count >= count else { return [] }
            return decode(values, threshold: threshold, inputSize: inputSize) { (Float($0) - zeroPoint) * scale }
        case .int8:
            let values = bytes.bindMemory(to: Int8.self)
            guard values.count >= count else { return [] }
            return decode(values, threshold: threshold, inputSize: inputSize) { (Float($0) - zeroPoint) * scale }
        default:
            let values = bytes.bindMemory(to: Float.self)
            guard values.count >= count else { return [] }
            return decode(values, threshold: threshold, inputSize: inputSize) { $0 }
        }
    }

    /// The decoding on stored values: the best class is found on them (dequantizing keeps the
    /// order, the scale being positive), so only one value per candidate is dequantized.
    private func decode<Value: Comparable>(_ values: UnsafeBufferPointer<Value>, threshold: Float, inputSize: (width: Int, height: Int),
                                           dequantize: (Value) -> Float) -> [RawDetection] {
        guard classCount > 0, candidates > 0 else { return [] }
        var found: [RawDetection] = []
        func box(_ cx: Float, _ cy: Float, _ w: Float, _ h: Float) -> (Float, Float, Float, Float) {
            var (cx, cy, w, h) = (cx, cy, w, h)
            if max(cx, cy, w, h) > 1.5 {
                // Pixel coordinates of the input.
                cx /= Float(inputSize.width); w /= Float(inputSize.width)
                cy /= Float(inputSize.height); h /= Float(inputSize.height)
            }
            return (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2)
        }
        switch version {
        case .endToEnd:
            // Row-major [candidate][x1, y1, x2, y2, score, class]; a class outside the model's is dropped.
            for candidate in 0..<candidates {
                let row = candidate * 6
                let score = dequantize(values[row + 4])
                let classValue = dequantize(values[row + 5]).rounded()
                guard score >= threshold, classValue >= 0, classValue < Float(classCount) else { continue }
                var (x1, y1, x2, y2) = (dequantize(values[row]), dequantize(values[row + 1]), dequantize(values[row + 2]), dequantize(values[row + 3]))
                if max(x1, y1, x2, y2) > 1.5 {
                    (x1, x2) = (x1 / Float(inputSize.width), x2 / Float(inputSize.width))
                    (y1, y2) = (y1 / Float(inputSize.height), y2 / Float(inputSize.height))
                }
                found.append(RawDetection(classIndex: Int(classValue), score: score, box: (min(y1, y2), min(x1, x2), max(y1, y2), max(x1, x2))))
            }
        case .v5:
            // Row-major [candidate][field]: centre x, centre y, width, height, objectness, classes.
            for candidate in 0..<candidates {
                let row = candidate * fields
                let objectness = dequantize(values[row + 4])
                if objectness < threshold { continue }
                var best = 0, bestValue = values[row + 5]
                for c in 1..<classCount where values[row + 5 + c] > bestValue { (best, bestValue) = (c, values[row + 5 + c]) }
                let score = objectness * dequantize(bestValue)
                if score < threshold { continue }
                found.append(RawDetection(classIndex: best, score: score, box: box(dequantize(values[row]), dequantize(values[row + 1]),
                                                                                    dequantize(values[row + 2]), dequantize(values[row + 3]))))
            }
        case .v8:
            // [field][candidate]: one pass per class over contiguous rows.
            var bestValue = Array(values[(4 * candidates)..<(5 * candidates)])
            var bestClass = [Int32](repeating: 0, count: candidates)
            for c in 1..<classCount {
                let row = (4 + c) * candidates
                for n in 0..<candidates where values[row + n] > bestValue[n] {
                    bestValue[n] = values[row + n]
                    bestClass[n] = Int32(c)
                }
            }
            for n in 0..<candidates {
                let score = dequantize(bestValue[n])
                if score < threshold { continue }
                found.append(RawDetection(classIndex: Int(bestClass[n]), score: score,
                                          box: box(dequantize(values[n]), dequantize(values[candidates + n]),
                                                   dequantize(values[2 * candidates + n]), dequantize(values[3 * candidates + n]))))
            }
        }
        return found
    }
}
