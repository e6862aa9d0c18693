import Detection
import Foundation
import Imaging
import Media
import Pipeline
import Testing
import TestSupport

/// Videos of many frame sizes and pixel formats, made by the ffmpeg CLI: every width from 96 to
/// 1000 in steps of 2, odd sizes, the common camera sizes in five pixel formats. They exercise every
/// place where a row stride, an odd width or swscale's vector loops meet our buffers.
enum SweepVideos {
    struct Source: Sendable {
        var path: String
        var width: Int
        var height: Int
        var pixelFormat: String
    }

    static let all: [Source] = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-sweep-\(UUID().uuidString.prefix(8))")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var sources: [Source] = []
        // H.264 4:2:0 needs even sizes; FFV1 in Matroska takes odd ones; raw NV12 reaches the
        // decoder side as NV12 (libx264 would turn it into yuv420p).
        func add(_ width: Int, _ height: Int, _ format: String) {
            let ext = format == "nv12" ? "nut" : (width % 2 == 1 || height % 2 == 1 ? "mkv" : "mp4")
            sources.append(Source(path: directory.appendingPathComponent("\(width)x\(height)-\(format).\(ext)").path,
                                  width: width, height: height, pixelFormat: format))
        }
        for width in stride(from: 96, through: 1000, by: 2) { add(width, max(64, (width * 3 / 8) & ~1), "yuv420p") }
        for (width, height) in [(97, 99), (321, 241), (599, 401), (853, 479), (999, 561)] { add(width, height, "yuv420p") }
        for (width, height) in [(426, 240), (854, 480), (1000, 562), (1366, 768), (1920, 1080)] {
            for format in ["yuv420p", "yuvj420p", "yuv422p", "yuv444p", "nv12"] { add(width, height, format) }
        }
        let commands = sources.map { source -> String in
            let codec = source.path.hasSuffix(".nut") ? "-c:v rawvideo" : source.path.hasSuffix(".mkv") ? "-c:v ffv1" : "-c:v libx264 -preset ultrafast"
            // testsrc2 rounds odd sizes down, so odd sizes come from scaling an even one.
            return "ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc2=size=\(source.width + source.width % 2)x\(source.height + source.height % 2):rate=10 "
                + "-vf scale=\(source.width):\(source.height) -frames:v 2 -pix_fmt \(source.pixelFormat) \(codec) \(source.path)"
        }
        let list = directory.appendingPathComponent("commands.txt")
        try! commands.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        try! run("bash", ["-c", "xargs -P 2 -d '\\n' -I{} bash -c {} < \(list.path)"])
        return sources
    }()
}

@Suite(.serialized) struct FrameSizeSweepTests {
    /// A detector stand-in that reports one box crossing the frame's bottom-right corner, so every
    /// frame is annotated and recorded.
    static func cornerDetection(_ image: Image) -> [Detection] {
        let box = Rect(minX: Double(image.width) * 0.5, minY: Double(image.height) * 0.5, maxX: Double(image.width), maxY: Double(image.height))
        return [Detection(classIndex: 0, label: "person", score: 0.9, box: box,
                          normalizedBox: Rect(minX: 0.5, minY: 0.5, maxX: 1, maxY: 1))]
    }

    @Test func everySweepSizeDecodesDetectsAnnotatesAndEncodes() throws {
        let detector = try ObjectDetector(modelPath: Fixtures.detectModel.path, options: .init(threadCount: 1))
        let annotator = try Annotator()
        let output = try temporaryDirectory("sweep-out")
        defer { try? FileManager.default.removeItem(at: output) }
        for (index, source) in SweepVideos.all.enumerated() {
            let reader = try VideoReader(path: source.path)
            let target = output.appendingPathComponent("out.mp4").path
            let writer = try VideoWriter(path: target, width: source.width, height: source.height, options: .init(frameRate: 10, preset: "ultrafast"))
            var frames = 0
            while let frame = try reader.nextFrame() {
                #expect(frame.image.width == source.width && frame.image.height == source.height, "\(source.path)")
                _ = try detector.detect(frame.image)
                var image = frame.image
                annotator.draw(Self.cornerDetection(image), on: &image)
                try writer.write(image, time: frame.time)
                frames += 1
            }
            try writer.finish()
            #expect(frames == 2, "\(source.path): \(frames) frames")
            // ffprobe reads every odd size and a sample of the rest (each read takes a tenth of a second).
            if index % 10 == 0 || source.width % 2 == 1 || source.height % 2 == 1 {
                let probe = try Probe(target)
                #expect(probe.frames == 2 && probe.pixelFormat == "yuv420p" && probe.width == source.width & ~1
                        && probe.height == source.height & ~1, "\(source.path) -> \(probe)")
            }
        }
    }

    @Test func everySweepSizeRecordsAClip() throws {
        let album = try temporaryDirectory("sweep-album")
        defer { try? FileManager.default.removeItem(at: album) }
        let store = try Album(directory: album)
        for source in SweepVideos.all {
            let reader = try VideoReader(path: source.path)
            let session = try ClipSession(album: store, source: source.path, options: .init(frameRate: 10), events: { _ in })
            _ = try FramePipeline(reader: reader).run(detect: { Self.cornerDetection($0.image) },
                                                      consume: { try session.consume($0) }, progress: { _ in })
            try session.finish()
        }
        let clips = try store.clips()
        #expect(clips.count == SweepVideos.all.count)
        #expect(clips.allSatisfy { $0.frames == 2 })
        // ffprobe reads a sample of them (every one would take a minute).
        for clip in clips.enumerated().filter({ $0.offset % 25 == 0 }).map(\.element) {
            let probe = try Probe(album.appendingPathComponent(clip.clip).path)
            #expect(probe.frames == 2 && probe.codec == "h264", "\(clip.clip): \(probe)")
        }
    }

    /// Decoded pixels equal FFmpeg's own conversion (the CLI with the same bicubic scaler) for the
    /// common sizes in every pixel format.
    @Test(arguments: ["yuv420p", "yuvj420p", "yuv422p", "yuv444p", "nv12"])
    func decodedPixelsEqualTheFFmpegCLIs(format: String) throws {
        for source in SweepVideos.all where source.pixelFormat == format && [426, 1000, 1366].contains(source.width) {
            let reader = try VideoReader(path: source.path)
            let frame = try #require(try reader.nextFrame())
            let raw = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-sweep-\(UUID().uuidString.prefix(8)).rgb")
            defer { try? FileManager.default.removeItem(at: raw) }
            try run("ffmpeg", ["-nostdin", "-loglevel", "error", "-y", "-i", source.path, "-frames:v", "1", "-sws_flags", "bicubic",
                               "-pix_fmt", "rgb24", "-f", "rawvideo", raw.path])
            let expected = try Fixtures.bytes(raw)
            #expect(expected.count == frame.image.data.count, "\(source.path)")
            let differences = zip(expected, frame.image.data).map { abs(Int($0) - Int($1)) }
            let worst = differences.max() ?? 0
            let mean = Double(differences.reduce(0, +)) / Double(max(1, differences.count))
            #expect(worst <= 2 && mean < 0.1, "\(source.path): max \(worst), mean \(mean)")
        }
    }
}
