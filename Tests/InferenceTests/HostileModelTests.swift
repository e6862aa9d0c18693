import Foundation
import Inference
import Testing
import TestSupport
import TFLiteFormat

/// Model files shaped like the mutants that trapped or hung the reader (made by
/// `scripts/make_op_fixtures.py`; `scripts/check_model_mutants.py` finds more in mutated real models).
@Suite struct HostileModelTests {
    static func model(_ name: String) throws -> Model {
        try Model(contentsOf: Fixtures.committed.appendingPathComponent("invalid/\(name).tflite"))
    }

    @Test func zeroPointOutsideItsTypeIsAReadError() throws {
        #expect(throws: ModelFormatError.invalidQuantization(tensor: "t0", reason: "zero point -2147483649 is outside 0...255, the range of uint8")) {
            try Self.model("zero_point_outside_int32")
        }
    }

    @Test(arguments: [
        ("required_input_absent", InterpreterError.invalidOperator(name: "CONV_2D", index: 0, reason: "input 1 is absent (-1) but required")),
        ("reshape_reads_own_output", .invalidOperator(name: "RESHAPE", index: 1, reason: "reads its own output \"t2\" (tensor 2)")),
        ("split_without_axis", .invalidOperator(name: "SPLIT", index: 0, reason: "has 1 inputs, expects 2")),
        ("operators_in_a_cycle", .invalidOperator(name: "RELU", index: 0,
                                                   reason: "reads \"t2\" (tensor 2) before any operator writes it (operators must run in order)")),
    ])
    func brokenGraphIsNamedBeforeAnyKernelReadsIt(name: String, expected: InterpreterError) throws {
        let model = try Self.model(name)
        #expect(throws: expected) { try Interpreter.check(model) }
        for backend in Interpreter.Options.Backend.allCases {
            #expect(throws: expected) { try Interpreter(model: model, options: .init(threadCount: 1, backend: backend)) }
        }
        let report = ModelReport(model: model)
        #expect(!report.runnable && report.problem == expected.description, "\(report.problem ?? "")")
    }

    /// Requantization tables whose values overflow Int32 saturate instead of trapping; the values
    /// clamp to the type's range as TFLite's do. XNNPACK may refuse such scales itself (its sigmoid
    /// does): that is a clean error too.
    @Test(arguments: ["concatenation_extreme_scales", "logistic_extreme_scales"])
    func extremeScalesLoadAndRunOrAreRefusedCleanly(name: String) throws {
        let model = try Self.model(name)
        for backend in Interpreter.Options.Backend.allCases {
            let interpreter: Interpreter
            do {
                interpreter = try Interpreter(model: model, options: .init(threadCount: 1, backend: backend))
            } catch InterpreterError.backendFailed(let library, _, _, _) where backend == .xnnpack && library == "xnnpack" {
                continue
            }
            for input in 0..<interpreter.inputCount {
                try interpreter.withInput(at: input) { bytes in
                    for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i * 97 + 3) }
                }
            }
            try interpreter.invoke()
            let output = try interpreter.output(at: 0).values(as: UInt8.self)
            #expect(output.count == 4)
        }
    }

    /// Inputs the fuzzer found asking for gigabytes while preparing: a MAX_POOL_2D whose window is
    /// 15,728,643 wide (XNNPACK's indirection buffer, 1.1 GB) and a SUM over 489,554,040 elements
    /// (its index table, 1.9 GB). Each is refused before any memory is spent, on both backends.
    @Test(arguments: [("fuzz_pooling_window_beyond_input.tflite", "15728643x3"), ("fuzz_mean_over_billions.tflite", "489554040 elements")],
          Interpreter.Options.Backend.allCases)
    func preparationThatWouldTakeGigabytesIsRefused(fixture: (name: String, reason: String), backend: Interpreter.Options.Backend) throws {
        let model = try Model(contentsOf: Fixtures.committed.appendingPathComponent("invalid/\(fixture.name)"))
        do {
            _ = try Interpreter(model: model, options: .init(threadCount: 1, backend: backend))
            Issue.record("\(fixture.name) was accepted")
        } catch let error as InterpreterError {
            #expect("\(error)".contains(fixture.reason), "\(error)")
        }
    }

    /// Inputs of a few bytes whose broadcast is 2^28 elements (an ADD, and BATCH_MATMUL's batch
    /// dimensions): their offset tables would take 2 GiB. Checking (what `inspect` and a server do
    /// with a stranger's model) refuses them as preparing does, by their size, before any table is
    /// allocated, so a model checked as runnable also prepares.
    @Test(arguments: ["add_broadcast_bomb", "batch_matmul_broadcast_bomb"])
    func broadcastTablesAreBoundedBeforeTheyAreAllocated(name: String) throws {
        let model = try Self.model(name)
        let reason = "broadcast to more than the \(1 << 26) elements"
        do {
            _ = try Interpreter.check(model)
            Issue.record("\(name) passed the check")
        } catch let error as InterpreterError {
            #expect("\(error)".contains(reason), "\(error)")
        }
        for backend in Interpreter.Options.Backend.allCases {
            do {
                _ = try Interpreter(model: model, options: .init(threadCount: 1, backend: backend))
                Issue.record("\(name) was prepared on \(backend)")
            } catch let error as InterpreterError {
                #expect("\(error)".contains(reason), "\(error)")
            }
        }
        #expect(!ModelReport(model: model).runnable)
    }

    /// Every hostile fixture (the ones above, and inputs the fuzzer found: `fuzz_*`) reads, checks
    /// and prepares on both backends, or throws; none traps.
    @Test func everyHostileFixtureLoadsOrThrows() throws {
        let folder = Fixtures.committed.appendingPathComponent("invalid")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".tflite") }.sorted()
        #expect(names.count >= 14)
        for name in names {
            guard let model = try? Model(contentsOf: folder.appendingPathComponent(name)) else { continue }
            _ = ModelReport(model: model)
            _ = try? Interpreter.check(model)
            for backend in Interpreter.Options.Backend.allCases {
                _ = try? Interpreter(model: model, options: .init(threadCount: 1, backend: backend, maxArenaBytes: 256 << 20))
            }
        }
    }
}
