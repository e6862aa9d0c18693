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
    /// Constants were copied or packed at load.
    var readsConstantInputs: Bool { false }

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
        candidates = .allocate(capacity: anchorCount)
        candidates.initialize(repeating: 0)
        active = .allocate(capacity: anchorCount)
        active.initialize(repeating: false)
        picked = .allocate(capacity: anchorCount)
        picked.initialize(repeating: 0)
        let empty = Detection(anchor: 0, classIndex: 0, score: 0)
        results = .allocate(capacity: max(outputSlots, options.maxDetections))
        results.initialize(repeating: empty)
        merging = .allocate(capacity: options.maxDetections + min(options.detectionsPerClass, options.maxDetections))
        merging.initialize(repeating: empty)
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
    // NMS scratch: per-anchor candidate scores and flags, picked anchors, detections.
    private let candidates: UnsafeMutableBufferPointer<Float>
    private let active: UnsafeMutableBufferPointer<Bool>
    private let picked: UnsafeMutableBufferPointer<Int>
    private let results: UnsafeMutableBufferPointer<Detection>
    private let merging: UnsafeMutableBufferPointer<Detection>

    deinit {
        for buffer in [decoded, scores, anchors, candidates] { buffer.deallocate() }
        active.deallocate()
        picked.deallocate()
        results.deallocate()
        merging.deallocate()
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
        let found = options.useRegularNMS ? regularNMS() : fastNMS()
        for slot in 0..<found {
            let detection = results[slot]
            for k in 0..<4 { boxes[slot * 4 + k] = decoded[detection.anchor * 4 + k] }
            classes[slot] = Float(detection.classIndex)
            scoresOut[slot] = detection.score
        }
        count[0] = Float(options.useRegularNMS ? found : found / options.maxClassesPerDetection)
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

    /// Greedy single-class NMS over `candidates` (one score per anchor), writing up to `limit`
    /// anchors to `picked`: repeatedly take the best active anchor at or above the score threshold
    /// (ties: the lower anchor) and deactivate the active ones overlapping it by more than the IoU
    /// threshold. This selects what TFLite's sort-then-sweep does, without sorting or allocating.
    private func suppress(_ candidates: UnsafeMutableBufferPointer<Float>, limit: Int, into picked: UnsafeMutableBufferPointer<Int>) -> Int {
        var activeCount = 0
        for i in 0..<anchorCount {
            active[i] = candidates[i] >= options.scoreThreshold
            if active[i] { activeCount += 1 }
        }
        var count = 0
        while count < limit, activeCount > 0 {
            var best = -1
            for i in 0..<anchorCount where active[i] && (best < 0 || candidates[i] > candidates[best]) { best = i }
            picked[count] = best
            count += 1
            active[best] = false
            activeCount -= 1
            for j in 0..<anchorCount where active[j] && iou(best, j) > options.iouThreshold {
                active[j] = false
                activeCount -= 1
            }
        }
        return count
    }

    /// Fast NMS: one class (or the top few) per anchor, NMS on each anchor's best score.
    private func fastNMS() -> Int {
        let perAnchor = min(options.maxClassesPerDetection, options.numClasses)
        for anchor in 0..<anchorCount {
            let row = anchor * classesWithBackground + labelOffset
            var best = scores[row]
            for c in 1..<options.numClasses where scores[row + c] > best { best = scores[row + c] }
            candidates[anchor] = best
        }
        let selected = suppress(candidates, limit: options.maxDetections, into: picked)
        var written = 0
        for s in 0..<selected {
            let anchor = picked[s]
            let row = anchor * classesWithBackground + labelOffset
            // The anchor's classes by descending score (ties: lower class), by repeated selection.
            var previous: (score: Float, index: Int)? = nil
            for slot in 0..<options.maxClassesPerDetection {
                var detection = Detection(anchor: anchor, classIndex: 0, score: 0)
                if slot < perAnchor {
                    var chosen = -1
                    for c in 0..<options.numClasses {
                        let score = scores[row + c]
                        if let previous, score > previous.score || (score == previous.score && c <= previous.index) { continue }
                        if chosen < 0 || score > scores[row + chosen] { chosen = c }
                    }
                    if chosen >= 0 {
                        detection = Detection(anchor: anchor, classIndex: chosen, score: scores[row + chosen])
                        previous = (detection.score, chosen)
                    }
                }
                results[written] = detection
                written += 1
            }
        }
        return written
    }

    /// Regular NMS: NMS per class, keeping the best `max_detections` over all classes.
    private func regularNMS() -> Int {
        let perClass = min(options.detectionsPerClass, options.maxDetections)
        var kept = 0
        for c in 0..<options.numClasses {
            for anchor in 0..<anchorCount { candidates[anchor] = scores[anchor * classesWithBackground + c + labelOffset] }
            let selected = suppress(candidates, limit: perClass, into: picked)
            // Merge: earlier classes' survivors first, then this class's, keeping the best by score
            // (ties: earlier position), as TFLite's partial sort of the concatenation does.
            var merged = kept
            for s in 0..<selected {
                merging[merged] = Detection(anchor: picked[s], classIndex: c, score: candidates[picked[s]])
                merged += 1
            }
            for s in 0..<kept { merging[s] = results[s] }
            kept = min(merged, options.maxDetections)
            for slot in 0..<kept {
                var chosen = -1
                for m in 0..<merged where merging[m].score.isFinite && (chosen < 0 || merging[m].score > merging[chosen].score) { chosen = m }
                results[slot] = merging[chosen]
                merging[chosen].score = .nan
            }
        }
        return kept
    }
}
