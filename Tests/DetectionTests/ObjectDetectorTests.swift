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
    var classIndex: Int
    var label: String
    var score: Float
    var box: Rect
    var description: String { image }
}

@Suite struct ObjectDetectorTests {
    /// LiteRT's top detection on each shared picture it ran on, when it is clear of the threshold
    /// (empty when any of LiteRT's outputs cannot be read).
    static let expected: [Expected] = (try? LiteRT.pictures.compactMap { name in
        let size = try LiteRT.size(name)
        guard let labels = try detector().labels,
              let top = try LiteRT.detections(name, size: size).first(where: { $0.score >= LiteRT.clearScore }) else { return nil }
        return Expected(image: name, classIndex: top.classIndex, label: labels.name(top.classIndex), score: top.score, box: top.box)
    }) ?? []

    /// The tests of one picture take the picture whose top detection LiteRT is surest of.
    static let strongest = expected.first { $0.image == LiteRT.surest?.name }

    /// For letterboxing and centre cropping: a picture that is not square (letterboxing pads it)
    /// with its top detection inside the centred square (cropping keeps it), the surest such one,
    /// else the surest of all.
    static let framed: Expected? = (try? expected.filter { expected in
        let size = try LiteRT.size(expected.image)
        let side = Double(min(size.width, size.height))
        let square = Rect(minX: (Double(size.width) - side) / 2, minY: (Double(size.height) - side) / 2,
                          maxX: (Double(size.width) + side) / 2, maxY: (Double(size.height) + side) / 2)
        return size.width != size.height && expected.box.minX >= square.minX && expected.box.maxX <= square.maxX
            && expected.box.minY >= square.minY && expected.box.maxY <= square.maxY
    }.max { $0.score < $1.score }) ?? strongest

    static func detector(_ options: ObjectDetector.Options = .init()) throws -> ObjectDetector {
        try ObjectDetector(modelPath: Fixtures.detectModel.path, options: options)
    }

    static func picture(_ name: String) throws -> Image {
        try ImageFile.decode(LiteRT.picturePath(name)).upright
    }

    static func top(_ result: DetectionResult, _ label: String) throws -> Detection {
        try #require(result.detections.first { $0.label == label }, "no \(label) in \(result.detections.map(\.label))")
    }

    @Test func liteRTsDetectionsAreThereToCompareWith() {
        // A picture may hold nothing LiteRT is sure of, but the one-picture tests need one that does.
        #expect(!LiteRT.pictures.isEmpty && !Self.expected.isEmpty,
                "LiteRT's outputs for \(LiteRT.pictures), a clear top detection on \(Self.expected.map(\.image))")
    }

    @Test("shared images give LiteRT's detections", arguments: LiteRT.pictures)
    func sharedImagesGiveLiteRTDetections(_ name: String) throws {
        let picture = try Self.picture(name)
        let result = try Self.detector().detect(picture)
        let liteRT = try LiteRT.detections(name, size: picture.size)
        // Every detection LiteRT makes clear of the threshold (a score within 0.03 of it may fall
        // either side) is found, and nothing LiteRT does not find.
        for expected in liteRT where expected.score >= LiteRT.clearScore {
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
        let expected = try #require(Self.strongest)
        let picture = try Self.picture(expected.image)
        let fast = try Self.top(try Self.detector().detect(picture), expected.label)
        let exact = try Self.top(try Self.detector(.init(backend: .reference)).detect(picture), expected.label)
        #expect(abs(fast.score - exact.score) <= 6 / 256 && fast.box.iou(exact.box) >= 0.9)
    }

    @Test func jpegWithExifOrientationSixGivesBoxesOnTheDisplayedPicture() throws {
        let expected = try #require(Self.strongest)
        let upright = try Self.picture(expected.image)
        // Store the pixels turned left, so EXIF 6 (turn right to display) restores the picture.
        let stored = upright.oriented(.left)
        var jpeg = try ImageFile.encode(stored, format: .jpeg(quality: 95))
        jpeg.insert(contentsOf: Self.exifOrientation(6), at: 2)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-exif6.jpg").path
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let decoded = try ImageFile.decode(path)
        #expect(decoded.orientation == .right)
        #expect(decoded.upright.size == upright.size)
        let top = try Self.top(try Self.detector().detect(decoded.upright), expected.label)
        #expect(top.box.iou(expected.box) >= 0.9, "\(expected.image): box \(top.box), LiteRT's on the PNG \(expected.box)")
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
        let expected = try #require(Self.strongest)
        let detector = try Self.detector()
        let rgb = try Self.picture(expected.image)
        let reference = try Self.top(try detector.detect(rgb), expected.label)
        let frame = rgb.converted(to: format, yuvRange: .video)
        let top = try Self.top(try detector.detect(frame), expected.label)
        #expect(abs(top.score - reference.score) <= 0.05 && top.box.iou(reference.box) >= 0.9, "\(format): \(top)")
    }

    @Test("turned and mirrored frames give the same boxes", arguments: Orientation.allCases)
    func orientedFramesMapBackOntoTheSameObjects(_ orientation: Orientation) throws {
        let expected = try #require(Self.strongest)
        let detector = try Self.detector()
        let upright = try Self.picture(expected.image)
        // Pixels stored so that `orientation` turns them upright again.
        let stored = Self.storing(upright, as: orientation)
        #expect(stored.oriented(orientation).data == upright.data)
        let reference = try detector.detect(upright)
        let result = try detector.detect(stored, orientation: orientation)
        #expect(result.imageSize == upright.size)
        #expect(result.detections == reference.detections)
        // The box mapped to the stored frame covers the same pixels there.
        let top = try Self.top(result, expected.label)
        let storedBox = result.uprightToStored.apply(top.box)
        #expect(abs(Self.mean(stored, storedBox) - Self.mean(upright, top.box)) < 1.0)
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

    @Test func letterboxAndCropStillFindTheObject() throws {
        let expected = try #require(Self.framed)
        for mode in [ResizeMode.letterbox, .centerCrop] {
            let result = try Self.detector(.init(scoreThreshold: 0.3, resizeMode: mode)).detect(try Self.picture(expected.image))
            let top = try Self.top(result, expected.label)
            #expect(top.box.iou(expected.box) >= 0.7, "\(expected.image) \(mode): \(top.box), LiteRT's stretched \(expected.box)")
        }
    }

    @Test func allowlistAndMaxResultsFilter() throws {
        let expected = try #require(Self.strongest)
        let picture = try Self.picture(expected.image)
        // Labels match whatever their case.
        let only = try Self.detector(.init(categoryAllowlist: [expected.label.uppercased()])).detect(picture)
        #expect(only.detections.allSatisfy { $0.label == expected.label } && only.detections.contains { $0.box.iou(expected.box) >= 0.9 },
                "only \(expected.label) on \(expected.image): \(only.detections)")
        let without = try Self.detector(.init(categoryDenylist: [expected.label])).detect(picture)
        #expect(!without.detections.contains { $0.label == expected.label })
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

    /// COCO's category ids by name, from ../shared/coco128/annotations (COCO's own file).
    static func cocoCategories() throws -> [String: Int] {
        let folder = Fixtures.shared.appendingPathComponent("coco128/annotations")
        let file = try #require(Fixtures.folders(folder).first { $0.hasSuffix(".json") }, "no COCO annotations in \(folder.path)")
        let dataset = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(file))) as? [String: Any])
        let categories = try #require(dataset["categories"] as? [[String: Any]])
        return Dictionary(categories.compactMap { category in (category["name"] as? String).flatMap { name in (category["id"] as? Int).map { (name, $0) } } },
                          uniquingKeysWith: { first, _ in first })
    }

    @Test func encodingsFollowTheirFormats() throws {
        let expected = try #require(Self.strongest)
        let detector = try Self.detector()
        let picture = try Self.picture(expected.image)
        let result = try detector.detect(picture)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(ResultEncoding.json(result, image: "\(expected.image).png").utf8)) as? [String: Any])
        #expect(json["width"] as? Int == picture.size.width && json["height"] as? Int == picture.size.height)
        let first = try #require((json["detections"] as? [[String: Any]])?.first)
        #expect(first["label"] as? String == expected.label && first["class_id"] as? Int == expected.classIndex)
        let box = try #require(first["box"] as? [String: Double])
        #expect(Set(box.keys) == ["xmin", "ymin", "xmax", "ymax"])
        let floats = ResultEncoding.floats(result)
        #expect(floats.count == 6 * result.detections.count && floats[0] == Float(expected.classIndex) && floats[2] < floats[3] && floats[4] < floats[5])
        let coco = ResultEncoding.coco(result, imageID: 7, labels: detector.labels)
        let categoryID = try #require(try Self.cocoCategories()[expected.label], "\(expected.label) is not one of COCO's categories")
        #expect(coco.first?["category_id"] as? Int == categoryID && coco.first?["image_id"] as? Int == 7)
        let bbox = try #require(coco.first?["bbox"] as? [Double])
        #expect(abs(bbox[2] - result.detections[0].box.width) < 0.01)
        let yolo = ResultEncoding.yolo(result).split(separator: "\n").first!.split(separator: " ").compactMap { Double($0) }
        #expect(yolo.count == 6 && yolo[0] == Double(expected.classIndex) && yolo.dropFirst().allSatisfy { (0...1).contains($0) })
    }

    @Test func annotatorDrawsBoxesInClassColours() throws {
        let expected = try #require(Self.strongest)
        var picture = try Self.picture(expected.image)
        let result = try Self.detector().detect(picture)
        try Annotator().draw(result.detections, on: &picture)
        let top = try Self.top(result, expected.label)
        let color = Color.forClass(top.classIndex)
        // The middle of the box's left side, kept inside the picture (a box may touch its edge).
        let x = min(picture.width - 1, Int(top.box.minX.rounded())), y = min(picture.height - 1, Int((top.box.minY + top.box.maxY) / 2))
        let at = (y * picture.width + x) * 3
        #expect(Array(picture.data[at..<(at + 3)]) == [color.red, color.green, color.blue])
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
        let expected = try #require(ObjectDetectorTests.strongest)
        let result = try ObjectDetector(modelPath: path).detect(try ObjectDetectorTests.picture(expected.image))
        #expect(result.detections.first?.label == expected.label)
    }

    @Test("BMP, WebP, GIF and TIFF files decode; lossless ones to the pixels FFmpeg's CLI decodes", arguments: ["bmp", "webp", "gif", "tiff", "png"])
    func otherFormatsDecode(_ ext: String) throws {
        let expected = try #require(ObjectDetectorTests.strongest)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-picture.\(ext)").path
        try run("ffmpeg", ["-v", "error", "-y", "-i", LiteRT.picturePath(expected.image), path])
        let picture = try ImageFile.decode(path).upright
        let size = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0", path])
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap { Int($0) }
        #expect([picture.size.width, picture.size.height] == size, "ffprobe reads \(size)")
        if ["bmp", "tiff", "png"].contains(ext) {
            let raw = path + ".rgb"
            try run("ffmpeg", ["-v", "error", "-y", "-i", path, "-pix_fmt", "rgb24", "-f", "rawvideo", raw])
            #expect(picture.converted(to: .rgb24).data == (try Fixtures.bytes(URL(fileURLWithPath: raw))))
        }
        guard ext != "gif" else { return }  // 256 colours: the top detection may change
        let result = try ObjectDetectorTests.detector().detect(picture)
        #expect(result.detections.first?.label == expected.label)
    }
}
