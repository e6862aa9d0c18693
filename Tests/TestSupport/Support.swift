import Foundation
import Imaging
import Inference
import Testing

/// Paths to the fixtures tests read: committed ones, generated ones and ../shared.
public enum Fixtures {
    /// The repository root (three levels above this file).
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let shared = root.deletingLastPathComponent().appendingPathComponent("shared")
    public static let detectModel = shared.appendingPathComponent("models/coco-ssd-mobilenet-v1/detect.tflite")
    public static let committed = root.appendingPathComponent("Tests/Fixtures")
    /// Made by scripts/make_litert_fixtures.py (the test command runs it first).
    public static let generated = root.appendingPathComponent("fixtures-generated")

    public static func bytes(_ url: URL) throws -> [UInt8] { [UInt8](try Data(contentsOf: url)) }

    public static func npy(_ url: URL) throws -> Tensor { try NumPy.decode(try bytes(url), name: url.lastPathComponent) }

    /// The offset of the first occurrence of `pattern` in `bytes`.
    public static func find(_ pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard !pattern.isEmpty, bytes.count >= pattern.count else { return nil }
        for start in 0...(bytes.count - pattern.count) where bytes[start] == pattern[0] {
            if Array(bytes[start..<(start + pattern.count)]) == pattern { return start }
        }
        return nil
    }

    /// Every model file under ../shared/models, sorted by path.
    public static func sharedModels() throws -> [URL] {
        let folder = shared.appendingPathComponent("models")
        return try FileManager.default.subpathsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".tflite") }.sorted()
            .map { folder.appendingPathComponent($0) }
    }

    /// The face photos in ../shared/images/faces, by name without extension, sorted (the fixture
    /// scripts make LiteRT's outputs for each).
    public static func facePhotos() -> [String] {
        folders(shared.appendingPathComponent("images/faces")).map { URL(fileURLWithPath: $0).deletingPathExtension().lastPathComponent }
    }

    /// Entry names of `url` (subdirectories and files), sorted.
    public static func folders(_ url: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }
}

/// LiteRT's detections on the shared pictures: the outputs of its default XNNPACK path that
/// scripts/make_litert_fixtures.py saves for each picture it runs on (`images/NAME.png`). Tests that
/// need a picture with something on it take the picture and what is on it from here, not from
/// what ../shared/README.md says the pictures show.
public enum LiteRT {
    public struct Detection: Sendable, CustomStringConvertible {
        /// The model's class (0 is COCO's person in the shared SSD's label map).
        public let classIndex: Int
        public let score: Float
        /// In the picture's pixels, clipped to it.
        public let box: Rect
        public var description: String { "class \(classIndex) \(score) at \(box)" }
    }

    /// The shared pictures LiteRT ran on, by name without extension.
    public static let pictures = Fixtures.folders(Fixtures.generated.appendingPathComponent("detect/xnnpack"))
        .filter { FileManager.default.fileExists(atPath: picturePath($0)) }

    public static func picturePath(_ name: String) -> String { Fixtures.shared.appendingPathComponent("images/\(name).png").path }

    /// LiteRT's detections on picture `name` of `size`, strongest first.
    public static func detections(_ name: String, size: Size) throws -> [Detection] {
        let folder = Fixtures.generated.appendingPathComponent("detect/xnnpack/\(name)")
        func load(_ file: String) throws -> [Float] { try Fixtures.npy(folder.appendingPathComponent("\(file).npy")).values(as: Float.self) }
        let boxes = try load("TFLite_Detection_PostProcess"), classes = try load("TFLite_Detection_PostProcess_1")
        let scores = try load("TFLite_Detection_PostProcess_2"), count = Int(try load("TFLite_Detection_PostProcess_3")[0])
        let w = Double(size.width), h = Double(size.height)
        return (0..<count).map { i in
            let b = boxes[(4 * i)..<(4 * i + 4)].map(Double.init)  // ymin, xmin, ymax, xmax of the stretched input
            return Detection(classIndex: Int(classes[i]), score: scores[i],
                             box: Rect(minX: max(0, b[1] * w), minY: max(0, b[0] * h), maxX: min(w, b[3] * w), maxY: min(h, b[2] * h)))
        }.sorted { $0.score > $1.score }
    }

    /// Scores at least this far above the detector's 0.5 threshold are clear of it: a detection
    /// within 0.03 of it may fall either side in another runtime.
    public static let clearScore: Float = 0.53

    /// A shared picture's size, from its PNG header (the decoder applies no orientation to PNGs).
    public static func size(_ name: String) throws -> Size {
        struct NotPNG: Error, CustomStringConvertible { let description: String }
        let header = try Fixtures.bytes(URL(fileURLWithPath: picturePath(name))).prefix(24)
        guard header.count == 24, header.starts(with: [0x89, 0x50, 0x4E, 0x47]) else { throw NotPNG(description: "\(picturePath(name)) is not a PNG") }
        func word(_ at: Int) -> Int { header[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        return Size(width: word(16), height: word(20))
    }

    /// The shared picture whose top detection LiteRT is surest of (and clear of the threshold),
    /// for tests of one picture; nil when no picture has one.
    public static let surest: (name: String, size: Size, top: Detection)? = pictures.compactMap { name in
        guard let size = try? size(name), let top = try? detections(name, size: size).first, top.score >= clearScore else { return nil }
        return (name, size, top)
    }.max { $0.top.score < $1.top.score }
}

/// Expects `actual` to match `expected` within `relative` tolerance (absolute below 1).
public func expectClose(
    _ actual: [Float], _ expected: [Float], relative: Float, _ what: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(actual.count == expected.count, "\(what): \(actual.count) values, expected \(expected.count)", sourceLocation: sourceLocation)
    var worst: (index: Int, error: Float) = (0, 0)
    for (i, (a, e)) in zip(actual, expected).enumerated() {
        let error = abs(a - e) / max(1, abs(e))
        if error > worst.error || error.isNaN { worst = (i, error) }
    }
    #expect(worst.error <= relative, "\(what): element \(worst.index) off by \(worst.error) (relative)", sourceLocation: sourceLocation)
}

/// Expects the shared model's predictor tensors and post-processed outputs in `interpreter` to equal
/// LiteRT's, saved as .npy files in `folder` (boxes within 1e-5).
public func expectDetectOutputsEqual(
    _ interpreter: Interpreter, to folder: URL, _ name: String, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    func reference(_ file: String) throws -> Tensor { try Fixtures.npy(folder.appendingPathComponent("\(file).npy")) }
    for predictor in ["Squeeze", "convert_scores"] {
        let actual = try interpreter.tensor(at: try interpreter.tensorIndex(named: predictor)).data
        let expected = try reference(predictor).data
        let differing = zip(actual, expected).filter { $0 != $1 }.count
        #expect(actual.count == expected.count && differing == 0, "\(name) \(predictor): \(differing) values differ", sourceLocation: sourceLocation)
    }
    let count = Int(try interpreter.output(at: 3).values(as: Float.self)[0])
    let expectedCount = Int(try reference("TFLite_Detection_PostProcess_3").values(as: Float.self)[0])
    #expect(count == expectedCount, "\(name): \(count) detections, LiteRT \(expectedCount)", sourceLocation: sourceLocation)
    for (output, file) in [(1, "TFLite_Detection_PostProcess_1"), (2, "TFLite_Detection_PostProcess_2")] {
        let actual = try interpreter.output(at: output).values(as: Float.self).prefix(count)
        let expected = try reference(file).values(as: Float.self).prefix(count)
        #expect(Array(actual) == Array(expected), "\(name) output \(output) differs", sourceLocation: sourceLocation)
    }
    let boxes = try interpreter.output(at: 0).values(as: Float.self).prefix(count * 4)
    let expectedBoxes = try reference("TFLite_Detection_PostProcess").values(as: Float.self).prefix(count * 4)
    let worst = zip(boxes, expectedBoxes).map { abs($0 - $1) }.max() ?? 0
    #expect(boxes.count == expectedBoxes.count && worst <= 1e-5, "\(name) boxes differ by \(worst)", sourceLocation: sourceLocation)
}

/// Runs a program from PATH and returns its standard output; throws when it fails.
@discardableResult
public func run(_ program: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [program] + arguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    struct Failure: Error, CustomStringConvertible { let description: String }
    guard process.terminationStatus == 0 else { throw Failure(description: "\(program) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)") }
    return String(decoding: data, as: UTF8.self)
}
/// A finished program: its exit status and what it wrote.
public struct ProgramResult: Sendable {
    public var status: Int32
    public var output: String
    public var errors: String
}

/// A started program whose output goes to temporary files (no pipe to fill up).
public final class RunningProgram {
    let process = Process()
    let outputFile: URL
    let errorFile: URL

    /// Starts `executable` with `arguments`; `environment` entries are added to this process's
    /// environment (an empty value removes the variable).
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let stamp = UUID().uuidString.prefix(8)
        outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-out-\(stamp)")
        errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-err-\(stamp)")
        _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value.isEmpty ? nil : value }
        process.environment = merged
        process.standardOutput = try FileHandle(forWritingTo: outputFile)
        process.standardError = try FileHandle(forWritingTo: errorFile)
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }

    public func wait() -> ProgramResult {
        process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(at: outputFile)
            try? FileManager.default.removeItem(at: errorFile)
        }
        return ProgramResult(status: process.terminationStatus,
                             output: (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "",
                             errors: (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "")
    }
}

extension Fixtures {
    /// The release build of the CLI (scripts/test.sh builds it before the tests).
    public static let spotter = root.appendingPathComponent(".build/release/spotter").path

    /// Runs the CLI to the end.
    public static func runSpotter(_ arguments: [String], environment: [String: String] = [:]) throws -> ProgramResult {
        try RunningProgram(spotter, arguments, environment: environment).wait()
    }
}

/// Messages collected from several threads (failures seen off the test's own thread).
public final class MessageLog: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var stored: [String] = []

    public init() {}

    public func add(_ message: String) { lock.withLock { stored.append(message) } }
    public var messages: [String] { lock.withLock { stored } }
}
