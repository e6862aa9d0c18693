import Foundation
import Inference
import Testing
import TestSupport
import TFLiteFormat

/// The XNNPACK backend against the reference backend and LiteRT's XNNPACK golden detections.
@Suite struct XNNPACKBackendTests {
    static let detect = Fixtures.generated.appendingPathComponent("detect")
    static let inputs = Fixtures.folders(detect.appendingPathComponent("inputs")).map { String($0.dropLast(4)) }
    /// Largest difference, in uint8 steps, between XNNPACK and the reference kernels on the shared
    /// model's predictor tensors over the real inputs (measured 2026-11-21: see README).
    static let predictorStepBound = 12

    static func interpreter(_ backend: Interpreter.Options.Backend, threads: Int = 1) throws -> Interpreter {
        let model = try Model(contentsOf: Fixtures.detectModel)
        let predictors = Set(try ["Squeeze", "convert_scores"].map { name in
            try #require(model.subgraph.tensors.firstIndex { $0.name == name })
        })
        return try Interpreter(model: model, options: .init(threadCount: threads, backend: backend, preservedTensors: .tensors(predictors)))
    }

    @Test func predictorTensorsStayWithinTheMeasuredStepBoundOfReference() throws {
        let fast = try Self.interpreter(.xnnpack), exact = try Self.interpreter(.reference)
        var worst: [String: Int] = [:]
        for name in Self.inputs {
            let input = try Fixtures.npy(Self.detect.appendingPathComponent("inputs/\(name).npy")).data
            try fast.copy(input, toInputAt: 0)
            try exact.copy(input, toInputAt: 0)
            try fast.invoke()
            try exact.invoke()
            for tensor in ["Squeeze", "convert_scores"] {
                let a = try fast.tensor(at: try fast.tensorIndex(named: tensor)).data
                let b = try exact.tensor(at: try exact.tensorIndex(named: tensor)).data
                let steps = zip(a, b).map { abs(Int($0) - Int($1)) }.max() ?? 0
                worst[tensor] = max(worst[tensor] ?? 0, steps)
            }
        }
        print("XNNPACK vs reference, largest difference in uint8 steps over \(Self.inputs.count) inputs: \(worst.sorted { $0.key < $1.key })")
        for (tensor, steps) in worst {
            #expect(steps <= Self.predictorStepBound, "\(tensor) differs by \(steps) steps")
        }
    }

    /// LiteRT's default CPU path (XNNPACK) on the same real inputs: the predictor tensors and the
    /// post-processed outputs are identical (boxes within 1e-5).
    @Test func predictorsAndDetectionsEqualLiteRTXNNPACK() throws {
        let interpreter = try Self.interpreter(.xnnpack, threads: 2)
        for name in Self.inputs {
            try interpreter.copy(try Fixtures.npy(Self.detect.appendingPathComponent("inputs/\(name).npy")).data, toInputAt: 0)
            try interpreter.invoke()
            try expectDetectOutputsEqual(interpreter, to: Self.detect.appendingPathComponent("xnnpack/\(name)"), name)
        }
    }

    @Test func threadCountsOneTwoAndFourGiveIdenticalOutputs() throws {
        let name = try #require(Self.inputs.first { $0.hasPrefix("one-by-one") })
        let input = try Fixtures.npy(Self.detect.appendingPathComponent("inputs/\(name).npy")).data
        var results: [[[UInt8]]] = []
        for threads in [1, 2, 4] {
            let interpreter = try Self.interpreter(.xnnpack, threads: threads)
            try interpreter.copy(input, toInputAt: 0)
            try interpreter.invoke()
            var outputs = try (0..<4).map { try interpreter.output(at: $0).data }
            outputs.append(try interpreter.tensor(at: try interpreter.tensorIndex(named: "convert_scores")).data)
            results.append(outputs)
        }
        #expect(results[0] == results[1] && results[1] == results[2])
    }

    struct GoldenDetection {
        var classID: Int
        var score: Float
        var box: [Float]
    }

    static func iou(_ a: [Float], _ b: [Float]) -> Float {
        let ih = max(0, min(a[2], b[2]) - max(a[0], b[0])), iw = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let intersection = ih * iw
        let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - intersection
        return union > 0 ? intersection / union : 0
    }

    @Test func detectionsMatchLiteRTXNNPACKGoldenFrames() throws {
        let golden = Fixtures.shared.appendingPathComponent("reference/golden/litert-xnnpack/one-by-one-person-detection.jsonl")
        let lines = try String(contentsOf: golden, encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 100)
        let interpreter = try Self.interpreter(.xnnpack, threads: 2)
        let tolerance: Float = 6 / 256, threshold: Float = 0.3
        var matched = 0, flips: [String] = []
        for line in lines {
            let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let frame = try #require(entry["frame"] as? Int)
            let expected = (entry["detections"] as? [[String: Any]] ?? []).map {
                GoldenDetection(classID: $0["class_id"] as! Int, score: Float($0["score"] as! Double), box: ($0["box"] as! [Double]).map(Float.init))
            }
            let path = Fixtures.generated.appendingPathComponent(String(format: "golden-inputs/one-by-one-person-detection/%06d.npy", frame))
            try interpreter.copy(try Fixtures.npy(path).data, toInputAt: 0)
            try interpreter.invoke()
            let count = Int(try interpreter.output(at: 3).values(as: Float.self)[0])
            let boxes = try interpreter.output(at: 0).values(as: Float.self)
            let classes = try interpreter.output(at: 1).values(as: Float.self)
            let scores = try interpreter.output(at: 2).values(as: Float.self)
            let actual = (0..<count).map { GoldenDetection(classID: Int(classes[$0]), score: scores[$0], box: Array(boxes[($0 * 4)..<($0 * 4 + 4)])) }
                .filter { $0.score >= threshold }
            var unmatched = actual
            for detection in expected {
                if let index = unmatched.firstIndex(where: {
                    $0.classID == detection.classID && Self.iou($0.box, detection.box) >= 0.85 && abs($0.score - detection.score) <= tolerance
                }) {
                    unmatched.remove(at: index)
                    matched += 1
                } else if detection.score < threshold + tolerance {
                    flips.append("frame \(frame): LiteRT class \(detection.classID) at \(detection.score), Spotter below \(threshold)")
                } else {
                    Issue.record("frame \(frame): no match for class \(detection.classID) score \(detection.score) box \(detection.box)")
                }
            }
            for extra in unmatched {
                if extra.score < threshold + tolerance {
                    flips.append("frame \(frame): Spotter class \(extra.classID) at \(extra.score), LiteRT below \(threshold)")
                } else {
                    Issue.record("frame \(frame): extra detection class \(extra.classID) score \(extra.score)")
                }
            }
        }
        print("golden frames: \(lines.count), matched detections: \(matched), near-threshold flips: \(flips.count)")
        flips.forEach { print("  flip: \($0)") }
        #expect(matched > 100)
    }
}
