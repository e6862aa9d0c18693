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
            try expectDetectOutputsEqual(interpreter, to: Self.folder.appendingPathComponent("ref/\(name)"), name)
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
