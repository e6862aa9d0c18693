import ArgumentParser
import Foundation
import Inference
import TFLiteFormat

struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Time invoke() of a model: loads once, warms up, prints min / median / p90 in ms.",
        discussion: """
            The input is the given .npy file, or a fixed pseudo-random pattern. Only invoke() is timed.

            Examples:
              spotter bench detect.tflite --threads 1 --runs 200
              spotter bench detect.tflite --backend reference --runs 5 --json
              spotter bench face_detection_short_range.tflite --precision bfloat16
            """)

    @Argument(help: "A .tflite file, a catalog name (see `spotter models list`) or an http(s) URL.")
    var model: String

    @OptionGroup var store: StoreFlags

    @Option(parsing: .unconditional, help: "Threads for the backend (default: the cores this process may use; at most that many).")
    var threads: Int?

    @Option(parsing: .unconditional, help: "Timed runs.")
    var runs = 100

    @Option(parsing: .unconditional, help: "Untimed runs first.")
    var warmup = 10

    @Option(help: "Kernels: \(Interpreter.Options.Backend.allCases.map(\.rawValue).joined(separator: ", ")).")
    var backend: Interpreter.Options.Backend = .xnnpack

    @Option(help: Interpreter.Options.FloatPrecision.help)
    var precision: Interpreter.Options.FloatPrecision = .float32

    @Option(help: "An .npy file for the first input (default: a fixed pattern).")
    var input: String?

    @Flag(help: "Print one JSON object with min_ms, median_ms, p90_ms, threads, backend, precision, runs.")
    var json = false

    @Flag(help: "Also time every operator and print the slowest ones.")
    var profile = false

    @Option(help: "With --profile, how many of the slowest operators to print.")
    var slowest = 8

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard warmup >= 0 else { throw ValidationError("--warmup cannot be negative") }
        guard slowest >= 0 else { throw ValidationError("--slowest cannot be negative") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
    }

    func run() throws {
        let loaded = try loadModel(model, store: store)
        var options = Interpreter.Options(threadCount: threadsWithinCores(threads), backend: backend)
        options.floatPrecision = precision
        let interpreter = try Interpreter(model: loaded, options: options)
        let threadCount = interpreter.threadCount
        if let input {
            try interpreter.copy(try NumPy.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: input))), name: input).data, toInputAt: 0)
        } else {
            try interpreter.withInput(at: 0) { buffer in
                for i in buffer.indices { buffer[i] = UInt8(truncatingIfNeeded: (i &* 2_654_435_761) >> 13) }
            }
        }
        for _ in 0..<warmup { try interpreter.invoke() }
        var times: [Double] = []
        times.reserveCapacity(runs)
        let clock = ContinuousClock()
        for _ in 0..<runs {
            let elapsed = try clock.measure { try interpreter.invoke() }
            times.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
        }
        times.sort()
        if profile {
            let timings = try interpreter.profile(runs: runs)
            let total = timings.reduce(0) { $0 + $1.medianMilliseconds }
            var byType: [String: Double] = [:]
            for t in timings { byType["\(t.name) (\(t.backend))", default: 0] += t.medianMilliseconds }
            print("per operator type (median of \(runs) runs, summed):")
            for (name, ms) in byType.sorted(by: { $0.value > $1.value }) {
                print("  " + name.padding(toLength: 44, withPad: " ", startingAt: 0) + String(format: "%8.3f ms %6.1f%%", ms, 100 * ms / total))
            }
            print("slowest \(min(slowest, timings.count)) operators:")
            for t in timings.sorted(by: { $0.medianMilliseconds > $1.medianMilliseconds }).prefix(slowest) {
                print(String(format: "  op %3d ", t.index) + t.name.padding(toLength: 36, withPad: " ", startingAt: 0) + String(format: "%8.3f ms", t.medianMilliseconds))
            }
        }
        let median = times.count % 2 == 1 ? times[times.count / 2] : (times[times.count / 2 - 1] + times[times.count / 2]) / 2
        let p90 = times[min(times.count - 1, Int((Double(times.count) * 0.9).rounded(.up)) - 1)]
        if json {
            let object: [String: Any] = [
                "min_ms": times[0], "median_ms": median, "p90_ms": p90, "threads": threadCount,
                "backend": backend.rawValue, "precision": precision.rawValue, "runs": runs, "warmup": warmup, "model": model,
            ]
            print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
        } else {
            print(String(format: "%@ backend=%@ threads=%d runs=%d: min %.2f  median %.2f  p90 %.2f ms",
                         model, backend.rawValue, threadCount, runs, times[0], median, p90))
        }
    }
}
