import Detection
import Faces
import Foundation
import Imaging
import Inference
import Media
import Testing
import TestSupport

/// Face alignment, embeddings and recognition against the Python peer (scripts/peer_faces.py:
/// LiteRT BlazeFace, Umeyama's similarity, cv2.warpAffine, LiteRT MobileFaceNet; its output in
/// fixtures-generated/models/faces).
@Suite struct FacesTests {
    static let detector = Fixtures.shared.appendingPathComponent("models/blazeface-short-range/face_detection_short_range.tflite").path
    static let embedder = Fixtures.shared.appendingPathComponent("models/mobilefacenet/mobile_face_net.tflite").path
    static func photo(_ name: String) -> String { Fixtures.shared.appendingPathComponent("images/faces/\(name)").path }

    struct PeerFace {
        var box: Rect
        var keypoints: [Point]
        var transform: AffineMap
        var embedding: [Float]
        var crop: Image
    }

    /// The peer's faces per picture name (without extension).
    static func peer() throws -> [String: [PeerFace]] {
        let folder = Fixtures.generated.appendingPathComponent("models/faces")
        var result: [String: [PeerFace]] = [:]
        for line in try String(contentsOf: folder.appendingPathComponent("peer.jsonl"), encoding: .utf8).split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let name = URL(fileURLWithPath: try #require(object["image"] as? String)).deletingPathExtension().lastPathComponent
            result[name] = try (try #require(object["faces"] as? [[String: Any]])).enumerated().map { k, face in
                let box = try #require(face["box"] as? [String: Double])
                let m = try #require(face["transform"] as? [[Double]])
                let crop = try Fixtures.npy(folder.appendingPathComponent("crops/\(name)-\(k).npy"))
                return PeerFace(
                    box: Rect(minX: box["xmin"]!, minY: box["ymin"]!, maxX: box["xmax"]!, maxY: box["ymax"]!),
                    keypoints: try #require(face["keypoints"] as? [[Double]]).map { Point(x: $0[0], y: $0[1]) },
                    transform: AffineMap(a: m[0][0], b: m[0][1], c: m[1][0], d: m[1][1], tx: m[0][2], ty: m[1][2]),
                    embedding: try #require(face["embedding"] as? [Double]).map(Float.init),
                    crop: try Image(width: 112, height: 112, format: .rgb24, data: crop.data))
            }
        }
        return result
    }

    // MARK: Alignment geometry

    @Test(arguments: [-90.0, -30, 0, 12.5, 45, 170])
    func aFaceRotatedByAKnownAngleLandsOnTheTemplate(degrees: Double) throws {
        // The template turned, scaled 2.5x and moved: the estimate undoes exactly that.
        let angle = degrees * .pi / 180, scale = 2.5
        // Turned about the template's middle, which lands on the picture's centre.
        let (cx, cy) = (56.0, 72.0), (ca, sa) = (scale * cos(angle), scale * sin(angle))
        let turn = AffineMap(a: ca, b: -sa, c: sa, d: ca, tx: 320 - (ca * cx - sa * cy), ty: 240 - (sa * cx + ca * cy))
        let keypoints = FaceAlignment.template.map { turn.apply($0) }
        let transform = FaceAlignment.transform(keypoints: keypoints)
        for (point, target) in zip(keypoints, FaceAlignment.template) {
            #expect(transform.apply(point).distance(to: target) < 1e-9)
        }
        // Dots drawn at the turned landmarks land on the template's in the crop.
        var picture = Image(width: 640, height: 480, format: .rgb24)
        for point in keypoints { picture.fill(x: Int(point.x) - 5, y: Int(point.y) - 5, width: 11, height: 11, color: Color(red: 255, green: 255, blue: 255)) }
        let crop = FaceAlignment.crop(picture, transform: transform)
        for target in FaceAlignment.template {
            let centre = crop.data[(Int(target.y) * 112 + Int(target.x)) * 3]
            #expect(centre > 200, "the dot for \(target) is not under it (\(centre)) at \(degrees)°")
        }
        #expect(crop.data[(5 * 112 + 5) * 3] == 0, "the crop's corner is background")
    }

    @Test func warpMatchesOpenCVsWarpAffineWithinOneLevel() throws {
        // The peer's own transforms, so only the resampling is compared.
        for (name, faces) in try Self.peer() {
            let path = name == "astronaut" ? Fixtures.shared.appendingPathComponent("images/astronaut.png").path
                : Self.photo(name + (name == "grace_hopper" ? ".png" : ".jpg"))
            let picture = try ImageFile.decode(path).upright.converted(to: .rgb24)
            for face in faces {
                let crop = picture.warpedAffine(face.transform, to: FaceAlignment.cropSize)
                let differences = zip(crop.data, face.crop.data).map { abs(Int($0) - Int($1)) }
                #expect(differences.max()! <= 1, "\(name): up to \(differences.max()!) levels from OpenCV")
            }
        }
    }

    @Test func embeddingsOfThePeersCropsMatchItsEmbeddings() throws {
        let embedder = try FaceEmbedder(modelPath: Self.embedder)
        #expect(embedder.dimension == 128 && embedder.inputSize == FaceAlignment.cropSize)
        var compared = 0
        for (name, faces) in try Self.peer() {
            for face in faces {
                let embedding = try embedder.embed(face.crop)
                let cosine = zip(embedding, face.embedding).reduce(0) { $0 + $1.0 * $1.1 }
                #expect(1 - cosine <= 0.001, "\(name): cosine distance \(1 - cosine) from the peer's embedding")
                compared += 1
            }
        }
        #expect(compared == 6)
    }

    @Test func facesKeypointsAndAlignmentMatchThePeer() throws {
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        let peer = try Self.peer()
        for name in ["obama", "biden", "two_people", "grace_hopper"] {
            let picture = try ImageFile.decode(Self.photo(name + (name == "grace_hopper" ? ".png" : ".jpg"))).upright
            let faces = try recognizer.faces(in: picture)
            let expected = try #require(peer[name])
            #expect(faces.count == expected.count)
            for other in expected {
                let face = try #require(faces.first { $0.box.iou(other.box) >= 0.9 })
                #expect(zip(face.keypoints, other.keypoints).allSatisfy { $0.distance(to: $1) <= 2 })
                #expect(face.quality == .good)
                // The same face maps to the template within a pixel across the crop.
                let corners = [Point(x: other.box.minX, y: other.box.minY), Point(x: other.box.maxX, y: other.box.maxY)]
                #expect(corners.allSatisfy { face.transform.apply($0).distance(to: other.transform.apply($0)) <= 1 }, "\(name): \(face.transform) against \(other.transform)")
                let distance = FaceEmbedder.distance(try #require(face.embedding), other.embedding)
                #expect(distance < 0.1, "\(name): embedding \(distance) from the peer's")
            }
        }
    }

    // MARK: Recognition and the gallery

    static func temporaryGallery() throws -> FaceGallery {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-faces-\(UUID().uuidString)")
        return try FaceGallery(path: folder.appendingPathComponent("faces.sqlite").path)
    }

    @Test func enrolledPeopleAreNamedOnTheTwoPeoplePhotoAndTheAstronautIsUnknown() throws {
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        let gallery = try Self.temporaryGallery()
        for (name, file) in [("Obama", "obama.jpg"), ("Biden", "biden.jpg"), ("Grace Hopper", "grace_hopper.png")] {
            let face = try #require(try recognizer.faces(in: try ImageFile.decode(Self.photo(file)).upright).first)
            try gallery.enroll(name: name, embedding: try #require(face.embedding), crop: face.crop, source: file)
        }
        let both = try recognizer.faces(in: try ImageFile.decode(Self.photo("two_people.jpg")).upright).sorted { $0.box.minX < $1.box.minX }
        let names = try both.map { try gallery.identify(try #require($0.embedding)).name }
        #expect(names == ["Obama", "Biden"])
        let astronaut = try #require(try recognizer.faces(in: try ImageFile.decode(Fixtures.shared.appendingPathComponent("images/astronaut.png").path).upright).first)
        let match = try gallery.identify(try #require(astronaut.embedding))
        #expect(match.name == nil && match.distance! > FaceGallery.defaultThreshold && match.nearest != nil)
        // A per-call threshold above the distance names the nearest person after all.
        #expect(try gallery.identify(astronaut.embedding!, threshold: match.distance! + 0.01).name == match.nearest)
    }

    @Test func galleryKeepsPeopleAcrossOpeningsAndRemovesEverythingOfAPerson() throws {
        let gallery = try Self.temporaryGallery()
        let a = (0..<128).map { Float($0 % 7) / 10 }, b = (0..<128).map { Float($0 % 5) / 10 }
        var crop = Image(width: 112, height: 112, format: .rgb24)
        crop.fill(x: 10, y: 10, width: 20, height: 20, color: Color(red: 200, green: 10, blue: 10))
        try gallery.enroll(name: "Ada", embedding: a, crop: crop, source: "ada.jpg")
        try gallery.enroll(name: "Ada", embedding: b, crop: nil, source: nil)
        try gallery.enroll(name: "Bob", embedding: b, crop: crop, source: "bob.jpg")
        let reopened = try FaceGallery(path: gallery.path)
        #expect(try reopened.people() == [.init(name: "Ada", count: 2), .init(name: "Bob", count: 1)])
        #expect(try reopened.embeddings().first?.embedding == a)
        let png = try #require(try reopened.crops(of: "Ada").first)
        #expect(try ImageFile.decode(bytes: png, name: "crop.png").upright.converted(to: .rgb24).data == crop.data)
        #expect(try reopened.identify(a).name == "Ada" && reopened.identify(a).distance == 0)
        #expect(try reopened.remove(name: "Ada"))
        #expect(try !reopened.remove(name: "Ada"))
        #expect(try reopened.people().map(\.name) == ["Bob"])
        #expect(try reopened.crops(of: "Ada").isEmpty && reopened.embeddings().count == 1)
        #expect(try reopened.identify(a).name != "Ada")
        #expect(throws: FaceError.dimensionMismatch(gallery: 128, embedder: 3)) { try reopened.enroll(name: "Cy", embedding: [1, 0, 0], crop: nil, source: nil) }
        #expect(throws: FaceError.invalidName("  ")) { try reopened.enroll(name: "  ", embedding: a, crop: nil, source: nil) }
    }

    @Test func personBoxesTakeTheNameOfTheFaceInsideThem() throws {
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        let gallery = try Self.temporaryGallery()
        let obama = try #require(try recognizer.faces(in: try ImageFile.decode(Self.photo("obama.jpg")).upright).first)
        try gallery.enroll(name: "Obama", embedding: try #require(obama.embedding), crop: nil, source: nil)
        let namer = try PersonNamer(recognizer: recognizer, gallery: gallery)
        let picture = try ImageFile.decode(Self.photo("two_people.jpg")).upright
        let people = try ObjectDetector(modelPath: Fixtures.detectModel.path).detect(picture).detections
        let named = try namer.name(people, in: picture)
        #expect(named.count == people.count && zip(named, people).allSatisfy { $0.box == $1.box && $0.label == $1.label })
        // Obama stands left, Biden right; other boxes (ties, a box over both) get no face of their own.
        let identified = named.filter { $0.identity != nil }.sorted { $0.box.minX < $1.box.minX }
        #expect(identified.map(\.label) == ["person", "person"])
        #expect(identified.map { $0.identity?.name } == ["Obama", nil])
        #expect(identified.last?.identity?.distance.map { $0 > FaceGallery.defaultThreshold } == true)
        // No person, no face search: the detections come back as they were.
        let ties = people.filter { $0.label != "person" }
        #expect(try namer.name(ties, in: picture) == ties)
    }

    @Test func emptyGalleryCallsEveryoneUnknown() throws {
        let match = try Self.temporaryGallery().identify([Float](repeating: 0.1, count: 128))
        #expect(match == .init(name: nil, distance: nil, nearest: nil))
    }

    @Test func tinyAndTurnedFacesAreReportedInsteadOfEmbedded() throws {
        // Obama's eyes are about 114 px apart on his portrait: too small when 150 are asked for.
        let portrait = try ImageFile.decode(Self.photo("obama.jpg")).upright
        let strict = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder, options: .init(minimumEyeDistance: 150))
        let faces = try strict.faces(in: portrait)
        #expect(faces.count == 1 && faces.allSatisfy { $0.quality == .tooSmall && $0.embedding == nil && $0.crop == nil })
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        #expect(try recognizer.faces(in: portrait).first?.quality == .good)
        // A nose far to one side of the eyes' midline: a face seen from the side.
        let side = recognizer.quality(of: [Point(x: 100, y: 100), Point(x: 140, y: 100), Point(x: 142, y: 120), Point(x: 125, y: 140)])
        #expect(side == .notFrontal)
        #expect(recognizer.quality(of: [Point(x: 100, y: 100), Point(x: 140, y: 100), Point(x: 121, y: 120), Point(x: 120, y: 140)]) == .good)
    }
}
