import Foundation
import Inference
import TFLiteFormat

/// MediaPipe's BlazeFace outputs: `[1, N, 4 + 2K]` box and keypoint offsets relative to N SSD
/// anchors, and `[1, N, 1]` score logits. The anchors are generated as MediaPipe's
/// `SsdAnchorsCalculator` does with the face detector's options (fixed anchor size, offset 0.5);
/// the decoding is its `TensorsToDetectionsCalculator`'s (centre x first, offsets in input pixels,
/// sigmoid scores clipped to ±100) and overlapping faces are merged by weighted NMS.
@_spi(Decoding) public struct BlazeFaceLayout {
    /// MediaPipe's anchor options for one model variant.
    public struct AnchorOptions: Equatable, Sendable {
        var strides: [Int]
        /// Adds an anchor between each layer's scale and the next one's (1 for the short-range model).
        var interpolatedScaleAspectRatio: Float
        var minScale: Float = 0.1484375
        var maxScale: Float = 0.75
        var aspectRatios: [Float] = [1]

        /// Short range (128x128, 896 anchors) and the back-camera model (256x256, 896 anchors).
        public static let shortRange = AnchorOptions(strides: [8, 16, 16, 16], interpolatedScaleAspectRatio: 1)
        public static let backCamera = AnchorOptions(strides: [16, 32, 32, 32], interpolatedScaleAspectRatio: 1)
        /// Full range (192x192, 2304 anchors).
        public static let fullRange = AnchorOptions(strides: [4], interpolatedScaleAspectRatio: 0)
    }

    /// Names of BlazeFace's six keypoints, in output order.
    static let keypointNames = ["right eye", "left eye", "nose tip", "mouth centre", "right ear tragion", "left ear tragion"]

    let boxesOutput: Int
    let scoresOutput: Int
    public let count: Int
    public let keypointCount: Int
    public let inputSize: (width: Int, height: Int)
    /// Centre x and y of every anchor, relative to the input (their size is fixed at 1).
    public let anchors: [(x: Float, y: Float)]
    /// MediaPipe's face detectors merge overlapping candidates above this IoU.
    static let mergeThreshold: Float = 0.3

    /// Recognizes the two outputs by shape and finds the anchor options that give their count;
    /// nil when the model is not BlazeFace-like.
    init?(model: Model, interpreter: Interpreter, inputSize: (width: Int, height: Int)) {
        let graph = model.subgraph
        guard graph.outputs.count == 2 else { return nil }
        let shapes = graph.outputs.map { interpreter.shape(ofTensor: $0) }
        guard graph.outputs.allSatisfy({ graph.tensors[$0].type == .float32 }),
              shapes.allSatisfy({ $0.count == 3 && $0[0] == 1 }), shapes[0][1] == shapes[1][1] else { return nil }
        let boxes = shapes[0][2] >= 4 && shapes[1][2] == 1 ? 0 : 1
        let width = shapes[boxes][2]
        guard width >= 4, width % 2 == 0, shapes[1 - boxes][2] == 1 else { return nil }
        let count = shapes[boxes][1]
        let candidates = [AnchorOptions.shortRange, .backCamera, .fullRange]
        guard let anchors = candidates.lazy.map({ Self.anchors($0, inputWidth: inputSize.width, inputHeight: inputSize.height) })
            .first(where: { $0.count == count }) else { return nil }
        (boxesOutput, scoresOutput, self.count) = (boxes, 1 - boxes, count)
        keypointCount = (width - 4) / 2
        self.inputSize = inputSize
        self.anchors = anchors
    }

    /// A layout for decoding tensors directly: the short-range anchors for `inputSize`.
    public init(inputSize: (width: Int, height: Int), keypointCount: Int = 6) {
        anchors = Self.anchors(.shortRange, inputWidth: inputSize.width, inputHeight: inputSize.height)
        (boxesOutput, scoresOutput, count) = (0, 1, anchors.count)
        self.keypointCount = keypointCount
        self.inputSize = inputSize
    }

    var description: String {
        "BlazeFace: [1, \(count), \(4 + 2 * keypointCount)] boxes with \(keypointCount) keypoints and [1, \(count), 1] scores on \(count) anchors; letterbox input, weighted NMS in Spotter"
    }

    /// Anchor centres as MediaPipe's `SsdAnchorsCalculator` generates them with `fixed_anchor_size`:
    /// layers of equal stride share one grid, one anchor per aspect ratio (plus the interpolated one)
    /// per layer, in order row, column, anchor.
    public static func anchors(_ options: AnchorOptions, inputWidth: Int, inputHeight: Int) -> [(x: Float, y: Float)] {
        var anchors: [(x: Float, y: Float)] = []
        var layer = 0
        while layer < options.strides.count {
            var perCell = 0
            var last = layer
            while last < options.strides.count, options.strides[last] == options.strides[layer] {
                perCell += options.aspectRatios.count + (options.interpolatedScaleAspectRatio > 0 ? 1 : 0)
                last += 1
            }
            let stride = options.strides[layer]
            let rows = (inputHeight + stride - 1) / stride, columns = (inputWidth + stride - 1) / stride
            for y in 0..<rows {
                for x in 0..<columns {
                    let centre = (x: (Float(x) + 0.5) / Float(columns), y: (Float(y) + 0.5) / Float(rows))
                    anchors.append(contentsOf: repeatElement(centre, count: perCell))
                }
            }
            layer = last
        }
        return anchors
    }

    /// Candidates of the last `invoke()` scoring at least `threshold`.
    func read(_ interpreter: Interpreter, threshold: Float) throws -> [RawDetection] {
        try interpreter.withOutput(at: scoresOutput) { scores in
            try interpreter.withOutput(at: boxesOutput) { values in
                decode(values.bindMemory(to: Float.self), scores: scores.bindMemory(to: Float.self), threshold: threshold)
            }
        }
    }

    /// Candidates scoring at least `threshold` (sigmoid of the logit clipped to ±100), decoded: boxes
    /// as ymin, xmin, ymax, xmax and keypoints as x, y, normalized to the input. Empty when the
    /// buffers are shorter than the layout.
    @_spi(Decoding) public func decode(_ values: UnsafeBufferPointer<Float>, scores: UnsafeBufferPointer<Float>, threshold: Float) -> [RawDetection] {
        let width = 4 + 2 * keypointCount
        let scale = (x: Float(inputSize.width), y: Float(inputSize.height))
        guard scores.count >= count, values.count >= count * width else { return [] }
        var found: [RawDetection] = []
        for i in 0..<count {
            let score = 1 / (1 + exp(-min(max(scores[i], -100), 100)))
            if score < threshold || score.isNaN { continue }
            let anchor = anchors[i], row = i * width
            let cx = values[row] / scale.x + anchor.x, cy = values[row + 1] / scale.y + anchor.y
            let w = values[row + 2] / scale.x, h = values[row + 3] / scale.y
            var detection = RawDetection(classIndex: 0, score: score, box: (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2))
            detection.keypoints = (0..<keypointCount).map { k in
                (values[row + 4 + 2 * k] / scale.x + anchor.x, values[row + 5 + 2 * k] / scale.y + anchor.y)
            }
            found.append(detection)
        }
        return found
    }
}
