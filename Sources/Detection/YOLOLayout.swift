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
        let fields = classCount + (version == .v5 ? 5 : 4)
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
