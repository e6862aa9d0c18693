import Foundation
import Imaging
import Inference
import TFLiteFormat

/// Why a detector could not be built or run.
public enum DetectorError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotReadModel(path: String, reason: String)
    case cannotReadLabels(path: String, reason: String)
    case unsupportedInput(shape: [Int], type: String)
    case unrecognizedOutputs(found: [String])
    case unknownCategory(name: String, known: [String])
    case floatInputNeedsNormalization

    public var description: String {
        switch self {
        case .cannotReadModel(let path, let reason): return "cannot load model \(path): \(reason)"
        case .cannotReadLabels(let path, let reason): return "cannot read labels \(path): \(reason)"
        case .unsupportedInput(let shape, let type):
            return "the model's input \(shape) \(type) is not an image tensor [1, height, width, 3] of uint8, int8 or float32"
        case .unrecognizedOutputs(let found):
            return "the model's outputs are not a detection layout Spotter decodes (SSD's boxes, classes, scores and count from TFLite_Detection_PostProcess or named so in metadata, one YOLO output, or BlazeFace's boxes and scores); found: \(found.joined(separator: ", "))"
        case .unknownCategory(let name, let known):
            return "no class named \"\(name)\" in the labels (for example: \(known.prefix(8).joined(separator: ", ")))"
        case .floatInputNeedsNormalization:
            return "the model takes float input but carries no normalization metadata: set Options.normalization (CLI: --mean and --std)"
        }
    }
}

/// One detected object.
///
/// Its JSON (the one shape every output uses: `detect --json`, `video --jsonl`, the server's
/// events, live stream and detect endpoint): `label`, `class_id`, `score` (4 decimals), `box`
/// {`xmin`, `ymin`, `xmax`, `ymax`} in pixels (3 decimals), and when present `keypoints`
/// [[x, y], ...], `identity` {`name` (null: a stranger), `distance`}, `track` (the tracker's id)
/// and `stationary`.
public struct Detection: Sendable, Equatable, Encodable {
    /// The model's 0-based class index.
    public var classIndex: Int
    public var label: String
    public var score: Float
    /// In pixels of the upright picture, clamped to it.
    public var box: Rect
    /// The box divided by the picture's width and height.
    public var normalizedBox: Rect
    /// Landmarks in pixels of the upright picture, for models that give them (BlazeFace: right eye,
    /// left eye, nose tip, mouth centre, right ear tragion, left ear tragion); nil otherwise.
    public var keypoints: [Point]?
    /// Who this is, when face recognition looked for a face inside the box and found one
    /// (`spotter video --faces`); nil when it did not run or saw no recognizable face.
    public var identity: Identity?
    /// The id of the tracked object this is (stable over the frames of one source); nil without
    /// tracking or while its track is not yet confirmed.
    public var track: Int?
    /// Whether its track has stayed in place for the stationary time (a parked car).
    public var isStationary = false
    /// A recognizable face that matches no one enrolled (what `--trigger unknown-face` records).
    public var isStranger: Bool { identity != nil && identity?.name == nil }

    enum CodingKeys: String, CodingKey {
        case label, score, box, keypoints, identity, track
        case classIndex = "class_id"
        case isStationary = "stationary"
    }

    private struct Box: Encodable {
        let xmin, ymin, xmax, ymax: Double
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(label, forKey: .label)
        try container.encode(classIndex, forKey: .classIndex)
        try container.encode(ResultEncoding.round4(Double(score)), forKey: .score)
        try container.encode(Box(xmin: ResultEncoding.round3(box.minX), ymin: ResultEncoding.round3(box.minY),
                                 xmax: ResultEncoding.round3(box.maxX), ymax: ResultEncoding.round3(box.maxY)), forKey: .box)
        try container.encodeIfPresent(keypoints?.map { [ResultEncoding.round3($0.x), ResultEncoding.round3($0.y)] }, forKey: .keypoints)
        try container.encodeIfPresent(identity, forKey: .identity)
        if let track {
            try container.encode(track, forKey: .track)
            try container.encode(isStationary, forKey: .isStationary)
        }
    }

    /// The person face recognition found inside a detection's box.
    public struct Identity: Sendable, Equatable, Encodable {
        /// The enrolled person; nil for a face no one enrolled matches (a stranger).
        public var name: String?
        /// Distance to the nearest enrolled face; nil when the gallery is empty.
        public var distance: Float?

        enum CodingKeys: String, CodingKey { case name, distance }

        /// `{"name": NAME or null, "distance": D or null}`, the distance to 3 decimals.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(distance.map { ResultEncoding.round3(Double($0)) }, forKey: .distance)
        }

        public init(name: String?, distance: Float?) {
            self.name = name
            self.distance = distance
        }
    }

    public init(classIndex: Int, label: String, score: Float, box: Rect, normalizedBox: Rect, keypoints: [Point]? = nil) {
        self.classIndex = classIndex
        self.label = label
        self.score = score
        self.box = box
        self.normalizedBox = normalizedBox
        self.keypoints = keypoints
    }
}

/// What `detect` found in one picture.
public struct DetectionResult: Sendable {
    /// Size of the upright picture the boxes refer to.
    public var imageSize: Size
    /// Sorted by descending score.
    public var detections: [Detection]
    public var timings: Timings
    /// Maps upright-picture pixels back to the stored frame's pixels (identity for `.up`).
    public var uprightToStored: AffineMap

    public struct Timings: Sendable, Codable {
        public var preprocess: Double
        public var inference: Double
        public var postprocess: Double
    }
}

/// Finds objects in pictures with a TensorFlow Lite detection model, as MediaPipe's and the TFLite
/// Task Library's object detectors do: SSD with TFLite's post-process operator, Ultralytics YOLO
/// (v5, v8, 11) and MediaPipe's BlazeFace (faces with six keypoints), recognized from the outputs.
///
/// ```swift
/// let detector = try ObjectDetector(modelPath: "detect.tflite", options: .init(scoreThreshold: 0.5))
/// let result = try detector.detect(try ImageFile.decode("street.jpg").upright)
/// for d in result.detections { print(d.label, d.score, d.box) }
/// ```
///
/// Not thread-safe: one detector per thread (or behind an actor).
public final class ObjectDetector {
    public struct Options: Sendable {
        /// Detections below this score are dropped. Default 0.5.
        public var scoreThreshold: Float = 0.5
        /// At most this many detections, best first. Default: all the model reports.
        public var maxResults: Int?
        /// Keep only these label names (case-insensitive). Default: all.
        public var categoryAllowlist: [String]?
        /// Drop these label names. Default: none.
        public var categoryDenylist: [String]?
        /// Default: all cores.
        public var threadCount: Int = Processors.available
        /// Default: `.xnnpack`.
        public var backend: Interpreter.Options.Backend = .xnnpack
        /// Float models' convolutions: `.bfloat16` rounds their inputs and weights for speed on
        /// CPUs with AVX-512 BF16 (see `Interpreter.Options.FloatPrecision`). Default `.float32`.
        public var floatPrecision: Interpreter.Options.FloatPrecision = .float32
        /// How pictures are fitted to the input. Default nil: the model family's own (`.stretch` for
        /// SSD, as the shared model was trained; `.letterbox` with gray 114 bars for YOLO, as
        /// Ultralytics prepares pictures; `.letterbox` with black bars for BlazeFace, as MediaPipe does).
        public var resizeMode: ResizeMode?
        /// YOLO: intersection over union above which a box of the same class is suppressed. Default
        /// 0.45. (BlazeFace merges faces overlapping by more than 0.3, as MediaPipe does.)
        public var iouThreshold: Float = 0.45
        /// YOLO: at most this many boxes leave non-maximum suppression (before `maxResults`). Default 300.
        public var nmsLimit: Int = 300
        /// YOLO: suppress overlapping boxes whatever their classes (Ultralytics' `agnostic_nms`).
        /// Default false: only boxes of the same class suppress each other.
        public var classAgnosticNMS = false
        /// For float inputs: `(value - mean) / std` per channel, overriding the model's metadata
        /// (BlazeFace without metadata: 127.5 and 127.5, MediaPipe's range -1...1).
        public var normalization: Normalization?
        /// An explicit labels file; default: metadata, then a labels file beside the model.
        public var labelsPath: String?
        /// Let inference threads sleep between pictures (see `Interpreter.Options`); for pipelines
        /// that decode and encode on other threads. Default false.
        public var parksThreadsBetweenPictures = false

        public init(scoreThreshold: Float = 0.5, maxResults: Int? = nil, categoryAllowlist: [String]? = nil,
                    categoryDenylist: [String]? = nil, threadCount: Int = Processors.available,
                    backend: Interpreter.Options.Backend = .xnnpack, resizeMode: ResizeMode? = nil,
                    normalization: Normalization? = nil, labelsPath: String? = nil) {
            self.scoreThreshold = scoreThreshold
            self.maxResults = maxResults
            self.categoryAllowlist = categoryAllowlist
            self.categoryDenylist = categoryDenylist
            self.threadCount = threadCount
            self.backend = backend
            self.resizeMode = resizeMode
            self.normalization = normalization
            self.labelsPath = labelsPath
        }

        /// The settings accuracy is measured with (Ultralytics' `val`, pycocotools): every
        /// detection down to score 0.001; YOLO keeps at most 300 boxes per picture after class-wise
        /// suppression at IoU 0.7. Models with a fixed number of outputs (SSD) keep what they give.
        public static func validation(threadCount: Int = Processors.available, backend: Interpreter.Options.Backend = .xnnpack) -> Options {
            var options = Options(scoreThreshold: 0.001, threadCount: threadCount, backend: backend)
            options.iouThreshold = 0.7
            options.nmsLimit = 300
            options.classAgnosticNMS = false
            return options
        }
    }

    public let options: Options
    public let labels: Labels?
    public let inputSize: Size
    private let interpreter: Interpreter
    private let inputType: TensorType
    private let inputQuantization: Quantization?
    /// For int8 inputs whose quantization is not pixel - 128: the byte for each channel and pixel
    /// value (3 x 256), quantizing pixel / 255 (or the normalization's (pixel - mean) / std).
    private let int8InputTable: [UInt8]?

    /// nil when the input takes pixel - 128 (scale 1/255, zero point -128, no normalization).
    static func int8Table(_ quantization: Quantization?, normalization: Normalization?) -> [UInt8]? {
        guard let quantization, let scale = quantization.scales.first, scale > 0 else { return nil }
        let zeroPoint = Float(quantization.zeroPoints.first ?? 0)
        if normalization == nil, abs(scale - 1 / 255) < 1e-6, zeroPoint == -128 { return nil }
        var table = [UInt8](repeating: 0, count: 3 * 256)
        for channel in 0..<3 {
            let mean = normalization.map { $0.mean[$0.mean.count == 3 ? channel : 0] } ?? 0
            let std = normalization.map { $0.std[$0.std.count == 3 ? channel : 0] } ?? 255
            for pixel in 0..<256 {
                // Round half to even, as NumPy and TFLite's converter do.
                let q = ((Float(pixel) - mean) / std / scale).rounded(.toNearestOrEven) + zeroPoint
                table[channel * 256 + pixel] = UInt8(bitPattern: Int8(min(127, max(-128, q))))
            }
        }
        return table
    }
    private let normalization: Normalization?
    /// How pixels become the model's input and why (options, metadata, the family's default), for
    /// `inspect` and logs.
    public let inputScaling: String
    private let layout: Layout
    /// The output layouts the detector decodes.
    private enum Layout {
        case ssd(SSDLayout)
        case yolo(YOLOLayout)
        case blazeFace(BlazeFaceLayout)
    }

    /// The output layout found, for `inspect` and errors.
    public var layoutDescription: String {
        switch layout {
        case .ssd: return "SSD with post-processing: boxes, classes, scores, count"
        case .yolo(let yolo): return yolo.description
        case .blazeFace(let face): return face.description
        }
    }
    /// Keypoints per detection (6 for BlazeFace), 0 for models without them.
    public var keypointCount: Int {
        if case .blazeFace(let face) = layout { return face.keypointCount }
        return 0
    }
    private let allowed: Set<Int>?
    private let denied: Set<Int>

    /// Loads the model at `modelPath` and prepares it.
    ///
    /// - Throws: ``DetectorError``, ``ModelFormatError``, ``InterpreterError``.
    /// - Parameter threads: workers shared with other models run in turn (``SharedThreads``); nil:
    ///   the detector's own `options.threadCount` threads.
    public init(modelPath: String, options: Options = Options(), threads: SharedThreads? = nil) throws {
        let model: Model
        do { model = try Model(contentsOf: URL(fileURLWithPath: modelPath)) } catch let error as ModelFormatError {
            throw error
        } catch {
            throw DetectorError.cannotReadModel(path: modelPath, reason: error.localizedDescription)
        }
        self.options = options
        var labels = try Labels.find(for: model, modelPath: modelPath, explicit: options.labelsPath)
        var interpreterOptions = Interpreter.Options(threadCount: options.threadCount, backend: options.backend)
        interpreterOptions.parksThreadsAfterInvoke = options.parksThreadsBetweenPictures
        interpreterOptions.floatPrecision = options.floatPrecision
        interpreter = try Interpreter(model: model, options: interpreterOptions, threads: threads)
        let input = model.subgraph.tensors[model.subgraph.inputs[0]]
        let shape = interpreter.shape(ofTensor: input.index)
        guard shape.count == 4, shape[0] == 1, shape[3] == 3, [.uint8, .int8, .float32].contains(input.type) else {
            throw DetectorError.unsupportedInput(shape: shape, type: input.type.description)
        }
        inputSize = Size(width: shape[2], height: shape[1])
        inputType = input.type
        inputQuantization = input.quantization
        if let yolo = YOLOLayout(model: model, interpreter: interpreter) {
            layout = .yolo(yolo)
            if labels == nil, yolo.classCount == 80 { labels = Labels.coco80 }
        } else if let face = BlazeFaceLayout(model: model, interpreter: interpreter, inputSize: (shape[2], shape[1])) {
            layout = .blazeFace(face)
            if labels == nil { labels = Labels(lines: ["face"], source: "BlazeFace (one class)") }
        } else {
            layout = .ssd(try SSDLayout(model: model, modelPath: modelPath))
        }
        var normalization = options.normalization ?? model.metadata?.inputNormalization
        var source = options.normalization != nil ? "set in the options (CLI: --mean and --std)" : "from the model's metadata"
        if normalization == nil {
            switch layout {
            case .blazeFace:
                normalization = Normalization(mean: [127.5], std: [127.5])
                source = "BlazeFace's default (MediaPipe scales to -1..1)"
            case .yolo where input.type == .float32:
                // Every Ultralytics export with float input (float32, float16 weights, dynamic-range
                // "hybrid") expects RGB scaled to 0..1.
                normalization = Normalization(mean: [0], std: [255])
                source = "the Ultralytics YOLO default for float input (RGB scaled to 0..1)"
            default:
                if input.type == .uint8, let q = input.quantization, q.scales.count == 1 {
                    let low = Double(q.scale) * Double(0 - q.zeroPoint), high = Double(q.scale) * Double(255 - q.zeroPoint)
                    source = "none: pixel bytes as they are (the input's quantization reads them as \(low.formatted(.number.precision(.fractionLength(0...3))))..\(high.formatted(.number.precision(.fractionLength(0...3)))))"
                } else {
                    source = "none: pixels as 0..\(input.type == .uint8 ? "255" : "1")\(input.type == .int8 ? ", quantized with the input's scale and zero point" : "")"
                }
            }
        }
        self.normalization = normalization
        inputScaling = normalization.map { "mean \($0.mean), std \($0.std): \(source)" } ?? source
        if input.type == .float32, normalization == nil { throw DetectorError.floatInputNeedsNormalization }
        int8InputTable = input.type == .int8 ? Self.int8Table(input.quantization, normalization: normalization) : nil
        self.labels = labels
        allowed = try Self.classIndices(options.categoryAllowlist, labels)
        denied = try Self.classIndices(options.categoryDenylist, labels) ?? []
    }

    /// The model classes named `names` (nil when no list is given).
    private static func classIndices(_ names: [String]?, _ labels: Labels?) throws -> Set<Int>? {
        guard let names else { return nil }
        return Set(try names.map { name in
            guard let index = labels?.classIndex(named: name) else {
                throw DetectorError.unknownCategory(name: name, known: labels?.lines.filter { $0 != "???" } ?? [])
            }
            return index
        })
    }

    /// How pictures are fitted to this detector's input: a value that may run on another thread
    /// (a pipeline prepares the next picture while the detector runs on this one).
    public struct Preparation: Sendable {
        public let inputSize: Size
        let mode: ResizeMode
        let fill: (UInt8, UInt8, UInt8)

        /// Converts to RGB, turns upright and fits `image` to the input.
        public func prepare(_ image: Image, orientation: Orientation = .up) -> PreparedImage {
            image.prepared(for: inputSize, mode: mode, orientation: orientation, fill: fill)
        }
    }

    /// This detector's ``Preparation``.
    public var preparation: Preparation {
        switch layout {
        case .yolo: return Preparation(inputSize: inputSize, mode: options.resizeMode ?? .letterbox, fill: (114, 114, 114))
        case .blazeFace: return Preparation(inputSize: inputSize, mode: options.resizeMode ?? .letterbox, fill: (0, 0, 0))
        case .ssd: return Preparation(inputSize: inputSize, mode: options.resizeMode ?? .stretch, fill: (0, 0, 0))
        }
    }

    /// Detects objects in `image`, given how its stored pixels must be turned to be upright.
    ///
    /// Boxes are in pixels of the upright picture; `result.uprightToStored` maps them to the stored frame.
    public func detect(_ image: Image, orientation: Orientation = .up) throws -> DetectionResult {
        let clock = ContinuousClock()
        var prepared: PreparedImage!
        let preprocess = clock.measure { prepared = preparation.prepare(image, orientation: orientation) }
        var result = try detect(prepared)
        result.timings.preprocess += Self.milliseconds(preprocess)
        return result
    }

    /// Detects objects in a picture ``preparation`` fitted to the input.
    public func detect(_ prepared: PreparedImage) throws -> DetectionResult {
        let clock = ContinuousClock()
        let preprocess = try clock.measure { try fillInput(prepared.pixels) }
        let inference = try clock.measure { try interpreter.invoke() }
        var detections: [Detection] = []
        let postprocess = try clock.measure { detections = try decode(prepared) }
        return DetectionResult(
            imageSize: prepared.uprightSize, detections: detections,
            timings: .init(preprocess: Self.milliseconds(preprocess), inference: Self.milliseconds(inference), postprocess: Self.milliseconds(postprocess)),
            uprightToStored: prepared.storedToUpright.inverted)
    }

    private static func milliseconds(_ d: Duration) -> Double { Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }

    private func fillInput(_ pixels: Image) throws {
        try interpreter.withInput(at: 0) { buffer in
            let bytes = pixels.data
            switch inputType {
            case .uint8:
                buffer.copyBytes(from: bytes)
            case .int8:
                if let table = int8InputTable {
                    // Pixel by pixel, each channel through its own 256 entries.
                    table.withUnsafeBufferPointer { table in
                        bytes.withUnsafeBufferPointer { source in
                            let pixels = min(source.count, buffer.count) / 3
                            for p in 0..<pixels {
                                let i = 3 * p
                                buffer[i] = table[Int(source[i])]
                                buffer[i + 1] = table[256 + Int(source[i + 1])]
                                buffer[i + 2] = table[512 + Int(source[i + 2])]
                            }
                        }
                    }
                } else {
                    for i in bytes.indices { buffer[i] = bytes[i] ^ 0x80 }
                }
            default:
                let floats = buffer.bindMemory(to: Float.self)
                let means = normalization?.mean ?? [0], stds = normalization?.std ?? [1]
                let mean = (0..<3).map { means[means.count == 3 ? $0 : 0] }, std = (0..<3).map { stds[stds.count == 3 ? $0 : 0] }
                bytes.withUnsafeBufferPointer { src in
                    if Set(mean).count == 1 && Set(std).count == 1 {
                        // One loop the compiler vectorizes (BlazeFace, YOLO's float exports).
                        let (m, s) = (mean[0], std[0])
                        for i in src.indices { floats[i] = (Float(src[i]) - m) / s }
                    } else {
                        for p in 0..<(src.count / 3) {
                            for c in 0..<3 { floats[3 * p + c] = (Float(src[3 * p + c]) - mean[c]) / std[c] }
                        }
                    }
                }
            }
        }
    }

    private func decode(_ prepared: PreparedImage) throws -> [Detection] {
        let raw: [RawDetection]
        switch layout {
        case .ssd(let ssd):
            raw = try ssd.read(interpreter)
        case .yolo(let yolo):
            let candidates = try yolo.read(interpreter, threshold: options.scoreThreshold, inputSize: (inputSize.width, inputSize.height))
                .filter { (allowed?.contains($0.classIndex) ?? true) && !denied.contains($0.classIndex) }
            raw = yolo.needsSuppression
                ? NonMaxSuppression.apply(candidates, iouThreshold: options.iouThreshold, classAware: !options.classAgnosticNMS, limit: options.nmsLimit)
                : candidates.sorted { $0.score > $1.score }
        case .blazeFace(let face):
            raw = NonMaxSuppression.weighted(try face.read(interpreter, threshold: options.scoreThreshold), iouThreshold: BlazeFaceLayout.mergeThreshold)
        }
        let toUpright = prepared.uprightToInput.inverted
        let w = Double(prepared.uprightSize.width), h = Double(prepared.uprightSize.height)
        let bounds = Rect(x: 0, y: 0, width: w, height: h)
        var detections: [Detection] = []
        for item in raw where item.score >= options.scoreThreshold {
            if let allowed, !allowed.contains(item.classIndex) { continue }
            if denied.contains(item.classIndex) { continue }
            // Model boxes are [ymin, xmin, ymax, xmax] normalized to the input.
            let input = Rect(minX: Double(item.box.1) * Double(inputSize.width), minY: Double(item.box.0) * Double(inputSize.height),
                             maxX: Double(item.box.3) * Double(inputSize.width), maxY: Double(item.box.2) * Double(inputSize.height))
            let box = toUpright.apply(input).clamped(to: bounds)
            let keypoints = item.keypoints.isEmpty ? nil : item.keypoints.map {
                toUpright.apply(Point(x: Double($0.0) * Double(inputSize.width), y: Double($0.1) * Double(inputSize.height)))
            }
            detections.append(Detection(
                classIndex: item.classIndex, label: labels?.name(item.classIndex) ?? "class \(item.classIndex)",
                score: item.score, box: box,
                normalizedBox: Rect(minX: box.minX / w, minY: box.minY / h, maxX: box.maxX / w, maxY: box.maxY / h),
                keypoints: keypoints))
        }
        detections.sort { $0.score > $1.score }
        if let maxResults = options.maxResults { detections = Array(detections.prefix(maxResults)) }
        return detections
    }
}
