import Foundation
import Testing
import TestSupport

/// The command line never writes over an input and never leaves a half-written file under an
/// output's name.
@Suite struct FileSafetyTests {
    static let model = Fixtures.detectModel.path

    static func folder(_ name: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Copies the shared picture `name` (``LiteRT/pictures``) to `url`.
    static func copy(_ name: String, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: URL(fileURLWithPath: LiteRT.picturePath(name)), to: url)
    }

    @Test func sameNamesInTwoFoldersGetTwoAnnotatedCopies() throws {
        let root = try Self.folder("names")
        defer { try? FileManager.default.removeItem(at: root) }
        // Two shared pictures of different sizes, so that each copy is known by its size.
        let first = try #require(LiteRT.pictures.first, "no shared pictures")
        let second = try #require(LiteRT.pictures.first { (try? LiteRT.size($0)) != (try? LiteRT.size(first)) },
                                  "two shared pictures of different sizes among \(LiteRT.pictures)")
        try Self.copy(first, to: root.appendingPathComponent("d1/x.png"))
        try Self.copy(second, to: root.appendingPathComponent("d2/x.png"))
        try Self.copy(first, to: root.appendingPathComponent("d1/sub/c.png"))
        let out = root.appendingPathComponent("out")
        let result = try Fixtures.runSpotter(["detect", root.appendingPathComponent("d1").path, root.appendingPathComponent("d2").path,
                                              "--recursive", "--save-dir", out.path, "--model", Self.model])
        #expect(result.status == 0, "\(result.errors)")
        let written = try FileManager.default.subpathsOfDirectory(atPath: out.path).filter { $0.hasSuffix(".png") }.sorted()
        #expect(written == ["sub/c.png", "x-2.png", "x.png"])
        // Each copy is its own picture: ffprobe reads the size of the first in x.png, of the second in x-2.png.
        let sizes = try ["x.png", "x-2.png"].map { name in
            try run("ffprobe", ["-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", out.appendingPathComponent(name).path])
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(sizes == (try [first, second].map { name in try LiteRT.size(name) }.map { "\($0.width),\($0.height)" }))
    }

    @Test func saveDirEqualToTheInputFolderNeverOverwritesAPicture() throws {
        let root = try Self.folder("inplace")
        defer { try? FileManager.default.removeItem(at: root) }
        let picture = root.appendingPathComponent("x.png")
        try Self.copy(try #require(LiteRT.pictures.first, "no shared pictures"), to: picture)
        let before = try Data(contentsOf: picture)
        let result = try Fixtures.runSpotter(["detect", root.path, "--save-dir", root.path, "--model", Self.model])
        #expect(result.status == 0, "\(result.errors)")
        #expect(try Data(contentsOf: picture) == before)
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("x-2.png").path))
    }

    @Test func missingInputIsReportedAndTheOthersAreProcessed() throws {
        // The picture whose top detection LiteRT is surest of: its line lists detections.
        let picture = LiteRT.picturePath(try #require(LiteRT.surest?.name, "no shared picture with a clear LiteRT detection"))
        let result = try Fixtures.runSpotter(["detect", "/nonexistent/a.png", picture, "--json", "--model", Self.model])
        #expect(result.status == 1)
        #expect(result.errors.contains("/nonexistent/a.png"))
        let lines = result.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.count == 1 && !((lines.first?["detections"] as? [Any]) ?? []).isEmpty, "\(result.output)")
    }

    @Test func negativeThresholdGetsAMessageAboutTheValue() throws {
        let result = try Fixtures.runSpotter(["detect", "x.png", "--threshold", "-1"])
        #expect(result.status != 0 && result.errors.contains("--threshold must be between 0 and 1"), "\(result.errors)")
    }

    @Test func videoOutputEqualToItsInputIsRefusedAndTheInputKept() throws {
        let root = try Self.folder("same")
        defer { try? FileManager.default.removeItem(at: root) }
        let video = root.appendingPathComponent("same.mkv")
        try FileManager.default.copyItem(at: Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv"), to: video)
        let before = try Data(contentsOf: video)
        // Also through another spelling of the same path.
        for output in [video.path, root.appendingPathComponent("./same.mkv").path] {
            let result = try Fixtures.runSpotter(["video", video.path, "--output", output, "--model", Self.model])
            #expect(result.status == 1 && result.errors.contains("is the input"), "\(result.errors)")
        }
        #expect(try Data(contentsOf: video) == before)
    }

    @Test func killedVideoLeavesNothingUnderTheOutputName() throws {
        let root = try Self.folder("killed")
        defer { try? FileManager.default.removeItem(at: root) }
        let output = root.appendingPathComponent("out.mp4")
        let program = try RunningProgram(Fixtures.spotter, ["video", Fixtures.shared.appendingPathComponent("videos/one-by-one-person-detection.mp4").path,
                                                           "--output", output.path, "--model", Self.model])
        // Wait until the temporary file holds data, then kill.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
            if let partial = names.first(where: { $0.hasPrefix(".out.mp4.partial") }),
               ((try? FileManager.default.attributesOfItem(atPath: root.appendingPathComponent(partial).path)[.size] as? Int) ?? 0) > 100_000 { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        kill(program.pid, SIGKILL)
        _ = program.wait()
        #expect(!FileManager.default.fileExists(atPath: output.path))
        // A complete run renames its file into place.
        let short = try Fixtures.runSpotter(["video", Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path, "--output", output.path,
                                             "--model", Self.model])
        #expect(short.status == 0, "\(short.errors)")
        #expect(try run("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", output.path])
                    .trimmingCharacters(in: .whitespacesAndNewlines) == "89")
    }

    @Test func inputWithAHeaderAndNoFramesIsAnErrorAndWritesNothing() throws {
        let root = try Self.folder("noframes")
        defer { try? FileManager.default.removeItem(at: root) }
        let empty = root.appendingPathComponent("empty.mp4")
        try run("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-frames:v", "0", "-c:v", "libx264", empty.path])
        let output = root.appendingPathComponent("out.mp4")
        let result = try Fixtures.runSpotter(["video", empty.path, "--output", output.path, "--model", Self.model])
        #expect(result.status == 1, "\(result.errors)")
        #expect(!FileManager.default.fileExists(atPath: output.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["empty.mp4"])
    }
}

@Suite struct COCOOutputTests {
    @Test func cocoImagesFileMapsImageIDsToFilesAndCategoryIDsToLabels() throws {
        let images = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-coco-\(UUID().uuidString.prefix(8)).json")
        defer { try? FileManager.default.removeItem(at: images) }
        // Two pictures, each with LiteRT's top detection on it.
        let pictures = Array(ObjectDetectorTests.expected.prefix(2))
        try #require(pictures.count == 2, "LiteRT's clear detections on \(ObjectDetectorTests.expected.map(\.image))")
        let paths = pictures.map { LiteRT.picturePath($0.image) }
        let result = try Fixtures.runSpotter(["detect"] + paths + ["--format", "coco", "--coco-images", images.path, "--model", FileSafetyTests.model])
        #expect(result.status == 0, "\(result.errors)")
        let annotations = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: Any]])
        let dataset = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: images)) as? [String: Any])
        let files = Dictionary(uniqueKeysWithValues: try #require(dataset["images"] as? [[String: Any]]).map { ($0["id"] as? Int ?? -1, $0["file_name"] as? String ?? "") })
        let names = Dictionary(uniqueKeysWithValues: try #require(dataset["categories"] as? [[String: Any]]).map { ($0["id"] as? Int ?? -1, $0["name"] as? String ?? "") })
        let found = annotations.map { (files[$0["image_id"] as? Int ?? -1] ?? "?", names[$0["category_id"] as? Int ?? -1] ?? "?") }
        for (path, expected) in zip(paths, pictures) {
            #expect(found.contains { $0.0 == path && $0.1 == expected.label }, "\(expected.label) on \(path): \(found)")
        }
    }
}
