import ArgumentParser
import Detection
import Faces
import Foundation
import Imaging
import Inference
import Media

/// The face models and gallery, shared by every `faces` subcommand.
struct FaceFlags: ParsableArguments {
    @Option(help: "The face detector: a .tflite file or a catalog name (default: $SPOTTER_FACE_DETECTOR, else blazeface-short-range).")
    var detector: String?

    @Option(help: "The embedding model, e.g. MobileFaceNet (default: $SPOTTER_FACE_EMBEDDER).")
    var embedder: String?

    @Option(help: "The gallery file (default: $XDG_DATA_HOME/spotter/faces.sqlite, else ~/.local/share/spotter/faces.sqlite).")
    var gallery: String?

    @Option(parsing: .unconditional, help: "Distance between embeddings within which two faces are one person (default 1.0; see the README).")
    var threshold: Float = FaceGallery.defaultThreshold

    @Option(parsing: .unconditional, help: "Threads for inference (default: the cores this process may use).")
    var threads: Int?

    @Option(help: "Kernels: xnnpack or reference.")
    var backend: Interpreter.Options.Backend = .xnnpack

    @OptionGroup var store: StoreFlags

    func validate() throws {
        guard threshold > 0 else { throw ValidationError("--threshold must be above 0") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
    }

    func makeRecognizer() throws -> FaceRecognizer {
        try Self.recognizer(detector: detector, embedder: embedder, threads: threads, backend: backend, store: store)
    }

    /// A recognizer from the given models, else the environment's and the catalog's.
    static func recognizer(detector: String?, embedder: String?, threads: Int?, backend: Interpreter.Options.Backend,
                           store: StoreFlags) throws -> FaceRecognizer {
        let environment = ProcessInfo.processInfo.environment
        let detectorPath = try store.resolve(detector ?? environment["SPOTTER_FACE_DETECTOR"] ?? "blazeface-short-range").path
        guard let embedderPath = embedder ?? environment["SPOTTER_FACE_EMBEDDER"] else {
            throw CommandFailure("give the face embedding model with --embedder (or --face-embedder) FILE (a MobileFaceNet .tflite: 112x112 float input, 128 numbers out) or set SPOTTER_FACE_EMBEDDER")
        }
        guard FileManager.default.fileExists(atPath: embedderPath) else { throw CommandFailure("--embedder \(embedderPath): no such file") }
        return try FaceRecognizer(detectorPath: detectorPath, embedderPath: embedderPath,
                                  options: .init(threadCount: threadsWithinCores(threads), backend: backend))
    }

    func openGallery() throws -> FaceGallery { try FaceGallery(path: gallery ?? FaceGallery.defaultPath) }
}

/// `--faces GALLERY` for `video` and `record`: names on person boxes.
struct FaceNamingFlags: ParsableArguments {
    @Option(help: "A face gallery (see `spotter faces`): person boxes get the name of a known face inside them, or `unknown`.")
    var faces: String?

    @Option(help: "With --faces: the face detector (default: $SPOTTER_FACE_DETECTOR, else blazeface-short-range).")
    var faceDetector: String?

    @Option(help: "With --faces: the embedding model (default: $SPOTTER_FACE_EMBEDDER).")
    var faceEmbedder: String?

    @Option(parsing: .unconditional, help: "With --faces: distance within which a face is an enrolled person.")
    var faceThreshold: Float = FaceGallery.defaultThreshold

    /// Before any model loads: the gallery must exist (a typo must not name everyone unknown).
    func validate() throws {
        if let faces, !FileManager.default.fileExists(atPath: faces) {
            throw ValidationError("--faces \(faces): no such gallery (enroll people with `spotter faces enroll NAME PHOTO --gallery \(faces)`)")
        }
        guard faceThreshold > 0 else { throw ValidationError("--face-threshold must be above 0") }
    }

    /// The namer, nil without `--faces`.
    func makeNamer(store: StoreFlags, threads: Int?) throws -> PersonNamer? {
        guard let faces else { return nil }
        let recognizer = try FaceFlags.recognizer(detector: faceDetector, embedder: faceEmbedder, threads: threads, backend: .xnnpack, store: store)
        return try PersonNamer(recognizer: recognizer, gallery: try FaceGallery(path: faces), threshold: faceThreshold)
    }
}

struct FacesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "faces",
        abstract: "Recognise people by their faces: enroll them by name, then identify them in pictures.",
        discussion: """
            Faces are found with BlazeFace, aligned on their eyes, nose and mouth, and turned into \
            embeddings by a recognition model such as MobileFaceNet; two faces are one person when their \
            embeddings are closer than --threshold. The gallery is one local SQLite file holding each \
            person's embeddings and the aligned crops they came from; nothing is sent anywhere, and \
            `faces rm` deletes all of a person's data.

            Examples:
              export SPOTTER_FACE_EMBEDDER=models/mobile_face_net.tflite
              spotter faces enroll "Grace Hopper" hopper1.jpg hopper2.jpg
              spotter faces identify party.jpg --save-dir named/
              spotter faces identify photos/ --json > faces.jsonl
              spotter faces compare a.jpg b.jpg
              spotter faces list
              spotter faces rm "Grace Hopper"
            """,
        subcommands: [Enroll.self, Identify.self, Compare.self, List.self, Remove.self])

    /// The largest face of good quality in a picture, or why there is none.
    static func largestFace(in file: String, recognizer: FaceRecognizer) throws -> Face {
        let decoded = try ImageFile.decode(file)
        let faces = try recognizer.faces(in: decoded.stored, orientation: decoded.orientation)
        guard !faces.isEmpty else { throw CommandFailure("\(file): no face found") }
        guard let face = faces.filter({ $0.quality == .good }).max(by: { $0.box.area < $1.box.area }) else {
            throw CommandFailure("\(file): the faces found are \(Set(faces.map(\.quality.rawValue)).sorted().joined(separator: ", ")); use a larger, frontal photo")
        }
        return face
    }

    static func describe(_ box: Rect) -> String {
        String(format: "x %.0f-%.0f, y %.0f-%.0f", box.minX, box.maxX, box.minY, box.maxY)
    }

    struct Enroll: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "enroll",
            abstract: "Add a person's face from one or more photos (the largest face of each, or every face with --all).",
            discussion: """
                Examples:
                  spotter faces enroll Ada ada-1.jpg ada-2.jpg --embedder mfn.tflite
                  spotter faces enroll Team group.jpg --all
                """)

        @Argument(help: "The person's name.")
        var name: String

        @Argument(help: "Photos of the person.")
        var photos: [String]

        @Flag(help: "Enroll every usable face of each photo (each is listed), not only the largest.")
        var all = false

        @OptionGroup var flags: FaceFlags

        func run() throws {
            let recognizer = try flags.makeRecognizer()
            let gallery = try flags.openGallery()
            var enrolled = 0, failures = 0
            for photo in photos {
                do {
                    let faces: [Face]
                    if all {
                        let decoded = try ImageFile.decode(photo)
                        faces = try recognizer.faces(in: decoded.stored, orientation: decoded.orientation).filter { $0.quality == .good }
                        guard !faces.isEmpty else { throw CommandFailure("\(photo): no usable face") }
                    } else {
                        faces = [try FacesCommand.largestFace(in: photo, recognizer: recognizer)]
                    }
                    for face in faces {
                        try gallery.enroll(name: name, embedding: face.embedding!, crop: face.crop, source: photo)
                        print("enrolled \(name) from \(photo) (\(FacesCommand.describe(face.box)))")
                        enrolled += 1
                    }
                } catch {
                    failures += 1
                    FileHandle.standardError.write(Data("\(error)\n".utf8))
                }
            }
            if enrolled > 0 {
                print("\(name): \(try gallery.people().first { $0.name == name.trimmingCharacters(in: .whitespaces) }?.count ?? 0) face(s) in \(gallery.path)")
            }
            if failures > 0 { throw CommandFailure("\(failures) of \(photos.count) photos were not enrolled (see above)") }
            if enrolled == 0 { throw CommandFailure("nothing was enrolled") }
        }
    }

    struct Identify: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "identify",
            abstract: "Name the faces in pictures (unknown when no enrolled person is within --threshold).",
            discussion: """
                With --json, one object per picture per line: {"image", "width", "height", "faces": [{"box": \
                {"xmin", "ymin", "xmax", "ymax"}, "score", "keypoints": [[x, y] x6], "quality", "name" (null \
                when unknown or not recognizable), "distance" (to the nearest enrolled face, or null)}], \
                "milliseconds"}, in pixels of the picture as displayed; "milliseconds" is the time to find, \
                align and embed the faces, without decoding the picture.

                Examples:
                  spotter faces identify party.jpg
                  spotter faces identify photos/ --json --save-dir named/
                """)

        @Argument(help: "Pictures or directories of pictures.")
        var inputs: [String]

        @Flag(help: "Print one JSON object per picture per line.")
        var json = false

        @Option(help: "Write copies with named boxes here (never over an input).")
        var saveDir: String?

        @OptionGroup var flags: FaceFlags

        func run() throws {
            let recognizer = try flags.makeRecognizer()
            let enrolled = try flags.openGallery().embeddings()
            if enrolled.isEmpty { FileHandle.standardError.write(Data("note: the gallery is empty, so every face is unknown (enroll people with `spotter faces enroll`)\n".utf8)) }
            let found = expand(inputs, recursive: false, skipping: saveDir)
            for missing in found.missing { FileHandle.standardError.write(Data("\(missing): no such file or folder\n".utf8)) }
            guard !found.files.isEmpty else { throw CommandFailure("no pictures found in \(inputs.joined(separator: " "))") }
            let targets = saveDir.map { annotatedPaths(for: found.files, in: $0) } ?? [:]
            let annotator = saveDir == nil ? nil : try Annotator()
            var failures = found.missing.count
            for file in found.files.map(\.path) {
                do {
                    let decoded = try ImageFile.decode(file)
                    let started = DispatchTime.now().uptimeNanoseconds
                    let faces = try recognizer.faces(in: decoded.stored, orientation: decoded.orientation)
                    let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
                    let matches = faces.map { face in
                        face.embedding.map { FaceGallery.nearest($0, in: enrolled, threshold: flags.threshold) }
                    }
                    let size = decoded.orientation.uprightSize(decoded.stored.size)
                    print(json ? Self.json(file, size: size, faces, matches, milliseconds: milliseconds) : Self.table(file, size: size, faces, matches))
                    if let target = targets[file], let annotator {
                        var picture = decoded.upright
                        let named = zip(faces, matches).enumerated().map { index, pair in
                            let (face, match) = pair
                            let label = face.quality != .good ? face.quality.rawValue : match?.name ?? "unknown"
                            return Detection(classIndex: match?.name == nil ? 0 : index + 1, label: label, score: face.score, box: face.box,
                                             normalizedBox: face.box, keypoints: face.keypoints)
                        }
                        annotator.draw(named, on: &picture)
                        try FileManager.default.createDirectory(atPath: URL(fileURLWithPath: target).deletingLastPathComponent().path,
                                                                withIntermediateDirectories: true)
                        try ImageFile.write(picture, to: target)
                    }
                } catch {
                    failures += 1
                    FileHandle.standardError.write(Data("\(file): \(error)\n".utf8))
                }
            }
            if failures > 0 { throw CommandFailure("\(failures) of \(found.files.count + found.missing.count) inputs could not be processed (see above)") }
        }

        static func json(_ file: String, size: Size, _ faces: [Face], _ matches: [FaceGallery.Match?], milliseconds: Double) -> String {
            func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
            let objects: [[String: Any]] = zip(faces, matches).map { face, match in
                ["box": ["xmin": round3(face.box.minX), "ymin": round3(face.box.minY), "xmax": round3(face.box.maxX), "ymax": round3(face.box.maxY)],
                 "score": round3(Double(face.score)), "keypoints": face.keypoints.map { [round3($0.x), round3($0.y)] },
                 "quality": face.quality.rawValue, "name": match?.name ?? NSNull(),
                 "distance": match?.distance.map { round3(Double($0)) } ?? NSNull()]
            }
            return ResultEncoding.serialize(["image": file, "width": size.width, "height": size.height, "faces": objects,
                                             "milliseconds": round3(milliseconds)])
        }

        static func table(_ file: String, size: Size, _ faces: [Face], _ matches: [FaceGallery.Match?]) -> String {
            var lines = ["\(file) (\(size.width)x\(size.height)), \(faces.count) face\(faces.count == 1 ? "" : "s")"]
            for (face, match) in zip(faces, matches) {
                let who: String
                if face.quality != .good { who = "(\(face.quality.rawValue))" }
                else if let name = match?.name { who = "\(name), distance \(String(format: "%.3f", match!.distance!))" }
                else if let distance = match?.distance { who = "unknown (nearest \(match!.nearest!), \(String(format: "%.3f", distance)))" }
                else { who = "unknown" }
                lines.append("  \(who)  \(FacesCommand.describe(face.box))  score \(String(format: "%.2f", face.score))")
            }
            return lines.joined(separator: "\n")
        }
    }

    struct Compare: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "compare",
            abstract: "Say whether the largest faces of two photos are one person, with their distance.",
            discussion: "Example:\n  spotter faces compare a.jpg b.jpg --embedder mobile_face_net.tflite")

        @Argument(help: "The first photo.")
        var first: String

        @Argument(help: "The second photo.")
        var second: String

        @OptionGroup var flags: FaceFlags

        func run() throws {
            let recognizer = try flags.makeRecognizer()
            let a = try FacesCommand.largestFace(in: first, recognizer: recognizer)
            let b = try FacesCommand.largestFace(in: second, recognizer: recognizer)
            let distance = FaceEmbedder.distance(a.embedding!, b.embedding!)
            print(String(format: "distance %.3f: %@ (threshold %.2f)", distance,
                         distance <= flags.threshold ? "the same person" : "different people", flags.threshold))
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the people in the gallery.", discussion: "Example:\n  spotter faces list")

        @Option(help: "The gallery file (default: $XDG_DATA_HOME/spotter/faces.sqlite, else ~/.local/share/spotter/faces.sqlite).")
        var gallery: String?

        func run() throws {
            let opened = try FaceGallery(path: gallery ?? FaceGallery.defaultPath)
            let people = try opened.people()
            if people.isEmpty { print("no one is enrolled in \(opened.path)") }
            for person in people { print("\(person.name)\t\(person.count) face\(person.count == 1 ? "" : "s")") }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Delete a person with all their embeddings and crops.", discussion: "Example:\n  spotter faces rm \"Grace Hopper\"")

        @Argument(help: "The person's name.")
        var name: String

        @Option(help: "The gallery file (default: $XDG_DATA_HOME/spotter/faces.sqlite, else ~/.local/share/spotter/faces.sqlite).")
        var gallery: String?

        func run() throws {
            let opened = try FaceGallery(path: gallery ?? FaceGallery.defaultPath)
            guard try opened.remove(name: name) else {
                throw CommandFailure("no one named \"\(name)\" in \(opened.path) (see `spotter faces list`)")
            }
            print("removed \(name) and their faces from \(opened.path)")
        }
    }
}
