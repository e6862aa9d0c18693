import ArgumentParser
import Detection
import Foundation
import Inference
import TFLiteFormat

struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Describe a .tflite model: tensors, operators, metadata, and whether Spotter can run it.",
        discussion: """
            Examples:
              spotter inspect detect.tflite
              spotter inspect detect.tflite --json | jq .operators
              spotter inspect detect.tflite --tensors
            """)

    @Argument(help: "A .tflite file, a catalog name (see `spotter models list`) or an http(s) URL.")
    var model: String

    @OptionGroup var store: StoreFlags

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    @Flag(help: "Also list every tensor (index, name, shape, type): the names `spotter run --tensor` takes.")
    var tensors = false

    func run() throws {
        let path = try modelPath(model, store: store)
        let loaded = try loadModel(path, store: store)
        var report = ModelReport(model: loaded)
        if report.runnable, report.detectionLayout != nil, let detector = try? ObjectDetector(modelPath: path) {
            report.inputScaling = detector.inputScaling
            report.detectionLayout = detector.layoutDescription
            // The detector has a default for this family: no flags needed.
            report.advice.removeAll { $0.hasPrefix("the float input has no normalization metadata") }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
            return
        }
        print("model: \(model)")
        print("schema version \(report.version)\(report.description.map { ", \"\($0)\"" } ?? "")")
        if let name = report.metadata.name { print("metadata: \(name) \(report.metadata.version ?? "")") }
        if let version = report.metadata.minRuntimeVersion { print("min runtime version: \(version)") }
        if let labels = report.metadata.labelCount {
            print("labels: \(labels) embedded")
        } else if let file = ["labelmap.txt", "labels.txt", "dict.txt"].lazy
                    .map({ URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent($0).path })
                    .first(where: { FileManager.default.fileExists(atPath: $0) }) {
            let count = ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").count
            print("labels: none embedded; \(file) beside the model (\(count) lines) is used")
        } else {
            print("labels: none embedded or beside the model (pass --labels FILE when detecting)")
        }
        if let scaling = report.inputScaling {
            print("input scaling: \(scaling)")
        } else if let mean = report.metadata.normalizationMean, let std = report.metadata.normalizationStd {
            print("normalization: mean \(mean), std \(std)")
        }
        func line(_ t: ModelReport.TensorSummary) -> String {
            var text = "  [\(t.index)] \(t.name) \(t.shape) \(t.type)"
            if let scale = t.scale, let zero = t.zeroPoint {
                text += scale.count == 1 ? " scale \(scale[0]) zero point \(zero[0])" : " per-channel (\(scale.count) scales)"
            }
            return text
        }
        print("inputs:")
        report.inputs.forEach { print(line($0)) }
        print("outputs:")
        report.outputs.forEach { print(line($0)) }
        print("operators:")
        for op in report.operators {
            print("  \(op.name.padding(toLength: 30, withPad: " ", startingAt: 0)) \(String(op.count).padding(toLength: 4, withPad: " ", startingAt: 0)) \(op.problem.map { "CANNOT RUN: \($0)" } ?? (op.supported ? "supported" : "NOT SUPPORTED"))")
        }
        if tensors {
            print("tensors:")
            for (index, tensor) in loaded.subgraph.tensors.enumerated() {
                print("  [\(index)] \(tensor.name) \(tensor.shape) \(tensor.type)\(tensor.isConstant ? " constant" : "")")
            }
        }
        print("runnable: \(report.runnable ? "yes" : "no")")
        print("detection layout: \(report.detectionLayout ?? "not recognized")")
        for advice in report.advice { print("note: \(advice)") }
    }
}

/// The file of a model given as a file, catalog name or URL (resolved through the store).
func modelPath(_ reference: String, store: StoreFlags) throws -> String {
    if reference.contains("://") || !(FileManager.default.fileExists(atPath: reference) || reference.contains("/") || reference.hasSuffix(".tflite")) {
        return try store.resolve(reference).path
    }
    return reference
}

/// Loads a model file, catalog name or URL (through the store), turning file and format errors
/// into one line that says what to do.
func loadModel(_ reference: String, store: StoreFlags) throws -> Model {
    let path = try modelPath(reference, store: store)
    guard FileManager.default.fileExists(atPath: path) else {
        throw CommandFailure("no model at \(path): check the path")
    }
    do {
        return try Model(contentsOf: URL(fileURLWithPath: path))
    } catch let error as ModelFormatError {
        throw CommandFailure("cannot read \(path): \(error)")
    }
}
