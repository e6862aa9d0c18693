import Detection
import Foundation
import Imaging
import Inference
import Media
import Testing
import TestSupport

/// BlazeFace through the ObjectDetector against the Python face peer (scripts/peer_blazeface.py:
/// MediaPipe's letterbox, anchors, decoding and weighted NMS over LiteRT; its detections in
/// fixtures-generated/models/blazeface/peer-*.jsonl).
@Suite struct BlazeFaceTests {
    static let model = Fixtures.shared.appendingPathComponent("models/blazeface-short-range/face_detection_short_range.tflite").path

    /// Also with bfloat16 convolutions (on CPUs without AVX-512 BF16, float32 again): the peer's
    /// faces, scores within 0.02 and keypoints within 2 px all the same.
    @Test(arguments: [("ref", Interpreter.Options.Backend.reference, Interpreter.Options.FloatPrecision.float32),
                      ("xnnpack", .xnnpack, .float32), ("xnnpack", .xnnpack, .bfloat16)])
    func facesAndKeypointsMatchThePythonPeer(kind: String, backend: Interpreter.Options.Backend,
                                             precision: Interpreter.Options.FloatPrecision) throws {
        var options = ObjectDetector.Options(backend: backend)
        options.floatPrecision = precision
        let detector = try ObjectDetector(modelPath: Self.model, options: options)
        #expect(detector.layoutDescription.hasPrefix("BlazeFace"))
        let lines = try String(contentsOf: Fixtures.generated.appendingPathComponent("models/blazeface/peer-\(kind).jsonl"), encoding: .utf8)
            .split(separator: "\n")
        #expect(!lines.isEmpty)
        var faces = 0
        for line in lines {
            let peer = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let path = try #require(peer["image"] as? String)
            let result = try detector.detect(try ImageFile.decode(path).upright)
            let expected = try #require(peer["detections"] as? [[String: Any]])
            #expect(result.detections.count == expected.count, "\(path): \(result.detections) against \(expected)")
            for face in expected {
                let box = try #require(face["box"] as? [String: Double])
                let rect = Rect(minX: box["xmin"]!, minY: box["ymin"]!, maxX: box["xmax"]!, maxY: box["ymax"]!)
                let score = try #require(face["score"] as? Double)
                let points = try #require(face["keypoints"] as? [[Double]]).map { Point(x: $0[0], y: $0[1]) }
                let twin = try #require(result.detections.first { $0.box.iou(rect) >= 0.9 }, "\(path): no face at \(rect) in \(result.detections)")
                #expect(twin.label == "face" && abs(Double(twin.score) - score) <= 0.02, "\(path): score \(twin.score) against \(score)")
                let keypoints = try #require(twin.keypoints)
                #expect(keypoints.count == 6)
                let worst = zip(keypoints, points).map { $0.distance(to: $1) }.max() ?? .infinity
                #expect(worst <= 2, "\(path): a keypoint is \(worst) px from the peer's")
                faces += 1
            }
        }
        // Faces the peer found, every one of them matched (a peer that found none would prove nothing).
        #expect(faces > 0)
    }

    /// On every picture the peer read, as many faces as the peer found, none overlapping another,
    /// and each face's keypoints where an upright face has them: both eyes above the mouth, the
    /// right eye on the picture's left, all within the box (give or take 20 px).
    @Test func facesAreSeparateWithEyesAboveTheMouth() throws {
        let detector = try ObjectDetector(modelPath: Self.model)
        let lines = try String(contentsOf: Fixtures.generated.appendingPathComponent("models/blazeface/peer-xnnpack.jsonl"), encoding: .utf8)
            .split(separator: "\n")
        var faces = 0
        for line in lines {
            let peer = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let path = try #require(peer["image"] as? String), expected = try #require(peer["detections"] as? [[String: Any]])
            let result = try detector.detect(try ImageFile.decode(path).upright)
            #expect(result.detections.count == expected.count, "\(path)")
            let sorted = result.detections.sorted { $0.box.minX < $1.box.minX }
            for (left, right) in zip(sorted, sorted.dropFirst()) { #expect(left.box.iou(right.box) < 0.3, "\(path): \(left) and \(right)") }
            for face in result.detections {
                let k = try #require(face.keypoints)
                #expect(k[0].y < k[3].y && k[1].y < k[3].y && k[0].x < k[1].x, "\(path): eyes above the mouth, the right eye on the picture's left: \(k)")
                #expect(k.allSatisfy { face.box.minX - 20 <= $0.x && $0.x <= face.box.maxX + 20 }, "\(path): \(k) against \(face.box)")
                faces += 1
            }
        }
        #expect(faces > 0)
    }

    @Test func rotatedPicturesGiveTheSameFacesInUprightPixels() throws {
        let detector = try ObjectDetector(modelPath: Self.model)
        let picture = try ImageFile.decode(Fixtures.shared.appendingPathComponent("images/faces/obama.jpg").path).upright
        let upright = try detector.detect(picture)
        // The same pixels stored rotated a quarter turn, with the orientation that makes them upright.
        let stored = picture.oriented(.left)
        #expect(stored.oriented(.right).data == picture.data)
        let turned = try detector.detect(stored, orientation: .right)
        let a = try #require(upright.detections.first), b = try #require(turned.detections.first)
        #expect(a.box.iou(b.box) > 0.9)
        #expect(zip(a.keypoints ?? [], b.keypoints ?? []).allSatisfy { $0.distance(to: $1) < 6 })
    }
}
