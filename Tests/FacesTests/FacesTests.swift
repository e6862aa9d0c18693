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

    struct PeerFace {
        var box: Rect
        var keypoints: [Point]
        var transform: AffineMap
        var embedding: [Float]
        var crop: Image
    }

    /// A picture the peer ran on: its path and the faces it found.
    struct PeerPhoto {
        var path: String
        var faces: [PeerFace]
        /// One of ../shared/images/faces (not the astronaut, a picture from the other shared images).
        var isFacePhoto: Bool { path.contains("/images/faces/") }
        /// A face photo with one face.
        var isPortrait: Bool { isFacePhoto && faces.count == 1 }
    }

    /// The peer's pictures by name (the file's name without extension).
    static func peer() throws -> [String: PeerPhoto] {
        let folder = Fixtures.generated.appendingPathComponent("models/faces")
        var result: [String: PeerPhoto] = [:]
        for line in try String(contentsOf: folder.appendingPathComponent("peer.jsonl"), encoding: .utf8).split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let path = try #require(object["image"] as? String)
            let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
            let faces = try (try #require(object["faces"] as? [[String: Any]])).enumerated().map { k, face in
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
            result[name] = PeerPhoto(path: path, faces: faces)
        }
        return result
    }

    /// What the gallery's rule (the nearest enrolled face within the default threshold) makes of
    /// the peer's own embeddings: the name a face should get. Nil (no verdict) within 0.05 of the
    /// threshold, where two implementations may fairly fall either side.
    static func peerVerdict(_ face: PeerFace, among enrolled: [(name: String, embedding: [Float])]) -> FaceGallery.Match? {
        let match = FaceGallery.nearest(face.embedding, in: enrolled, threshold: FaceGallery.defaultThreshold)
        guard let distance = match.distance, abs(distance - FaceGallery.defaultThreshold) >= 0.05 else { return nil }
        return match
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
        for (name, photo) in try Self.peer() {
            let picture = try ImageFile.decode(photo.path).upright.converted(to: .rgb24)
            for face in photo.faces {
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
        for (name, photo) in try Self.peer() {
            for face in photo.faces {
                let embedding = try embedder.embed(face.crop)
                let cosine = zip(embedding, face.embedding).reduce(0) { $0 + $1.0 * $1.1 }
                #expect(1 - cosine <= 0.001, "\(name): cosine distance \(1 - cosine) from the peer's embedding")
                compared += 1
            }
        }
        #expect(compared > 0, "the peer found no face to compare with")
    }

    @Test func facesKeypointsAndAlignmentMatchThePeer() throws {
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        let peer = try Self.peer()
        #expect(peer.values.contains { !$0.faces.isEmpty }, "the peer found no face on the face photos")
        for (name, photo) in peer {
            let faces = try recognizer.faces(in: try ImageFile.decode(photo.path).upright)
            #expect(faces.count == photo.faces.count, "\(name): \(faces.count) faces, the peer \(photo.faces.count)")
            for other in photo.faces {
                let face = try #require(faces.first { $0.box.iou(other.box) >= 0.9 }, "\(name): no face where the peer has one at \(other.box)")
                #expect(zip(face.keypoints, other.keypoints).allSatisfy { $0.distance(to: $1) <= 2 })
                // The quality rules on the peer's keypoints give the quality of Spotter's face.
                #expect(face.quality == recognizer.quality(of: other.keypoints), "\(name): \(face.quality)")
                guard face.quality == .good else { continue }
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

    /// The portraits (face photos with one face) by file name, with the peer's embedding of each.
    static func portraits(_ peer: [String: PeerPhoto]) -> [(name: String, embedding: [Float])] {
        peer.filter(\.value.isPortrait).sorted { $0.key < $1.key }.map { ($0.key, $0.value.faces[0].embedding) }
    }

    /// Each of `people` (portraits) enrolled under its name, with Spotter's embedding of its face.
    static func enroll(_ people: [(name: String, embedding: [Float])], from peer: [String: PeerPhoto],
                       with recognizer: FaceRecognizer, into gallery: FaceGallery) throws {
        for person in people {
            let path = try #require(peer[person.name]).path
            let face = try #require(try recognizer.faces(in: try ImageFile.decode(path).upright).first, "\(person.name): no face")
            try gallery.enroll(name: person.name, embedding: try #require(face.embedding, "\(person.name): \(face.quality)"), crop: face.crop, source: path)
        }
    }

    /// The face photo with the most faces (two or more), for the tests that name several people.
    static func groupPhoto(_ peer: [String: PeerPhoto]) throws -> (name: String, photo: PeerPhoto) {
        let groups = peer.filter { $0.value.isFacePhoto && $0.value.faces.count >= 2 }
        let group = try #require(groups.max { $0.value.faces.count < $1.value.faces.count }, "no face photo with two faces or more")
        return (group.key, group.value)
    }

    @Test func everyFaceIsNamedAsThePeersEmbeddingsNameIt() throws {
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        let gallery = try Self.temporaryGallery()
        let peer = try Self.peer()
        let enrolled = Self.portraits(peer)
        #expect(enrolled.count >= 2, "fewer than two portraits to enroll")
        try Self.enroll(enrolled, from: peer, with: recognizer, into: gallery)
        // Faces on pictures that were not enrolled: named (the same person elsewhere) or not.
        var named = 0, unknown: [Float]?
        for (name, photo) in peer where !photo.isPortrait {
            let faces = try recognizer.faces(in: try ImageFile.decode(photo.path).upright)
            for other in photo.faces where recognizer.quality(of: other.keypoints) == .good {
                guard let verdict = Self.peerVerdict(other, among: enrolled) else { continue }
                let face = try #require(faces.first { $0.box.iou(other.box) >= 0.9 }, "\(name): no face where the peer has one at \(other.box)")
                let embedding = try #require(face.embedding, "\(name): \(face.quality)")
                let match = try gallery.identify(embedding)
                #expect(match.name == verdict.name, "\(name): \(match) where the peer's embeddings give \(verdict)")
                if verdict.name != nil { named += 1 } else { unknown = embedding }
            }
        }
        #expect(named > 0, "no face on a group photo was an enrolled person by the peer's embeddings")
        // A stranger (the astronaut on the shared pictures): a per-call threshold above the
        // distance names the nearest person after all.
        if let unknown {
            let match = try gallery.identify(unknown)
            #expect(match.name == nil && match.distance! > FaceGallery.defaultThreshold && match.nearest != nil)
            #expect(try gallery.identify(unknown, threshold: match.distance! + 0.01).name == match.nearest)
        }
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
        let peer = try Self.peer()
        let (groupName, group) = try Self.groupPhoto(peer)
        let faces = group.faces.sorted { $0.box.minX < $1.box.minX }
        // Only the person the peer finds first from the left is enrolled: the others are strangers.
        let everyone = Self.portraits(peer)
        let named = faces.compactMap { Self.peerVerdict($0, among: everyone)?.name ?? nil }
        let first = try #require(named.first, "\(groupName): no one on it has a portrait")
        let gallery = try Self.temporaryGallery()
        let enrolled = everyone.filter { $0.name == first }
        try Self.enroll(enrolled, from: peer, with: recognizer, into: gallery)
        let namer = try PersonNamer(recognizer: recognizer, gallery: gallery)
        let picture = try ImageFile.decode(group.path).upright
        let people = try ObjectDetector(modelPath: Fixtures.detectModel.path).detect(picture).detections
        let boxes = try namer.name(people, in: picture)
        #expect(boxes.count == people.count && zip(boxes, people).allSatisfy { $0.box == $1.box && $0.label == $1.label })
        // Each face names one person box, left to right as the faces stand; other boxes (ties, a
        // box over two people) get no face of their own.
        let identified = boxes.filter { $0.identity != nil }.sorted { $0.box.minX < $1.box.minX }
        let verdicts = faces.map { Self.peerVerdict($0, among: enrolled) }
        #expect(identified.allSatisfy { $0.label == "person" })
        #expect(identified.count == faces.count, "\(groupName): \(identified.count) person boxes named for \(faces.count) faces")
        for (box, verdict) in zip(identified, verdicts) {
            guard let verdict else { continue }
            #expect(box.identity?.name == verdict.name, "\(groupName): \(String(describing: box.identity)) where the peer gives \(verdict)")
            if verdict.name == nil { #expect(box.identity?.distance.map { $0 > FaceGallery.defaultThreshold } == true) }
        }
        #expect(verdicts.contains { $0 != nil && $0?.name == nil }, "\(groupName): no stranger beside \(first)")
        // No person, no face search: the detections come back as they were.
        let ties = people.filter { $0.label != "person" }
        #expect(try namer.name(ties, in: picture) == ties)
    }

    @Test func emptyGalleryCallsEveryoneUnknown() throws {
        let match = try Self.temporaryGallery().identify([Float](repeating: 0.1, count: 128))
        #expect(match == .init(name: nil, distance: nil, nearest: nil))
    }

    @Test func tinyAndTurnedFacesAreReportedInsteadOfEmbedded() throws {
        // A portrait's face is too small when the eyes must be farther apart than they are.
        let (name, photo) = try #require(try Self.peer().filter(\.value.isPortrait).min { $0.key < $1.key })
        let eyes = photo.faces[0].keypoints[0].distance(to: photo.faces[0].keypoints[1])
        let portrait = try ImageFile.decode(photo.path).upright
        let strict = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder, options: .init(minimumEyeDistance: eyes + 20))
        let faces = try strict.faces(in: portrait)
        #expect(faces.count == 1 && faces.allSatisfy { $0.quality == .tooSmall && $0.embedding == nil && $0.crop == nil }, "\(name): eyes \(eyes) px apart")
        let recognizer = try FaceRecognizer(detectorPath: Self.detector, embedderPath: Self.embedder)
        #expect(try recognizer.faces(in: portrait).first?.quality == recognizer.quality(of: photo.faces[0].keypoints))
        // A nose far to one side of the eyes' midline: a face seen from the side.
        let side = recognizer.quality(of: [Point(x: 100, y: 100), Point(x: 140, y: 100), Point(x: 142, y: 120), Point(x: 125, y: 140)])
        #expect(side == .notFrontal)
        #expect(recognizer.quality(of: [Point(x: 100, y: 100), Point(x: 140, y: 100), Point(x: 121, y: 120), Point(x: 120, y: 140)]) == .good)
    }
}
