import ArgumentParser
import Detection
import Foundation
import Imaging
import Media
import Rectangles

/// The detector's options as flags (shared by `rectangles` and `video --rectangles`).
struct RectangleFlags: ParsableArguments {
    @Option(parsing: .unconditional, help: "Least shorter/longer side ratio, 0...1 (mean lengths of opposite sides as displayed).")
    var minimumAspectRatio: Double = 0.5

    @Option(parsing: .unconditional, help: "Greatest shorter/longer side ratio, 0...1.")
    var maximumAspectRatio: Double = 1.0

    @Option(parsing: .unconditional, help: "Greatest deviation of a corner angle from 90 degrees, 0...45 (tilted pages need 40 or so).")
    var quadratureTolerance: Double = 30

    @Option(parsing: .unconditional, help: "Least length of the shorter sides, as a fraction of the picture's shorter side.")
    var minimumSize: Double = 0.2

    @Option(parsing: .unconditional, help: "Least confidence, 0...1 (fraction of the outline with a matching edge).")
    var minimumConfidence: Double = 0

    @Option(parsing: .unconditional, help: "Most rectangles per picture, strongest first; 0 for all.")
    var maximumObservations: Int = 1

    /// The options; `retriesAtFinerScale` for still pictures (a second, slower look where the first
    /// finds nothing or only a weak outline), not for video frames, whose time should stay steady.
    func options(retriesAtFinerScale: Bool) -> RectangleDetector.Options {
        .init(minimumAspectRatio: minimumAspectRatio, maximumAspectRatio: maximumAspectRatio, quadratureTolerance: quadratureTolerance,
              minimumSize: minimumSize, minimumConfidence: minimumConfidence, maximumObservations: maximumObservations,
              retriesAtFinerScale: retriesAtFinerScale)
    }

    func validate() throws {
        do { _ = try RectangleDetector(options: options(retriesAtFinerScale: false)) } catch { throw ValidationError("\(error)") }
    }

    func makeDetector(retriesAtFinerScale: Bool) throws -> RectangleDetector {
        try RectangleDetector(options: options(retriesAtFinerScale: retriesAtFinerScale))
    }
}

struct RectanglesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rectangles",
        abstract: "Find rectangles (pages, cards, screens, signs) in pictures and print their corners.",
        discussion: """
            The options and defaults are Apple Vision's VNDetectRectanglesRequest's. Corners are in pixels \
            of the picture as displayed (EXIF orientation applied; the picture spans 0...width), clockwise \
            from the corner nearest the top-left: top-left, top-right, bottom-right, bottom-left.

            With --json, one object per picture per line: {"image", "width", "height", "milliseconds", \
            "rectangles": [{"corners": [[x, y] x4], "normalized": [[x, y] x4], "box": {"xmin", "ymin", \
            "xmax", "ymax"}, "confidence"}]}, strongest first; "milliseconds" is the detection time \
            without decoding.

            Examples:
              spotter rectangles receipt.jpg
              spotter rectangles scans/ --maximum-observations 0 --save-dir outlined/
              spotter rectangles page.jpg --quadrature-tolerance 40 --rectify flat/
              spotter rectangles photos/ --json > rectangles.jsonl
            """)

    @Argument(help: "Pictures or directories of pictures.")
    var inputs: [String]

    @OptionGroup var flags: RectangleFlags

    @Flag(help: "Print one JSON object per picture per line.")
    var json = false

    @Option(help: "Write copies with the rectangles outlined here (folders of the inputs kept; never over an input).")
    var saveDir: String?

    @Option(help: "Write each rectangle's perspective-corrected content here, as NAME-1.png, NAME-2.png...")
    var rectify: String?

    @Flag(help: "Also search the folders inside input folders.")
    var recursive = false

    @Flag(inversion: .prefixedNo, help: "Where nothing or only a weak outline is found, look once more at a finer scale (4-6 times slower on those pictures).")
    var finerRetry = true

    func run() throws {
        let detector = try flags.makeDetector(retriesAtFinerScale: finerRetry)
        let found = expand(inputs, recursive: recursive, skipping: saveDir ?? rectify)
        for missing in found.missing { FileHandle.standardError.write(Data("\(missing): no such file or folder\n".utf8)) }
        guard !found.files.isEmpty else { throw CommandFailure("no pictures found in \(inputs.joined(separator: " "))") }
        let outlined = saveDir.map { annotatedPaths(for: found.files, in: $0) } ?? [:]
        let flattened = rectify.map { annotatedPaths(for: found.files, in: $0) } ?? [:]
        for (flag, folder) in [("--save-dir", saveDir), ("--rectify", rectify)] {
            guard let folder else { continue }
            do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
                throw CommandFailure("\(flag) \(folder): \(error.localizedDescription)")
            }
        }
        let progress = ProgressBar(total: found.files.count, enabled: found.files.count > 3 && !json)
        var failures = found.missing.count
        for (index, file) in found.files.map(\.path).enumerated() {
            progress.update(index, note: URL(fileURLWithPath: file).lastPathComponent)
            do {
                let decoded = try ImageFile.decode(file)
                let started = DispatchTime.now().uptimeNanoseconds
                let rectangles = detector.detect(in: decoded.stored, orientation: decoded.orientation)
                let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
                let size = decoded.orientation.uprightSize(decoded.stored.size)
                progress.print(json ? Self.json(file, size: size, rectangles, milliseconds: milliseconds) : Self.table(file, size: size, rectangles))
                guard outlined[file] != nil || flattened[file] != nil else { continue }
                var picture = decoded.upright
                if let target = flattened[file] {
                    let stem = URL(fileURLWithPath: target).deletingPathExtension().path
                    for (number, rectangle) in rectangles.enumerated() {
                        try ImageFile.write(rectangle.rectified(from: picture), to: "\(stem)-\(number + 1).png")
                    }
                }
                if let target = outlined[file] {
                    picture.outline(rectangles)
                    try FileManager.default.createDirectory(atPath: URL(fileURLWithPath: target).deletingLastPathComponent().path,
                                                            withIntermediateDirectories: true)
                    try ImageFile.write(picture, to: target)
                }
            } catch {
                failures += 1
                progress.error("\(file): \(error)")
            }
        }
        progress.finish()
        if failures > 0 {
            throw CommandFailure("\(failures) of \(found.files.count + found.missing.count) inputs could not be processed (see above)")
        }
    }

    /// One picture's rectangles as `rectangles --json` prints them.
    struct PictureRectangles: Encodable {
        let image: String
        let width, height: Int
        let milliseconds: Double
        let rectangles: [RectangleObservation]
    }

    static func json(_ file: String, size: Size, _ rectangles: [RectangleObservation], milliseconds: Double) -> String {
        ResultEncoding.encode(PictureRectangles(image: file, width: size.width, height: size.height,
                                                milliseconds: (milliseconds * 1000).rounded() / 1000, rectangles: rectangles))
    }

    static func table(_ file: String, size: Size, _ rectangles: [RectangleObservation]) -> String {
        var lines = ["\(file) (\(size.width)x\(size.height)), \(rectangles.count) rectangle\(rectangles.count == 1 ? "" : "s")"]
        for r in rectangles {
            let corners = r.corners.map { String(format: "(%.1f, %.1f)", $0.x, $0.y) }.joined(separator: " ")
            lines.append(String(format: "  %.3f  ", r.confidence) + corners)
        }
        return lines.joined(separator: "\n")
    }
}
