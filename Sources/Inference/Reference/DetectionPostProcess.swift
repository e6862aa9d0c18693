import Foundation
import TFLiteFormat

/// The custom operator `TFLite_Detection_PostProcess`: decodes SSD box encodings against anchors
/// and runs non-maximum suppression, as TensorFlow Lite's `detection_postprocess.cc` does.
///
/// Inputs: box encodings [1, anchors, 4] ([ty, tx, th, tw]), class scores [1, anchors, classes (+1 background)],
/// anchors [anchors, 4] ([y, x, h, w]); uint8 or float32. Outputs (float32): boxes [1, n, 4]
/// ([ymin, xmin, ymax, xmax]), classes [1, n], scores [1, n], count [1], with n = max_detections *
/// max_classes_per_detection. Slots past the count are zeroed.
final class DetectionPostProcess: Kernel {
    static let name = "TFLite_Detection_PostProcess"

    struct Options {
        var maxDetections: Int
        var maxClassesPerDetection: Int
        var detectionsPerClass = 100
        var useRegularNMS = false
        var scoreThreshold: Float
        var iouThreshold: Float
        var numClasses: Int
        var scales: (y: Float, x: Float, h: Float, w: Float)

        /// Reads the FlexBuffer map of custom options; names the first missing or invalid key.
        init(flexBuffer bytes: [UInt8]) throws(OptionsError) {
            let root: FlexValue
            do { root = try FlexBuffers.decode(bytes) } catch { throw .malformed("\(error)") }
            guard case .map(let map) = root else { throw .malformed("custom options are not a map") }
            func number(_ key: String) throws(OptionsError) -> Double {
                guard let value = map[key]?.doubleValue else { throw .missingKey(key) }
                return value
            }
            func integer(_ key: String, minimum: Int = 1) throws(OptionsError) -> Int {
                guard let value = map[key]?.intValue else { throw .missingKey(key) }
                guard value >= minimum, value <= 100_000 else { throw .invalid(key, Double(value)) }
                return value
            }
            maxDetections = try integer("max_detections")
            maxClassesPerDetection = try integer("max_classes_per_detection")
            numClasses = try integer("num_classes")
            if map["detections_per_class"] != nil { detectionsPerClass = try integer("detections_per_class") }
            useRegularNMS = map["use_regular_nms"]?.boolValue ?? false
            scoreThreshold = Float(try number("nms_score_threshold"))
            iouThreshold = Float(try number("nms_iou_threshold"))
            guard (0...1).contains(iouThreshold) else { throw .invalid("nms_iou_threshold", Double(iouThreshold)) }
            scales = (Float(try number("y_scale")), Float(try number("x_scale")), Float(try number("h_scale")), Float(try number("w_scale")))
            guard scales.y > 0, scales.x > 0, scales.h > 0, scales.w > 0 else { throw .invalid("scales", 0) }
        }
    }

    enum OptionsError: Error {
        case malformed(String)
        case missingKey(String)
        case invalid(String, Double)

        var reason: String {
            switch self {
            case .malformed(let why): return "custom options: \(why)"
            case .missingKey(let key): return "custom option \"\(key)\" is missing or not a number"
            case .invalid(let key, let value): return "custom option \"\(key)\" has invalid value \(value)"
            }
        }
    }

    let options: Options
    let boxInput, scoreInput, anchorInput: Int
    let outputs: [Int]
    let anchorCount: Int
    let classesWithBackground: Int
    let labelOffset: Int
    let outputSlots: Int
    // Scratch, allocated once at load and owned by this kernel.
    private let decoded: UnsafeMutableBufferPointer<Float>
    private let scores: UnsafeMutableBufferPointer<Float>
    private let anchors: UnsafeMutableBufferPointer<Float>
    private let boxQuantization: (scale: Float, zeroPoint: Float)?
    private let scoreQuantization: (scale: Double, zeroPoint: Int32)?
    private let boxType, scoreType: TensorType

    init(_ ctx: PrepareContext) throws {
        guard ctx.op.inputs.count == 3, ctx.op.outputs.count == 4 else {
            throw ctx.fail("needs 3 inputs and 4 outputs, has \(ctx.op.inputs.count) and \(ctx.op.outputs.count)")
        }
        do {
            options = try Options(flexBuffer: ctx.op.customOptions ?? [])
        } catch {
            throw ctx.fail(error.reason)
        }
        (boxInput, scoreInput, anchorInput) = (ctx.input(0), ctx.input(1), ctx.input(2))
        outputs = ctx.op.outputs
        boxType = ctx.type(boxInput)
        scoreType = ctx.type(scoreInput)
        for tensor in ctx.op.inputs where ![TensorType.uint8, .float32].contains(ctx.type(tensor)) { throw ctx.unsupported() }
        for tensor in outputs where ctx.type(tensor) != .float32 { throw ctx.unsupported() }
        let boxShape = ctx.shape(boxInput), scoreShape = ctx.shape(scoreInput), anchorShape = ctx.shape(anchorInput)
        guard boxShape.count == 3, boxShape[0] == 1, boxShape[2] >= 4, scoreShape.count == 3, scoreShape[1] == boxShape[1],
              anchorShape.count == 2, anchorShape[0] == boxShape[1], anchorShape[1] == 4 else {
            throw ctx.fail("shapes \(boxShape), \(scoreShape), \(anchorShape) are not [1, N, 4], [1, N, C], [N, 4]")
        }
        anchorCount = boxShape[1]
        classesWithBackground = scoreShape[2]
        labelOffset = classesWithBackground - options.numClasses
        guard labelOffset >= 0 else {
            throw ctx.fail("num_classes \(options.numClasses) exceeds the \(classesWithBackground) score columns")
        }
        outputSlots = options.maxDetections * options.maxClassesPerDetection
        try ctx.setShape(outputs[0], [1, outputSlots, 4])
        try ctx.setShape(outputs[1], [1, outputSlots])
        try ctx.setShape(outputs[2], [1, outputSlots])
        try ctx.setShape(outputs[3], [1])
        boxStride = boxShape[2]
        if boxType == .uint8 {
            let q = try ctx.quantized(boxInput)
            boxQuantization = (q.scale, Float(q.zeroPoint))
        } else {
            boxQuantization = nil
        }
        if scoreType == .uint8 {
            let q = try ctx.quantized(scoreInput)
            scoreQuantization = (Double(q.scale), q.zeroPoint)
        } else {
            scoreQuantization = nil
        }
        decoded = .allocate(capacity: anchorCount * 4)
        scores = .allocate(capacity: anchorCount * classesWithBackground)
        anchors = .allocate(capacity: anchorCount * 4)
        decoded.initialize(repeating: 0)
        scores.initialize(repeating: 0)
        anchors.initialize(repeating: 0)
        if ctx.isConstant(anchorInput) {
            let values: [Float]
            if ctx.type(anchorInput) == .uint8 {
                let q = try ctx.quantized(anchorInput)
                values = try ctx.constant(anchorInput, as: UInt8.self).map { (Float($0) - Float(q.zeroPoint)) * q.scale }
            } else {
                values = try ctx.constant(anchorInput, as: Float.self)
            }
            _ = anchors.update(fromContentsOf: values)
            anchorsAreConstant = true
        } else {
            if ctx.type(anchorInput) == .uint8 {
                let q = try ctx.quantized(anchorInput)
                anchorQuantization = (q.scale, Float(q.zeroPoint))
            }
            anchorsAreConstant = false
        }
    }

    /// Dequantized value of every uint8 score (TFLite's `Dequantize`: float(double(scale) * (q - zp))).
    private lazy var scoreTable: [Float] = (0..<256).map { q in
        scoreQuantization.map { Float($0.scale * Double(Int32(q) - $0.zeroPoint)) } ?? 0
    }
    deinit {
        decoded.deallocate()
        scores.deallocate()
        anchors.deallocate()
    }

    private var anchorsAreConstant: Bool
    private var anchorQuantization: (scale: Float, zeroPoint: Float)?

    func run(_ memory: TensorMemory) {
        loadInputs(memory)
        decodeBoxes(memory)
        let boxes = memory.typed(outputs[0], Float.self), classes = memory.typed(outputs[1], Float.self)
        let scoresOut = memory.typed(outputs[2], Float.self), count = memory.typed(outputs[3], Float.self)
        boxes.update(repeating: 0, count: outputSlots * 4)
        classes.update(repeating: 0, count: outputSlots)
        scoresOut.update(repeating: 0, count: outputSlots)
        let detections = options.useRegularNMS ? regularNMS() : fastNMS()
        for (slot, detection) in detections.enumerated() {
            for k in 0..<4 { boxes[slot * 4 + k] = decoded[detection.anchor * 4 + k] }
            classes[slot] = Float(detection.classIndex)
            scoresOut[slot] = detection.score
        }
        count[0] = Float(options.useRegularNMS ? detections.count : detections.count / options.maxClassesPerDetection)
    }

    private func loadInputs(_ memory: TensorMemory) {
        let raw = memory.raw(scoreInput)
        if scoreQuantization != nil {
            let values = raw.assumingMemoryBound(to: UInt8.self)
            scoreTable.withUnsafeBufferPointer { table in
                for i in 0..<scores.count { scores[i] = table[Int(values[i])] }
            }
        } else {
            let values = raw.assumingMemoryBound(to: Float.self)
            for i in 0..<scores.count { scores[i] = values[i] }
        }
        if !anchorsAreConstant {
            let src = memory.raw(anchorInput)
            for i in 0..<anchors.count {
                if let (scale, zero) = anchorQuantization {
                    anchors[i] = (Float(src.load(fromByteOffset: i, as: UInt8.self)) - zero) * scale
                } else {
                    anchors[i] = src.load(fromByteOffset: 4 * i, as: Float.self)
                }
            }
        }
    }

    /// Center-size decoding, computed in double as TFLite does.
    private func decodeBoxes(_ memory: TensorMemory) {
        let raw = memory.raw(boxInput)
        let stride = boxStride
        let s = options.scales
        for i in 0..<anchorCount {
            func encoding(_ k: Int) -> Float {
                if let (scale, zero) = boxQuantization {
                    return (Float(raw.load(fromByteOffset: i * stride + k, as: UInt8.self)) - zero) * scale
                }
                return raw.load(fromByteOffset: 4 * (i * stride + k), as: Float.self)
            }
            let ty = Double(encoding(0)), tx = Double(encoding(1)), th = Double(encoding(2)), tw = Double(encoding(3))
            let ay = Double(anchors[i * 4]), ax = Double(anchors[i * 4 + 1])
            let ah = Double(anchors[i * 4 + 2]), aw = Double(anchors[i * 4 + 3])
            let yCenter = Float(ty / Double(s.y) * ah + ay)
            let xCenter = Float(tx / Double(s.x) * aw + ax)
            let halfH = Float(0.5 * exp(th / Double(s.h)) * ah)
            let halfW = Float(0.5 * exp(tw / Double(s.w)) * aw)
            decoded[i * 4] = yCenter - halfH
            decoded[i * 4 + 1] = xCenter - halfW
            decoded[i * 4 + 2] = yCenter + halfH
            decoded[i * 4 + 3] = xCenter + halfW
        }
    }

    /// Values per anchor in the box encodings (4, or more with keypoints).
    private let boxStride: Int

    private struct Detection {
        var anchor: Int
        var classIndex: Int
        var score: Float
    }

    private func iou(_ i: Int, _ j: Int) -> Float {
        let a = i * 4, b = j * 4
        let areaI = (decoded[a + 2] - decoded[a]) * (decoded[a + 3] - decoded[a + 1])
        let areaJ = (decoded[b + 2] - decoded[b]) * (decoded[b + 3] - decoded[b + 1])
        if areaI <= 0 || areaJ <= 0 { return 0 }
        let ymin = max(decoded[a], decoded[b]), xmin = max(decoded[a + 1], decoded[b + 1])
        let ymax = min(decoded[a + 2], decoded[b + 2]), xmax = min(decoded[a + 3], decoded[b + 3])
        let intersection = max(ymax - ymin, 0) * max(xmax - xmin, 0)
        return intersection / (areaI + areaJ - intersection)
    }

    /// Greedy single-class NMS over `candidateScores` (one per anchor): anchors at or above the
    /// score threshold, best first (ties keep anchor order), each suppressing later ones whose IoU
    /// exceeds the threshold.
    private func suppress(_ candidateScores: [Float], limit: Int) -> [Int] {
        // Sort keys: descending score in the high half, ascending anchor in the low half.
        var keys: [UInt64] = []
        keys.reserveCapacity(candidateScores.count)
        for (index, score) in candidateScores.enumerated() where score >= options.scoreThreshold {
            let bits = score.bitPattern
            let ordered = bits & 0x8000_0000 != 0 ? ~bits : bits | 0x8000_0000
            keys.append(UInt64(~ordered) << 32 | UInt64(index))
        }
        keys.sort()
        let kept = keys.map { Int($0 & 0xffff_ffff) }
        var active = [Bool](repeating: true, count: kept.count)
        var selected: [Int] = []
        for i in kept.indices where active[i] {
            if selected.count >= limit { break }
            selected.append(kept[i])
            active[i] = false
            for j in (i + 1)..<kept.count where active[j] && iou(kept[i], kept[j]) > options.iouThreshold {
                active[j] = false
            }
        }
        return selected
    }

    /// Indices of the `count` highest values, ties by lower index.
    private func topIndices<C: RandomAccessCollection<Float>>(_ values: C, _ count: Int) -> [Int] where C.Index == Int {
        let base = values.startIndex
        return Array(values.indices.sorted { values[$0] != values[$1] ? values[$0] > values[$1] : $0 < $1 }.prefix(count)).map { $0 - base }
    }

    private func fastNMS() -> [Detection] {
        let perAnchor = min(options.maxClassesPerDetection, options.numClasses)
        var maxScores = [Float](repeating: 0, count: anchorCount)
        for anchor in 0..<anchorCount {
            let row = anchor * classesWithBackground + labelOffset
            var best = scores[row]
            for c in 1..<options.numClasses where scores[row + c] > best { best = scores[row + c] }
            maxScores[anchor] = best
        }
        var result: [Detection] = []
        for anchor in suppress(maxScores, limit: options.maxDetections) {
            let row = anchor * classesWithBackground + labelOffset
            let classes = topIndices(scores[row..<(row + options.numClasses)], perAnchor)
            for slot in 0..<options.maxClassesPerDetection {
                if slot < classes.count {
                    result.append(Detection(anchor: anchor, classIndex: classes[slot], score: scores[row + classes[slot]]))
                } else {
                    result.append(Detection(anchor: anchor, classIndex: 0, score: 0))
                }
            }
        }
        return result
    }

    private func regularNMS() -> [Detection] {
        let perClass = min(options.detectionsPerClass, options.maxDetections)
        var best: [Detection] = []
        var classScores = [Float](repeating: 0, count: anchorCount)
        for c in 0..<options.numClasses {
            for anchor in 0..<anchorCount { classScores[anchor] = scores[anchor * classesWithBackground + c + labelOffset] }
            let merged = best + suppress(classScores, limit: perClass).map { Detection(anchor: $0, classIndex: c, score: classScores[$0]) }
            let order = topIndices(merged.map(\.score), min(merged.count, options.maxDetections))
            best = order.map { merged[$0] }
        }
        return best
    }
}
