import Foundation
import Inference
import Testing
import TestSupport
import TFLiteFormat

/// The shared SSD MobileNet model on real frames, against LiteRT's reference kernels
/// (fixtures-generated/detect, made by scripts/make_litert_fixtures.py).
@Suite struct DetectModelTests {
    static let folder = Fixtures.generated.appendingPathComponent("detect")
    static let inputs = Fixtures.folders(folder.appendingPathComponent("inputs")).map { String($0.dropLast(4)) }

    /// One interpreter for all inputs, keeping the two predictor tensors readable.
    static func interpreter() throws -> Interpreter {
        let model = try Model(contentsOf: Fixtures.detectModel)
        let predictors = Set(try ["Squeeze", "convert_scores"].map { name in
            try #require(model.subgraph.tensors.firstIndex { $0.name == name })
        })
        return try Interpreter(model: model, options: .init(backend: .reference, preservedTensors: .tensors(predictors)))
    }

    @Test func atLeastTwentyRealInputs() {
        #expect(Self.inputs.count >= 20, "run scripts/make_litert_fixtures.py to create \(Self.folder.path)")
    }

    @Test func predictorsAndDetectionsMatchLiteRTReference() throws {
        let interpreter = try Self.interpreter()
        for name in Self.inputs {
            let input = try Fixtures.npy(Self.folder.appendingPathComponent("inputs/\(name).npy"))
            try interpreter.copy(input.data, toInputAt: 0)
            try interpreter.invoke()
            let expected = Self.folder.appendingPathComponent("ref/\(name)")
            for predictor in ["Squeeze", "convert_scores"] {
                let actual = try interpreter.tensor(at: try interpreter.tensorIndex(named: predictor))
                let reference = try Fixtures.npy(expected.appendingPathComponent("\(predictor).npy"))
                let differing = zip(actual.data, reference.data).filter { $0 != $1 }.count
                #expect(actual.data.count == reference.data.count && differing == 0, "\(name) \(predictor): \(differing) uint8 values differ")
            }
            let count = Int(try interpreter.output(at: 3).values(as: Float.self)[0])
            let referenceCount = Int(try Fixtures.npy(expected.appendingPathComponent("TFLite_Detection_PostProcess_3.npy")).values(as: Float.self)[0])
            #expect(count == referenceCount, "\(name): \(count) detections, LiteRT \(referenceCount)")
            for (output, file) in [(1, "TFLite_Detection_PostProcess_1"), (2, "TFLite_Detection_PostProcess_2")] {
                let actual = try interpreter.output(at: output).values(as: Float.self).prefix(count)
                let reference = try Fixtures.npy(expected.appendingPathComponent("\(file).npy")).values(as: Float.self).prefix(count)
                #expect(Array(actual) == Array(reference), "\(name) output \(output) differs")
            }
            let boxes = Array(try interpreter.output(at: 0).values(as: Float.self).prefix(count * 4))
            let referenceBoxes = Array(try Fixtures.npy(expected.appendingPathComponent("TFLite_Detection_PostProcess.npy")).values(as: Float.self).prefix(count * 4))
            let worst = zip(boxes, referenceBoxes).map { abs($0 - $1) }.max() ?? 0
            #expect(boxes.count == referenceBoxes.count && worst <= 1e-5, "\(name) boxes differ by \(worst)")
        }
    }

    @Test func secondInvokeOnSameInputGivesSameOutputs() throws {
        let interpreter = try Self.interpreter()
        let name = try #require(Self.inputs.first)
        try interpreter.copy(try Fixtures.npy(Self.folder.appendingPathComponent("inputs/\(name).npy")).data, toInputAt: 0)
        try interpreter.invoke()
        let first = try (0..<4).map { try interpreter.output(at: $0).data }
        try interpreter.invoke()
        #expect(try (0..<4).map { try interpreter.output(at: $0).data } == first)
    }
}
