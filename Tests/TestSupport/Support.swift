import Foundation
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

    /// Subdirectory names of `url`, sorted.
    public static func folders(_ url: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }
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
