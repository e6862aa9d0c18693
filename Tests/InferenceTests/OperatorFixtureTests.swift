import Foundation
import Inference
import Testing
import TestSupport
import TFLiteFormat

/// Every reference kernel against LiteRT's BUILTIN_REF outputs on small single-op models
/// (Tests/Fixtures/ops, made by scripts/make_op_fixtures.py).
@Suite struct OperatorFixtureTests {
    static let folder = Fixtures.committed.appendingPathComponent("ops")
    static let cases = Fixtures.folders(folder)

    @Test func fixturesArePresent() {
        #expect(Self.cases.count >= 70, "expected the committed op fixtures in \(Self.folder.path)")
    }

    @Test("reference kernel matches LiteRT", arguments: cases)
    func referenceKernelMatchesLiteRT(_ name: String) throws {
        let dir = Self.folder.appendingPathComponent(name)
        let model = try Model(contentsOf: dir.appendingPathComponent("model.tflite"))
        let interpreter = try Interpreter(model: model, options: .init(backend: .reference))
        for index in 0..<interpreter.inputCount {
            try interpreter.copy(try Fixtures.npy(dir.appendingPathComponent("input\(index).npy")).data, toInputAt: index)
        }
        try interpreter.invoke()
        for index in 0..<interpreter.outputCount {
            let expected = try Fixtures.npy(dir.appendingPathComponent("output\(index).npy"))
            let actual = try interpreter.output(at: index)
            #expect(actual.shape.reduce(1, *) == expected.shape.reduce(1, *), "\(name) output \(index) shape \(actual.shape) vs \(expected.shape)")
            if actual.type == .float32 {
                expectClose(actual.values(as: Float.self), expected.values(as: Float.self), relative: 1e-5, "\(name) output \(index)")
            } else {
                let mismatches = zip(actual.data, expected.data).enumerated().filter { $1.0 != $1.1 }
                #expect(mismatches.isEmpty, "\(name) output \(index): \(mismatches.count) of \(actual.data.count) bytes differ, first at \(mismatches.first?.offset ?? -1)")
            }
        }
    }
}
