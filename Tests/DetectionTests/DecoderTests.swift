@_spi(Decoding) import Detection
import TFLiteFormat
import Testing

/// Output decoding and non-maximum suppression on synthetic tensors: known boxes in, known boxes out.
@Suite struct DecoderTests {
    @Test func blazeFaceAnchorsFollowMediaPipesGrids() {
        // MediaPipe's short-range options: 16x16 cells with 2 anchors, then 8x8 with 6 (three layers of stride 16).
        let short = BlazeFaceLayout.anchors(.shortRange, inputWidth: 128, inputHeight: 128)
        #expect(short.count == 896)
        #expect(short[0] == (x: 0.5 / 16, y: 0.5 / 16) && short[1] == short[0] && short[2] == (x: 1.5 / 16, y: 0.5 / 16))
        #expect(short[511] == (x: 15.5 / 16, y: 15.5 / 16))
        #expect(short[512] == (x: 0.5 / 8, y: 0.5 / 8) && short[517] == short[512] && short[518] == (x: 1.5 / 8, y: 0.5 / 8))
        #expect(BlazeFaceLayout.anchors(.fullRange, inputWidth: 192, inputHeight: 192).count == 2304)
        #expect(BlazeFaceLayout.anchors(.backCamera, inputWidth: 256, inputHeight: 256).count == 896)
    }

    @Test func blazeFaceDecodesOffsetsFromTheirAnchor() {
        let layout = BlazeFaceLayout(inputSize: (128, 128))
        var values = [Float](repeating: 0, count: 896 * 16), scores = [Float](repeating: -10, count: 896)
        // Anchor 776 is the first of cell (x 4, y 5) of the 8x8 grid (512 + 6 * (5 * 8 + 4)): centre
        // (4.5/8, 5.5/8) = (72, 88) px.
        let anchor = 776
        #expect(layout.anchors[anchor] == (x: 4.5 / 8, y: 5.5 / 8))
        values.replaceSubrange(anchor * 16..<anchor * 16 + 16, with: [8, -4, 32, 16, -10, -6, 10, -6, 0, 0, 0, 8, -16, 0, 16, 0])
        scores[anchor] = 2  // sigmoid(2) = 0.881
        scores[0] = 200  // clipped to 100: score 1
        let found = values.withUnsafeBufferPointer { v in scores.withUnsafeBufferPointer { layout.decode(v, scores: $0, threshold: 0.5) } }
        #expect(found.count == 2)
        let face = found.first { abs($0.score - 0.8808) < 1e-3 }!
        // Centre (80, 84) px, 32 x 16 px.
        let expected: (Float, Float, Float, Float) = ((84 - 8) / 128, (80 - 16) / 128, (84 + 8) / 128, (80 + 16) / 128)
        #expect(abs(face.box.0 - expected.0) < 1e-6 && abs(face.box.1 - expected.1) < 1e-6 && abs(face.box.2 - expected.2) < 1e-6 && abs(face.box.3 - expected.3) < 1e-6)
        #expect(face.keypoints.count == 6)
        #expect(abs(face.keypoints[0].0 - 62 / 128) < 1e-6 && abs(face.keypoints[0].1 - 82 / 128) < 1e-6)
        #expect(abs(face.keypoints[5].0 - 88 / 128) < 1e-6 && abs(face.keypoints[5].1 - 88 / 128) < 1e-6)
        #expect(found.contains { $0.score == 1 })
        // Buffers shorter than the layout give nothing rather than reading past them.
        let short = values.withUnsafeBufferPointer { v in scores.withUnsafeBufferPointer { layout.decode(UnsafeBufferPointer(rebasing: v.prefix(100)), scores: $0, threshold: 0.5) } }
        #expect(short.isEmpty)
    }

    static func close(_ a: (Float, Float, Float, Float), _ b: (Float, Float, Float, Float)) -> Bool {
        abs(a.0 - b.0) < 1e-6 && abs(a.1 - b.1) < 1e-6 && abs(a.2 - b.2) < 1e-6 && abs(a.3 - b.3) < 1e-6
    }

    @Test func yoloV8ReadsFieldMajorCentreBoxesAndTheBestClass() {
        // [1, 4 + 2, 3]: field-major, three candidates, two classes.
        let fields: [[Float]] = [
            [0.5, 0.9, 320], [0.25, 0.9, 320], [0.2, 0.1, 64], [0.1, 0.1, 64],  // cx, cy, w, h (the third in input pixels)
            [0.1, 0.2, 0.7], [0.9, 0.1, 0.3],  // class scores
        ]
        let layout = YOLOLayout(version: .v8, candidates: 3, classCount: 2)
        let found = fields.flatMap { $0 }.withUnsafeBytes { layout.decode($0, threshold: 0.25, inputSize: (640, 640)) }
        #expect(found.count == 2)
        #expect(found[0].classIndex == 1 && found[0].score == 0.9 && Self.close(found[0].box, (0.2, 0.4, 0.3, 0.6)))
        #expect(found[1].classIndex == 0 && found[1].score == 0.7 && Self.close(found[1].box, (0.45, 0.45, 0.55, 0.55)))
        // Fewer bytes than the layout: nothing, not a read past the end.
        #expect([Float](repeating: 1, count: 17).withUnsafeBytes { layout.decode($0, threshold: 0, inputSize: (640, 640)) }.isEmpty)
    }

    @Test func yoloV5MultipliesObjectnessByTheClassScore() {
        // [1, 3, 5 + 2]: candidate-major.
        let rows: [[Float]] = [
            [0.5, 0.5, 0.2, 0.2, 0.5, 0.8, 0.1],  // 0.5 x 0.8 = 0.4: kept, class 0
            [0.5, 0.5, 0.2, 0.2, 0.2, 0.1, 1.0],  // objectness 0.2 below the threshold
            [0.3, 0.7, 0.2, 0.4, 0.9, 0.1, 0.2],  // 0.9 x 0.2 = 0.18: dropped
        ]
        let layout = YOLOLayout(version: .v5, candidates: 3, classCount: 2)
        let found = rows.flatMap { $0 }.withUnsafeBytes { layout.decode($0, threshold: 0.25, inputSize: (640, 640)) }
        #expect(found.count == 1 && found[0].classIndex == 0 && abs(found[0].score - 0.4) < 1e-6 && Self.close(found[0].box, (0.4, 0.4, 0.6, 0.6)))
    }

    @Test func quantizedYOLOOutputsAreReadThroughScaleAndZeroPoint() {
        // int8 with scale 1/128 and zero point -128: q = value * 128 - 128.
        let values: [Float] = [0.5, 0.25, 0.25, 0.125, 0.75]  // one candidate, one class (v8)
        let quantized = values.map { Int8(Int($0 * 128) - 128) }
        let layout = YOLOLayout(version: .v8, candidates: 1, classCount: 1, type: .int8, scale: 1 / 128, zeroPoint: -128)
        let found = quantized.withUnsafeBytes { layout.decode($0, threshold: 0.5, inputSize: (640, 640)) }
        #expect(found.count == 1 && found[0].score == 0.75 && Self.close(found[0].box, (0.1875, 0.375, 0.3125, 0.625)))
    }

    @Test func endToEndHeadsGiveCornersScoreAndClassWithoutSuppression() {
        // [1, 5, 6]: x1, y1, x2, y2, score, class per candidate (YOLOv10, YOLO26, exports with nms=True).
        let rows: [[Float]] = [
            [0.1, 0.2, 0.3, 0.6, 0.9, 2],  // kept, class 2
            [0.12, 0.2, 0.32, 0.6, 0.8, 2],  // overlaps the first: kept (the model suppressed already)
            [64, 128, 320, 640, 0.7, 0],  // corners in input pixels of 640 x 640
            [0.1, 0.1, 0.2, 0.2, 0.1, 1],  // below the threshold
            [0.1, 0.1, 0.2, 0.2, 0.95, 7],  // a class the model does not have: dropped
        ]
        let layout = YOLOLayout(version: .endToEnd, candidates: 5, classCount: 3)
        #expect(!layout.needsSuppression)
        let found = rows.flatMap { $0 }.withUnsafeBytes { layout.decode($0, threshold: 0.25, inputSize: (640, 640)) }
        #expect(found.map(\.classIndex) == [2, 2, 0] && found.map(\.score) == [0.9, 0.8, 0.7])
        #expect(Self.close(found[0].box, (0.2, 0.1, 0.6, 0.3)) && Self.close(found[2].box, (0.2, 0.1, 1.0, 0.5)))
        // int8 through scale and zero point: the class column too.
        let quantized = [Float](rows[0]).map { Int8(clamping: Int(($0 * 40).rounded()) - 10) }
        let int8 = YOLOLayout(version: .endToEnd, candidates: 1, classCount: 3, type: .int8, scale: 1 / 40, zeroPoint: -10)
        let one = quantized.withUnsafeBytes { int8.decode($0, threshold: 0.25, inputSize: (640, 640)) }
        #expect(one.count == 1 && one[0].classIndex == 2 && abs(one[0].score - 0.9) < 1e-6 && Self.close(one[0].box, (0.2, 0.1, 0.6, 0.3)))
        // Fewer bytes than the layout: nothing.
        #expect([Float](repeating: 1, count: 29).withUnsafeBytes { layout.decode($0, threshold: 0, inputSize: (640, 640)) }.isEmpty)
    }

    @Test func endToEndIsToldFromAOneClassYOLOv5ByTheExportsSettings() {
        #expect(YOLOLayout.isEndToEnd(settings: "{'task': 'detect', 'end2end': True, 'names': {0: 'person'}}", classNames: 1))
        #expect(YOLOLayout.isEndToEnd(settings: "{'args': {'nms': True}, 'names': {0: 'person'}}", classNames: 1))
        #expect(YOLOLayout.isEndToEnd(settings: nil, classNames: 80))
        #expect(!YOLOLayout.isEndToEnd(settings: "{'args': {'nms': False}, 'names': {0: 'person'}}", classNames: 1))
        #expect(!YOLOLayout.isEndToEnd(settings: nil, classNames: 0))
    }

    static func box(_ x: Float, _ y: Float, _ size: Float) -> (Float, Float, Float, Float) { (y, x, y + size, x + size) }

    @Test func greedySuppressionKeepsTheBestOfEachClassAndCluster() {
        let candidates = [
            RawDetection(classIndex: 0, score: 0.9, box: Self.box(0, 0, 0.2)),
            RawDetection(classIndex: 0, score: 0.8, box: Self.box(0.02, 0, 0.2)),  // IoU 0.82 with the first: dropped
            RawDetection(classIndex: 1, score: 0.7, box: Self.box(0.02, 0, 0.2)),  // another class: kept
            RawDetection(classIndex: 0, score: 0.6, box: Self.box(0.5, 0.5, 0.2)),  // elsewhere: kept
        ]
        let kept = NonMaxSuppression.apply(candidates, iouThreshold: 0.45)
        #expect(kept.map(\.score) == [0.9, 0.7, 0.6])
        // Class-agnostic: the other class's box overlaps the best one too.
        #expect(NonMaxSuppression.apply(candidates, iouThreshold: 0.45, classAware: false).map(\.score) == [0.9, 0.6])
        #expect(NonMaxSuppression.apply(candidates, iouThreshold: 0.45, limit: 1).map(\.score) == [0.9])
    }

    @Test func suppressionNeedsAnOverlapAboveTheThresholdNotEqualToIt() {
        // Two 0.5 x 1 boxes sharing half their width: IoU 0.25 / 0.75.
        let a = RawDetection(classIndex: 0, score: 0.9, box: (0, 0, 1, 0.5)), b = RawDetection(classIndex: 0, score: 0.8, box: (0, 0.25, 1, 0.75))
        let iou = NonMaxSuppression.iou(a.box, b.box)
        #expect(iou == Float(0.25) / Float(0.75))
        #expect(NonMaxSuppression.apply([a, b], iouThreshold: iou).count == 2)
        #expect(NonMaxSuppression.apply([a, b], iouThreshold: iou.nextDown).count == 1)
        // Ties keep their input order (a stable sort), so results do not flicker between frames.
        let tie = RawDetection(classIndex: 0, score: 0.9, box: (0, 0.25, 1, 0.75))
        #expect(NonMaxSuppression.apply([a, tie], iouThreshold: 0.3).map { $0.box.1 } == [0])
        #expect(NonMaxSuppression.apply([tie, a], iouThreshold: 0.3).map { $0.box.1 } == [0.25])
    }

    @Test func weightedSuppressionAveragesEachClusterByScore() {
        let candidates = [
            RawDetection(classIndex: 0, score: 0.75, box: Self.box(0.1, 0.1, 0.2), keypoints: [(0.2, 0.2)]),
            RawDetection(classIndex: 0, score: 0.25, box: Self.box(0.12, 0.1, 0.2), keypoints: [(0.24, 0.2)]),
            RawDetection(classIndex: 0, score: 0.5, box: Self.box(0.6, 0.6, 0.2), keypoints: [(0.7, 0.7)]),
        ]
        let merged = NonMaxSuppression.weighted(candidates, iouThreshold: 0.3)
        #expect(merged.count == 2)
        #expect(merged[0].score == 0.75 && merged[1].score == 0.5)
        // x: 0.75 * 0.1 + 0.25 * 0.12 = 0.105; keypoint x: 0.75 * 0.2 + 0.25 * 0.24 = 0.21.
        #expect(abs(merged[0].box.1 - 0.105) < 1e-6 && abs(merged[0].box.3 - 0.305) < 1e-6 && abs(merged[0].box.0 - 0.1) < 1e-6)
        #expect(abs(merged[0].keypoints[0].0 - 0.21) < 1e-6 && abs(merged[0].keypoints[0].1 - 0.2) < 1e-6)
        #expect(merged[1].box == Self.box(0.6, 0.6, 0.2) && merged[1].keypoints[0] == (0.7, 0.7))
    }
}
