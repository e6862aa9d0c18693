import Foundation
import Imaging
import Inference
import Media
import Testing
import TestSupport

@Suite struct ResizeTests {
    /// fixtures-generated/detect/inputs holds OpenCV's cv2.resize(INTER_LINEAR) of the shared images.
    @Test("decode and resize equal OpenCV's model input", arguments: LiteRT.pictures)
    func decodeAndResizeEqualOpenCV(_ name: String) throws {
        let picture = try ImageFile.decode(LiteRT.picturePath(name)).upright
        let resized = picture.resized(to: Size(width: 300, height: 300))
        let expected = try Fixtures.npy(Fixtures.generated.appendingPathComponent("detect/inputs/\(name).npy"))
        #expect(resized.data == expected.data, "\(zip(resized.data, expected.data).filter { $0 != $1 }.count) bytes differ")
    }

    /// fixtures-generated/detect/halves holds OpenCV's cv2.resize(INTER_LINEAR) to exactly half size.
    @Test("resizing to exactly half equals OpenCV", arguments: LiteRT.pictures)
    func halvingEqualsOpenCV(_ name: String) throws {
        let picture = try ImageFile.decode(LiteRT.picturePath(name)).upright.converted(to: .rgb24)
        let even = picture.cropped(x: 0, y: 0, width: picture.width / 2 * 2, height: picture.height / 2 * 2)
        let half = even.resized(to: Size(width: even.width / 2, height: even.height / 2))
        let expected = try Fixtures.npy(Fixtures.generated.appendingPathComponent("detect/halves/\(name).npy"))
        #expect(expected.shape == [even.height / 2, even.width / 2, 3])
        #expect(half.data == expected.data, "\(zip(half.data, expected.data).filter { $0 != $1 }.count) bytes differ")
    }

    @Test func areaFilterAveragesBlocks() throws {
        let image = try Image(width: 4, height: 2, format: .gray8, data: [0, 10, 20, 30, 40, 50, 60, 70])
        #expect(image.resized(to: Size(width: 2, height: 1), filter: .area).data == [25, 45])
    }
}

@Suite struct ConversionTests {
    static func astronaut() throws -> Image {
        try ImageFile.decode(Fixtures.shared.appendingPathComponent("images/astronaut.png").path).upright
    }

    /// Raw frames converted by the ffmpeg CLI (swscale) serve as the reference for BT.601 decoding.
    @Test("YUV decoding agrees with FFmpeg's", arguments: [("nv12", PixelFormat.nv12), ("nv21", .nv21), ("yuv420p", .i420)])
    func yuvDecodingAgreesWithFFmpeg(_ ffmpegName: String, _ format: PixelFormat) throws {
        let source = Fixtures.shared.appendingPathComponent("images/chelsea.png").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-yuv-\(ffmpegName)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let yuv = directory.appendingPathComponent("frame.yuv").path, rgb = directory.appendingPathComponent("frame.rgb").path
        // 450x300: even sizes keep the chroma planes simple.
        try run("ffmpeg", ["-v", "error", "-y", "-i", source, "-vf", "crop=450:300:0:0", "-pix_fmt", ffmpegName, "-f", "rawvideo", yuv])
        try run("ffmpeg", ["-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", ffmpegName, "-s", "450x300", "-i", yuv,
                           "-sws_flags", "accurate_rnd+full_chroma_int+bilinear", "-pix_fmt", "rgb24", "-f", "rawvideo", rgb])
        let frame = try Image(width: 450, height: 300, format: format, data: try Fixtures.bytes(URL(fileURLWithPath: yuv)))
        let expected = try Fixtures.bytes(URL(fileURLWithPath: rgb))
        let converted = frame.converted(to: .rgb24)
        // FFmpeg interpolates chroma between samples; Spotter repeats each sample. Compare luma-driven
        // values on a tolerance and the mean error tightly.
        let errors = zip(converted.data, expected).map { abs(Int($0) - Int($1)) }
        let mean = Double(errors.reduce(0, +)) / Double(errors.count)
        #expect(mean < 2.0, "mean absolute error \(mean)")
        #expect(errors.filter { $0 > 24 }.count < errors.count / 100)
    }

    @Test("RGB survives a round trip through packed formats", arguments: [PixelFormat.bgr24, .rgba, .bgra, .argb])
    func packedRoundTripIsLossless(_ format: PixelFormat) throws {
        let rgb = try Self.astronaut()
        #expect(rgb.converted(to: format).converted(to: .rgb24).data == rgb.data)
    }

    @Test func stridedRowsAreRead() throws {
        // 2x2 RGB24 with 2 bytes of padding per row.
        let image = try Image(width: 2, height: 2, format: .rgb24, data: [1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12], strides: [8])
        #expect(image.converted(to: .rgb24).data == Array(1...12).map(UInt8.init))
    }

    @Test func shortBufferIsRejected() {
        #expect(throws: ImageError.bufferTooSmall(format: .nv21, needed: 6, actual: 4)) {
            try Image(width: 2, height: 2, format: .nv21, data: [0, 0, 0, 0])
        }
    }
}

@Suite struct GeometryTests {
    @Test("orientation maps round-trip pixels", arguments: Orientation.allCases)
    func orientationIsInvertible(_ orientation: Orientation) throws {
        let image = try Image(width: 3, height: 2, format: .gray8, data: [1, 2, 3, 4, 5, 6])
        let upright = image.oriented(orientation)
        #expect(upright.size == orientation.uprightSize(image.size))
        // Every upright pixel came from the stored pixel the map sends there.
        let map = orientation.map(from: image.size)
        for y in 0..<image.height {
            for x in 0..<image.width {
                let p = map.apply(x: Double(x) + 0.5, y: Double(y) + 0.5)
                #expect(upright.data[Int(p.y) * upright.width + Int(p.x)] == image.data[y * image.width + x])
            }
        }
    }

    @Test func exifSixTurnsStoredPixelsClockwise() throws {
        // Stored 2x1 [a b] displayed with orientation 6 is 1x2, a on top.
        let image = try Image(width: 2, height: 1, format: .gray8, data: [7, 9])
        let upright = image.oriented(.right)
        #expect(upright.width == 1 && upright.height == 2 && upright.data == [7, 9])
        #expect(image.oriented(.left).data == [9, 7])
    }

    @Test("letterbox and crop map boxes back exactly", arguments: [ResizeMode.stretch, .centerCrop, .letterbox])
    func preparedBoxesMapBackExactly(_ mode: ResizeMode) throws {
        // A white square at a known place in a dark 400x200 picture.
        var picture = Image(width: 400, height: 200, format: .rgb24)
        picture.fill(x: 180, y: 60, width: 40, height: 40, color: .white)
        let prepared = picture.prepared(for: Size(width: 100, height: 100), mode: mode)
        let square = Rect(x: 180, y: 60, width: 40, height: 40)
        let inInput = prepared.uprightToInput.apply(square)
        // The mapped square is white in the prepared pixels (sampled inside its centre).
        let cx = Int((inInput.minX + inInput.maxX) / 2), cy = Int((inInput.minY + inInput.maxY) / 2)
        #expect(prepared.pixels.data[(cy * 100 + cx) * 3] > 200)
        // And outside it, dark.
        let outside = Int(inInput.maxX) + 3
        if outside < 100 { #expect(prepared.pixels.data[(cy * 100 + outside) * 3] < 50) }
        // Input to upright and back is the identity.
        let back = prepared.uprightToInput.inverted.apply(inInput)
        #expect(abs(back.minX - square.minX) < 1e-9 && abs(back.maxY - square.maxY) < 1e-9)
    }

    @Test func viewMappingFitsAndFills() {
        let picture = Size(width: 400, height: 200)
        let view = Rect(x: 0, y: 0, width: 100, height: 100)
        let fit = viewMap(from: picture, to: view, mode: .fit).apply(Rect(x: 0, y: 0, width: 400, height: 200))
        #expect(fit == Rect(minX: 0, minY: 25, maxX: 100, maxY: 75))
        let fill = viewMap(from: picture, to: view, mode: .fill).apply(Rect(x: 0, y: 0, width: 400, height: 200))
        #expect(fill == Rect(minX: -50, minY: 0, maxX: 150, maxY: 100))
    }
}

@Suite struct DrawingTests {
    @Test("a box on an edge keeps its full stroke inside", arguments: [0, 1, 2, 3])
    func edgeBoxKeepsFullStroke(_ edge: Int) {
        var image = Image(width: 50, height: 40, format: .rgb24)
        let boxes = [Rect(minX: -5, minY: 10, maxX: 20, maxY: 30), Rect(minX: 10, minY: -5, maxX: 30, maxY: 20),
                     Rect(minX: 30, minY: 10, maxX: 60, maxY: 30), Rect(minX: 10, minY: 20, maxX: 30, maxY: 45)]
        image.strokeRect(boxes[edge], lineWidth: 4, color: .white)
        func lit(_ x: Int, _ y: Int) -> Bool { image.data[(y * 50 + x) * 3] == 255 }
        switch edge {
        case 0: #expect((0..<4).allSatisfy { lit($0, 20) } && !lit(4, 20))
        case 1: #expect((0..<4).allSatisfy { lit(20, $0) } && !lit(20, 4))
        case 2: #expect((46..<50).allSatisfy { lit($0, 20) } && !lit(45, 20))
        default: #expect((36..<40).allSatisfy { lit(20, $0) } && !lit(20, 35))
        }
    }
}

@Suite struct ImageFileTests {
    @Test func pngRoundTripIsLossless() throws {
        let picture = try ConversionTests.astronaut()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-roundtrip.png").path
        try ImageFile.write(picture, to: path)
        #expect(try ImageFile.decode(path).stored.data == picture.data)
    }

    @Test func jpegIsReadableByFFprobe() throws {
        let picture = try ConversionTests.astronaut()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-write.jpg").path
        try ImageFile.write(picture, to: path)
        let probe = try run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path])
        #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,\(picture.width),\(picture.height)")
    }

    @Test func truncatedFileGivesAClearError() throws {
        let bytes = try Fixtures.bytes(Fixtures.shared.appendingPathComponent("images/coffee.png"))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-truncated.png").path
        try Data(bytes.prefix(100)).write(to: URL(fileURLWithPath: path))
        #expect(throws: MediaError.self) { try ImageFile.decode(path) }
    }
}
