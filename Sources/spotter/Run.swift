import ArgumentParser
import Foundation
import Inference
import TFLiteFormat

extension Interpreter.Options.Backend: ExpressibleByArgument {}
extension Interpreter.Options.FloatPrecision: ExpressibleByArgument {
    /// The help of every command's `--precision`.
    static let help = ArgumentHelp("""
        Float models' convolutions: float32 (outputs agree with LiteRT's) or bfloat16 (inputs and \
        weights rounded to 8 significant bits, up to twice as fast on CPUs with \
        AVX-512 BF16, as OpenVINO's default there; elsewhere float32). 8-bit models are unaffected.
        """)
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a model on NumPy inputs and write its outputs as .npy files.",
        discussion: """
            Inputs are fed in order; every output, and every tensor named with --tensor, is written to \
            the output directory as NAME.npy (characters other than letters, digits, '-', '_' and '.' \
            become '_').

            Examples:
              spotter run detect.tflite --input frame.npy --output-dir out/
              spotter run m.tflite --input f.npy --output-dir o/ --tensor Squeeze
            """)

    @Argument(help: "A .tflite file, a catalog name (see `spotter models list`) or an http(s) URL.")
    var model: String

    @OptionGroup var store: StoreFlags

    @Option(name: .customLong("input"), help: "An .npy file for the next model input (repeat for several inputs).")
    var inputs: [String] = []

    @Option(help: "Directory for the output .npy files (created if missing).")
    var outputDir: String

    @Option(name: .customLong("tensor"), help: "Also write this intermediate tensor (by name; repeatable).")
    var tensors: [String] = []

    @Option(help: "Kernels to run: \(Interpreter.Options.Backend.allCases.map(\.rawValue).joined(separator: ", ")).")
    var backend: Interpreter.Options.Backend = .reference

    @Option(parsing: .unconditional, help: "Threads for the backend (default: the cores this process may use; at most that many).")
    var threads: Int?

    func validate() throws {
        guard !inputs.isEmpty else { throw ValidationError("give at least one --input FILE.npy") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
    }

    func run() throws {
        let loaded = try loadModel(model, store: store)
        let indices = try tensors.map { name -> Int in
            guard let index = loaded.subgraph.tensors.firstIndex(where: { $0.name == name }) else {
                throw CommandFailure("the model has no tensor named \"\(name)\": see `spotter inspect \(model)`")
            }
            return index
        }
        var options = Interpreter.Options(backend: backend, preservedTensors: .tensors(Set(indices)))
        options.threadCount = threadsWithinCores(threads)
        let interpreter = try Interpreter(model: loaded, options: options)
        guard inputs.count == interpreter.inputCount else {
            throw CommandFailure("the model has \(interpreter.inputCount) inputs, \(inputs.count) given")
        }
        for (index, path) in inputs.enumerated() {
            let tensor = try NumPy.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), name: path)
            let expected = try interpreter.input(at: index)
            guard tensor.type == expected.type else {
                throw CommandFailure("\(path) holds \(tensor.type), input \(index) (\(expected.name)) needs \(expected.type)")
            }
            guard tensor.elementCount == expected.elementCount else {
                throw CommandFailure("\(path) has shape \(tensor.shape), input \(index) (\(expected.name)) needs \(expected.shape)")
            }
            try interpreter.copy(tensor.data, toInputAt: index)
        }
        try interpreter.invoke()
        let directory = URL(fileURLWithPath: outputDir)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var written: [Tensor] = try (0..<interpreter.outputCount).map { try interpreter.output(at: $0) }
        written += try indices.map { try interpreter.tensor(at: $0) }
        for tensor in written {
            let file = directory.appendingPathComponent(fileName(for: tensor.name))
            try Data(NumPy.encode(tensor)).write(to: file)
            print(file.path)
        }
    }

    func fileName(for name: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        return String(name.map { allowed.contains($0) ? $0 : "_" }) + ".npy"
    }
}
