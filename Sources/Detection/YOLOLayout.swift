import Foundation
import Inference
import TFLiteFormat

/// The single output of an Ultralytics YOLO export: `[1, N, 5 + C]` for YOLOv5 (centre x, centre y,
/// width, height, objectness, C class scores per candidate) or `[1, 4 + C, N]` for YOLOv8 and 11
/// (the same without objectness, transposed). Boxes are relative to the model input (0...1, or
/// pixels when a model says so by values above 1.5). Quantized outputs are read through their
/// scale and zero point without copying.
@_spi(Decoding) public struct YOLOLayout {
    public enum Version: String, Sendable { case v5, v8 }
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

    /// Recognizes the layout from the one output's shape; nil when it is not YOLO's.
    init?(model: Model, interpreter: Interpreter) {
        let graph = model.subgraph
        guard graph.outputs.count == 1 else { return nil }
        let tensor = graph.tensors[graph.outputs[0]]
        let shape = interpreter.shape(ofTensor: tensor.index)
        guard shape.count == 3, shape[0] == 1, [.float32, .uint8, .int8].contains(tensor.type) else { return nil }
        if shape[1] > shape[2], shape[2] > 5 {
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

    var description: String {
        "YOLO\(version == .v5 ? "v5 [1, \(candidates), \(5 + classCount)]" : "v8/11 [1, \(4 + classCount), \(candidates)]"): \(classCount) classes, non-maximum suppression in Spotter"
    }

    /// Candidates scoring at least `threshold` (objectness times class score for v5), the best
    /// class of each, boxes as ymin, xmin, ymax, xmax normalized to the input.
    func read(_ interpreter: Interpreter, threshold: Float, inputSize: (width: Int, height: Int)) throws -> [RawDetection] {
        try interpreter.withOutput(at: 0) { decode($0, threshold: threshold, inputSize: inputSize) }
    }

    /// Candidates of the output tensor's bytes; empty when they are fewer than the layout needs.
    public func decode(_ bytes: UnsafeRawBufferPointer, threshold: Float, inputSize: (width: Int, height: Int)) -> [RawDetection] {
        let count = candidates * (classCount + (version == .v5 ? 5 : 4))
        let value: (Int) -> Float
        switch type {
        case .uint8:
            let values = bytes.bindMemory(to: UInt8.self)
            guard values.count >= count else { return [] }
            value = { Float(Int(values[$0]) - zeroPoint) * scale }
        case .int8:
            let values = bytes.bindMemory(to: Int8.self)
            guard values.count >= count else { return [] }
            value = { Float(Int(values[$0]) - zeroPoint) * scale }
        default:
            let values = bytes.bindMemory(to: Float.self)
            guard values.count >= count else { return [] }
            value = { values[$0] }
        }
        let fields = classCount + (version == .v5 ? 5 : 4)
        // v5: row-major [candidate][field]; v8: [field][candidate].
        let at: (Int, Int) -> Float = version == .v5 ? { value($0 * fields + $1) } : { value($1 * candidates + $0) }
        var found: [RawDetection] = []
        for candidate in 0..<candidates {
            let objectness: Float = version == .v5 ? at(candidate, 4) : 1
            if objectness < threshold { continue }
            let first = version == .v5 ? 5 : 4
            var best = 0, bestScore: Float = -.infinity
            for c in 0..<classCount {
                let score = at(candidate, first + c)
                if score > bestScore { (best, bestScore) = (c, score) }
            }
            let score = objectness * bestScore
            if score < threshold { continue }
            var (cx, cy, w, h) = (at(candidate, 0), at(candidate, 1), at(candidate, 2), at(candidate, 3))
            if max(cx, cy, w, h) > 1.5 {
                // Pixel coordinates of the input.
                cx /= Float(inputSize.width); w /= Float(inputSize.width)
                cy /= Float(inputSize.height); h /= Float(inputSize.height)
            }
            found.append(RawDetection(classIndex: best, score: score, box: (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2)))
        }
        return found
    }
}
