import Foundation
import Inference
import Testing
import TestSupport
import TFLiteFormat

@Suite struct InterpreterTests {
    @Test func sparseConstantIsReadAndReportedAsUnsupported() throws {
        let model = try Model(contentsOf: Fixtures.committed.appendingPathComponent("invalid/sparse_constant.tflite"))
        #expect(model.subgraph.tensors[1].isSparse)
        let report = ModelReport(model: model)
        #expect(!report.runnable && (report.problem ?? "").contains("sparse"), "\(report.problem ?? "")")
        #expect(throws: InterpreterError.sparseTensor(name: "t1")) { try Interpreter(model: model, options: .init(backend: .xnnpack)) }
    }

    /// What `inspect` calls runnable runs on both backends: every shared model and every fixture.
    /// What it calls not runnable for an operator's sake says so on that operator's line (never
    /// "supported" for every operator and then "runnable: no").
    @Test func everyModelInspectCallsRunnableRunsOnBothBackends() throws {
        var paths = try Fixtures.sharedModels()
        paths += Fixtures.folders(Fixtures.committed.appendingPathComponent("ops")).map {
            Fixtures.committed.appendingPathComponent("ops/\($0)/model.tflite")
        }
        let invalid = Fixtures.committed.appendingPathComponent("invalid")
        paths += try FileManager.default.contentsOfDirectory(atPath: invalid.path).filter { $0.hasSuffix(".tflite") }.sorted()
            .map { invalid.appendingPathComponent($0) }
        var runnable = 0
        for path in paths {
            guard let model = try? Model(contentsOf: path) else { continue }
            let report = ModelReport(model: model)
            guard report.runnable else {
                let problem = report.problem ?? ""
                if problem.hasPrefix("operator ") {
                    let line = report.operators.first { $0.problem != nil }
                    #expect(line.map { !$0.supported && problem.contains($0.name) } ?? false,
                            "\(path.lastPathComponent): \(problem) is on no operator's line: \(report.operators.map { "\($0.name) \($0.supported)" })")
                }
                continue
            }
            runnable += 1
            for backend in Interpreter.Options.Backend.allCases {
                let interpreter = try Interpreter(model: model, options: .init(threadCount: 2, backend: backend))
                try interpreter.invoke()
            }
        }
        #expect(runnable >= 95, "\(runnable) runnable models")
    }

    @Test func unsupportedOperatorIsNamedWithIndexAndTypesAtLoad() throws {
        let model = try Model(contentsOf: Fixtures.committed.appendingPathComponent("invalid/unsupported_sin.tflite"))
        #expect(throws: InterpreterError.unsupportedOperator(name: "SIN", index: 0, inputTypes: ["float32"], outputTypes: ["float32"])) {
            try Interpreter(model: model)
        }
    }

    @Test func arenaReusesMemoryOfDeadIntermediates() throws {
        let model = try Model(contentsOf: Fixtures.detectModel)
        let interpreter = try Interpreter(model: model)
        let graph = model.subgraph
        let total = graph.tensors.indices.filter { !graph.tensors[$0].isConstant }.reduce(0) { sum, index in
            sum + interpreter.shape(ofTensor: index).reduce(1, *) * (graph.tensors[index].type.byteSize ?? 0)
        }
        #expect(interpreter.arenaByteCount < total / 2, "arena \(interpreter.arenaByteCount) bytes for \(total) bytes of tensors")
    }

    @Test func intermediateTensorIsReadableOnlyWhenPreserved() throws {
        let model = try Model(contentsOf: Fixtures.detectModel)
        let squeeze = try #require(model.subgraph.tensors.firstIndex { $0.name == "Squeeze" })
        #expect(throws: InterpreterError.tensorNotPreserved(name: "Squeeze")) {
            try Interpreter(model: model).tensor(at: squeeze)
        }
        let preserved = try Interpreter(model: model, options: .init(preservedTensors: .tensors([squeeze])))
        #expect(try preserved.tensor(at: squeeze).shape == [1, 1917, 4])
    }

    /// Asked for, kept: with every tensor preserved, every tensor of every shared model reads back
    /// after a run on both backends (fused kernels that skip writing an intermediate, or fold a PAD
    /// into their reads, stand down for a tensor someone reads).
    @Test func everyTensorOfEverySharedModelReadsBackWhenAllArePreserved() throws {
        let paths = try Fixtures.sharedModels()
        #expect(!paths.isEmpty)
        for path in paths {
            let model = try Model(contentsOf: path)
            for backend in Interpreter.Options.Backend.allCases {
                let interpreter = try Interpreter(model: model, options: .init(backend: backend, preservedTensors: .all))
                try interpreter.invoke()
                for index in model.subgraph.tensors.indices {
                    let tensor = try interpreter.tensor(at: index)
                    #expect(tensor.data.count == interpreter.shape(ofTensor: index).reduce(1, *) * (tensor.type.byteSize ?? 0),
                            "\(path.lastPathComponent) \(backend): tensor \(index) \(tensor.name)")
                }
            }
        }
    }

    @Test func postProcessOutputsGetShapesFromOptions() throws {
        let interpreter = try Interpreter(model: try Model(contentsOf: Fixtures.detectModel))
        #expect(try (0..<4).map { try interpreter.output(at: $0).shape } == [[1, 10, 4], [1, 10], [1, 10], [1]])
    }

    @Test func inputOfWrongSizeIsRejected() throws {
        let interpreter = try Interpreter(model: try Model(contentsOf: Fixtures.detectModel))
        #expect(throws: InterpreterError.inputSizeMismatch(input: 0, expected: 270_000, actual: 3)) {
            try interpreter.copy([1, 2, 3], toInputAt: 0)
        }
    }

    @Test func arenaLimitRefusesOversizedGraphs() throws {
        let model = try Model(contentsOf: Fixtures.detectModel)
        #expect(throws: InterpreterError.self) { try Interpreter(model: model, options: .init(maxArenaBytes: 1000)) }
    }

    @Test func numpyFilesWrittenByNumPyDecodeWithTheirShapeAndType() throws {
        let tensor = try Fixtures.npy(Fixtures.committed.appendingPathComponent("ops/conv2d_int8_same_s2_relu6/input0.npy"))
        #expect(tensor.type == .int8)
        #expect(tensor.shape == [1, 9, 9, 3])
        let again = try NumPy.decode(NumPy.encode(tensor), name: "roundtrip")
        #expect(again.shape == tensor.shape && again.data == tensor.data && again.type == tensor.type)
    }
}
