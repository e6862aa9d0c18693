import Detection
import Foundation
import Imaging
import Inference
import Media
import Testing
import TestSupport

/// The top detection LiteRT finds on a shared image, in the image's pixels.
struct Expected: Sendable, CustomStringConvertible {
    var image: String
    var label: String
    var score: Float
    var box: Rect
    var description: String { image }
}

@Suite struct ObjectDetectorTests {
    /// The shared images LiteRT ran on (make_litert_fixtures.py saves its outputs for each).
    static let liteRTPictures = Fixtures.folders(Fixtures.generated.appendingPathComponent("detect/xnnpack"))
        .filter { FileManager.default.fileExists(atPath: Fixtures.shared.appendingPathComponent("images/\($0).png").path) }

    /// LiteRT's top detection on each of them (score 0.53 and up: clear of the 0.5 threshold).
    static let expected: [Expected] = (try? liteRTPictures.compactMap { name in
        let size = try picture(name).size
        guard let labels = try detector().labels,
              let top = try liteRT(name, size: size).filter({ $0.score >= 0.53 }).max(by: { $0.score < $1.score }) else { return nil }
        return Expected(image: name, label: labels.name(top.classIndex), score: top.score, box: top.box)
    }) ?? []

    /// LiteRT's detections on shared image `name` of `size` (its default XNNPACK path, saved by
    /// make_litert_fixtures.py): model class, score, and box in the image's pixels (clipped to it).
    static func liteRT(_ name: String, size: Size) throws -> [(classIndex: Int, score: Float, box: Rect)] {
        let folder = Fixtures.generated.appendingPathComponent("detect/xnnpack/\(name)")
        func load(_ file: String) throws -> [Float] { try Fixtures.npy(folder.appendingPathComponent("\(file).npy")).values(as: Float.self) }
        let boxes = try load("TFLite_Detection_PostProcess"), classes = try load("TFLite_Detection_PostProcess_1")
        let scores = try load("TFLite_Detection_PostProcess_2"), count = Int(try load("TFLite_Detection_PostProcess_3")[0])
        let w = Double(size.width), h = Double(size.height)
        return (0..<count).map { i in
            let b = boxes[(4 * i)..<(4 * i + 4)].map(Double.init)  // ymin, xmin, ymax, xmax of the stretched input
            return (Int(classes[i]), scores[i], Rect(minX: max(0, b[1] * w), minY: max(0, b[0] * h), maxX: min(w, b[3] * w), maxY: min(h, b[2] * h)))
        }
    }

    static func detector(_ options: ObjectDetector.Options = .init()) throws -> ObjectDetector {
        try ObjectDetector(modelPath: Fixtures.detectModel.path, options: options)
    }

    static func picture(_ name: String) throws -> Image {
        try ImageFile.decode(Fixtures.shared.appendingPathComponent("images/\(name).png").path).upright
    }

    static func top(_ result: DetectionResult, _ label: String) throws -> Detection {
        try #require(result.detections.first { $0.label == label }, "no \(label) in \(result.detections.map(\.label))")
    }

    @Test func liteRTsDetectionsAreThereToCompareWith() {
        #expect(!Self.liteRTPictures.isEmpty && Self.expected.count == Self.liteRTPictures.count,
                "LiteRT's outputs for \(Self.liteRTPictures), a clear top detection on \(Self.expected.map(\.image))")
    }

    @Test("shared images give LiteRT's detections", arguments: liteRTPictures)
    func sharedImagesGiveLiteRTDetections(_ name: String) throws {
        let picture = try Self.picture(name)
        let result = try Self.detector().detect(picture)
        let liteRT = try Self.liteRT(name, size: picture.size)
        // Every detection LiteRT makes clear of the threshold (a score within 0.03 of it may fall
        // either side) is found, and nothing LiteRT does not find.
        for expected in liteRT where expected.score >= 0.53 {
            let found = result.detections.first { $0.classIndex == expected.classIndex && $0.box.iou(expected.box) >= 0.9 }
            #expect(found.map { abs($0.score - expected.score) <= 0.03 } == true,
                    "\(name): LiteRT's class \(expected.classIndex) at \(expected.score), \(expected.box); Spotter \(result.detections)")
        }
        for detection in result.detections {
            #expect(liteRT.contains { $0.classIndex == detection.classIndex && $0.score >= 0.47 && $0.box.iou(detection.box) >= 0.9 },
                    "\(name): \(detection) is not one of LiteRT's")
        }
        #expect(result.detections.allSatisfy { $0.score >= 0.5 })
        #expect(result.detections == result.detections.sorted { $0.score > $1.score })
    }

    @Test func referenceBackendAgreesWithXNNPACK() throws {
        let picture = try Self.picture("coffee")
        let fast = try Self.top(try Self.detector().detect(picture), "cup")
        let exact = try Self.top(try Self.detector(.init(backend: .reference)).detect(picture), "cup")
        #expect(abs(fast.score - exact.score) <= 6 / 256 && fast.box.iou(exact.box) >= 0.9)
    }

    @Test func jpegWithExifOrientationSixGivesBoxesOnTheDisplayedPicture() throws {
        let upright = try Self.picture("coffee")
        // Store the pixels turned left, so EXIF 6 (turn right to display) restores the picture.
        let stored = upright.oriented(.left)
        var jpeg = try ImageFile.encode(stored, format: .jpeg(quality: 95))
        jpeg.insert(contentsOf: Self.exifOrientation(6), at: 2)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-exif6.jpg").path
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let decoded = try ImageFile.decode(path)
        #expect(decoded.orientation == .right)
        #expect(decoded.upright.size == upright.size)
        let cup = try Self.top(try Self.detector().detect(decoded.upright), "cup")
        #expect(cup.box.iou(Rect(minX: 167, minY: 17, maxX: 424, maxY: 314)) >= 0.9, "box \(cup.box)")
    }

    /// An APP1 segment with a big-endian TIFF IFD holding only the Orientation tag.
    static func exifOrientation(_ value: UInt16) -> [UInt8] {
        func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xff)] }
        let tiff: [UInt8] = Array("MM".utf8) + [0, 0x2a, 0, 0, 0, 8] + be16(1) + be16(0x0112) + be16(3) + [0, 0, 0, 1] + be16(value) + [0, 0] + [0, 0, 0, 0]
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        return [0xff, 0xe1] + be16(UInt16(payload.count + 2)) + payload
    }

    @Test("camera formats detect as the RGB picture does", arguments: [PixelFormat.nv21, .nv12, .i420, .bgra, .rgba, .bgr24])
    func cameraFormatsDetectLikeRGB(_ format: PixelFormat) throws {
        let detector = try Self.detector()
        let rgb = try Self.picture("coffee")
        let reference = try Self.top(try detector.detect(rgb), "cup")
        let frame = rgb.converted(to: format, yuvRange: .video)
        let cup = try Self.top(try detector.detect(frame), "cup")
        #expect(abs(cup.score - reference.score) <= 0.05 && cup.box.iou(reference.box) >= 0.9, "\(format): \(cup)")
    }

    @Test("turned and mirrored frames give the same boxes", arguments: Orientation.allCases)
    func orientedFramesMapBackOntoTheSameObjects(_ orientation: Orientation) throws {
        let detector = try Self.detector()
        let upright = try Self.picture("coffee")
        // Pixels stored so that `orientation` turns them upright again.
        let stored = Self.storing(upright, as: orientation)
        #expect(stored.oriented(orientation).data == upright.data)
        let reference = try detector.detect(upright)
        let result = try detector.detect(stored, orientation: orientation)
        #expect(result.imageSize == upright.size)
        #expect(result.detections == reference.detections)
        // The box mapped to the stored frame covers the same pixels there.
        let cup = try Self.top(result, "cup")
        let storedBox = result.uprightToStored.apply(cup.box)
        #expect(abs(Self.mean(stored, storedBox) - Self.mean(upright, cup.box)) < 1.0)
    }

    /// The stored pixels of a frame whose `orientation` displays `upright`.
    static func storing(_ upright: Image, as orientation: Orientation) -> Image {
        // Applying each orientation's inverse turn: try the 8 candidates and keep the one that works.
        Orientation.allCases.lazy.map { upright.oriented($0) }.first { $0.oriented(orientation).data == upright.data && $0.oriented(orientation).size == upright.size }!
    }

    static func mean(_ image: Image, _ box: Rect) -> Double {
        let x0 = Int(box.minX.rounded()), x1 = Int(box.maxX.rounded()), y0 = Int(box.minY.rounded()), y1 = Int(box.maxY.rounded())
        var sum = 0, count = 0
        for y in y0..<y1 { for x in x0..<x1 { sum += Int(image.data[(y * image.width + x) * 3]); count += 1 } }
        return Double(sum) / Double(max(count, 1))
    }

    @Test func letterboxAndCropStillFindTheCup() throws {
        for mode in [ResizeMode.letterbox, .centerCrop] {
            let result = try Self.detector(.init(scoreThreshold: 0.3, resizeMode: mode)).detect(try Self.picture("coffee"))
            let cup = try Self.top(result, "cup")
            #expect(cup.box.iou(Rect(minX: 167, minY: 17, maxX: 424, maxY: 314)) >= 0.7, "\(mode): \(cup.box)")
        }
    }

    @Test func allowlistAndMaxResultsFilter() throws {
        let picture = try Self.picture("coffee")
        let onlyTables = try Self.detector(.init(categoryAllowlist: ["Dining Table"])).detect(picture)
        #expect(onlyTables.detections.map(\.label) == ["dining table"])
        let noCups = try Self.detector(.init(categoryDenylist: ["cup"])).detect(picture)
        #expect(!noCups.detections.contains { $0.label == "cup" })
        #expect(try Self.detector(.init(maxResults: 1)).detect(picture).detections.count == 1)
        #expect(throws: DetectorError.self) { try Self.detector(.init(categoryAllowlist: ["unicorn"])) }
    }

    @Test func labelsSkipTheBackgroundRow() throws {
        let labels = try Labels.read(path: Fixtures.shared.appendingPathComponent("models/coco-ssd-mobilenet-v1/labelmap.txt").path)
        #expect(labels.offset == 1 && labels.name(0) == "person" && labels.name(46) == "cup" && labels.isCOCO)
        #expect(labels.classIndex(named: "cup") == 46)
    }

    @Test func modelWithoutDetectionOutputsIsRefusedWithWhatWasFound() throws {
        let path = Fixtures.committed.appendingPathComponent("ops/conv2d_uint8_same_s2_relu6/model.tflite").path
        #expect {
            try ObjectDetector(modelPath: path)
        } throws: { error in
            guard case .unrecognizedOutputs(let found) = error as? DetectorError else { return false }
            return found.count == 1 && found[0].contains("[1, 5, 5, 4]")
        }
    }

    @Test func encodingsFollowTheirFormats() throws {
        let detector = try Self.detector()
        let result = try detector.detect(try Self.picture("coffee"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(ResultEncoding.json(result, image: "coffee.png").utf8)) as? [String: Any])
        #expect(json["width"] as? Int == 600 && json["height"] as? Int == 400)
        let first = try #require((json["detections"] as? [[String: Any]])?.first)
        #expect(first["label"] as? String == "cup" && first["class_id"] as? Int == 46)
        let box = try #require(first["box"] as? [String: Double])
        #expect(Set(box.keys) == ["xmin", "ymin", "xmax", "ymax"])
        let floats = ResultEncoding.floats(result)
        #expect(floats.count == 6 * result.detections.count && floats[0] == 46 && floats[2] < floats[3] && floats[4] < floats[5])
        let coco = ResultEncoding.coco(result, imageID: 7, labels: detector.labels)
        #expect(coco.first?["category_id"] as? Int == 47 && coco.first?["image_id"] as? Int == 7)
        let bbox = try #require(coco.first?["bbox"] as? [Double])
        #expect(abs(bbox[2] - result.detections[0].box.width) < 0.01)
        let yolo = ResultEncoding.yolo(result).split(separator: "\n").first!.split(separator: " ").compactMap { Double($0) }
        #expect(yolo.count == 6 && yolo[0] == 46 && yolo.dropFirst().allSatisfy { (0...1).contains($0) })
    }

    @Test func annotatorDrawsBoxesInClassColours() throws {
        var picture = try Self.picture("coffee")
        let result = try Self.detector().detect(picture)
        try Annotator().draw(result.detections, on: &picture)
        let cup = try Self.top(result, "cup")
        let color = Color.forClass(cup.classIndex)
        let x = Int(cup.box.minX.rounded()), y = Int((cup.box.minY + cup.box.maxY) / 2)
        #expect(Array(picture.data[((y * 600 + x) * 3)..<((y * 600 + x) * 3 + 3)]) == [color.red, color.green, color.blue])
    }
}

@Suite struct AutoMLAndFileFormatTests {
    /// An AutoML Vision Edge export: outputs renamed, their order given by tflite_metadata.json, labels in dict.txt.
    @Test func autoMLExportIsDecodedThroughItsMetadataFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-automl")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var bytes = try Fixtures.bytes(Fixtures.detectModel)
        // Rename the output tensors in place (same length) so names no longer identify them.
        for suffix in ["", ":1", ":2", ":3"] {
            let name = Array("TFLite_Detection_PostProcess\(suffix)".utf8)
            let replacement = Array(("X" + String(repeating: "x", count: name.count - 1)).utf8)
            let at = try #require(Fixtures.find(name + [0], in: bytes))
            bytes.replaceSubrange(at..<(at + name.count), with: replacement)
        }
        try Data(bytes).write(to: directory.appendingPathComponent("model.tflite"))
        let labels = try String(contentsOf: Fixtures.shared.appendingPathComponent("models/coco-ssd-mobilenet-v1/labelmap.txt"), encoding: .utf8)
        try labels.write(to: directory.appendingPathComponent("dict.txt"), atomically: true, encoding: .utf8)
        let path = directory.appendingPathComponent("model.tflite").path
        #expect(throws: DetectorError.self) { try ObjectDetector(modelPath: path) }
        let metadata = #"{"outputTensorRepresentation": ["bounding_boxes", "class_labels", "class_confidences", "num_of_boxes"]}"#
        try metadata.write(to: directory.appendingPathComponent("tflite_metadata.json"), atomically: true, encoding: .utf8)
        let result = try ObjectDetector(modelPath: path).detect(try ObjectDetectorTests.picture("coffee"))
        #expect(result.detections.first?.label == "cup")
    }

    @Test("BMP, WebP, GIF and TIFF files decode; lossless ones to the pixels FFmpeg's CLI decodes", arguments: ["bmp", "webp", "gif", "tiff", "png"])
    func otherFormatsDecode(_ ext: String) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-coffee.\(ext)").path
        try run("ffmpeg", ["-v", "error", "-y", "-i", Fixtures.shared.appendingPathComponent("images/coffee.png").path, path])
        let picture = try ImageFile.decode(path).upright
        let size = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0", path])
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap { Int($0) }
        #expect([picture.size.width, picture.size.height] == size, "ffprobe reads \(size)")
        if ["bmp", "tiff", "png"].contains(ext) {
            let raw = path + ".rgb"
            try run("ffmpeg", ["-v", "error", "-y", "-i", path, "-pix_fmt", "rgb24", "-f", "rawvideo", raw])
            #expect(picture.converted(to: .rgb24).data == (try Fixtures.bytes(URL(fileURLWithPath: raw))))
        }
        guard ext != "gif" else { return }  // 256 colours: the cup may not be the first detection
        let result = try ObjectDetectorTests.detector().detect(picture)
        #expect(result.detections.first?.label == "cup")
    }
}
