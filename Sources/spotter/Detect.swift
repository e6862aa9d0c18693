import ArgumentParser
import Detection
import Foundation
import Imaging
import Inference
import Media
import ModelStore
import Pipeline

enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    case table, json, coco, yolo, floats
}

enum ResizeChoice: String, ExpressibleByArgument, CaseIterable {
    case stretch, crop, letterbox

    var mode: ResizeMode {
        switch self {
        case .stretch: return .stretch
        case .crop: return .centerCrop
        case .letterbox: return .letterbox
        }
    }
}

/// Options shared by every command that runs the detector.
struct DetectorOptions: ParsableArguments {
    @Option(help: "The model: a .tflite file, a catalog name (see `spotter models list`) or an http(s) URL (default: $SPOTTER_MODEL, else coco-ssd-mobilenet-v1).")
    var model: String?

    @Option(help: "A labels file (default: the model's metadata, else labelmap.txt or labels.txt beside the model).")
    var labels: String?

    @Option(parsing: .unconditional, help: "Minimum score, 0...1.")
    var threshold: Float = 0.5

    @Option(parsing: .unconditional, help: "At most this many detections per picture.")
    var maxResults: Int?

    @Option(help: "Only these classes, comma-separated label names (for example person,cup).")
    var classes: String?

    @Option(parsing: .unconditional, help: "Threads for inference (default: the cores this process may use; at most that many).")
    var threads: Int?

    @Option(help: "Kernels: xnnpack or reference.")
    var backend: Interpreter.Options.Backend = .xnnpack

    @Option(help: Interpreter.Options.FloatPrecision.help)
    var precision: Interpreter.Options.FloatPrecision = .float32

    @Option(help: "How pictures are fitted to the model input: stretch, crop or letterbox (default: the model family's own, stretch for SSD, letterbox for YOLO).")
    var resize: ResizeChoice?

    @Option(parsing: .unconditional, help: "For float models without normalization metadata: the mean subtracted from pixels.")
    var mean: Float?

    @Option(parsing: .unconditional, help: "For float models without normalization metadata: the divisor after the mean.")
    var std: Float?

    @OptionGroup var store: StoreFlags

    func validate() throws {
        guard (0...1).contains(threshold) else { throw ValidationError("--threshold must be between 0 and 1") }
        if let maxResults, maxResults < 1 { throw ValidationError("--max-results must be at least 1") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
        guard (mean == nil) == (std == nil) else { throw ValidationError("give --mean and --std together") }
        if let std, std == 0 { throw ValidationError("--std cannot be 0") }
    }

    /// The model file: `--model`, else `$SPOTTER_MODEL`, else the catalog's default, resolved
    /// through the store (a file, the cache, or a download).
    var modelPath: String {
        get throws {
            let reference = model ?? ProcessInfo.processInfo.environment["SPOTTER_MODEL"] ?? Catalog.defaultModel
            return try store.resolve(reference).path
        }
    }

    /// Builds the detector, turning library errors into one line that says what to do.
    /// - Parameter pipelined: other threads decode and encode (video): let inference threads sleep between frames.
    func makeDetector(pipelined: Bool = false) throws -> ObjectDetector {
        let path = try modelPath
        var options = try detectorOptions()
        options.threadCount = threadsWithinCores(threads)
        options.parksThreadsBetweenPictures = pipelined
        let detector = try loading(path) { try ObjectDetector(modelPath: path, options: options) }
        if detector.labels == nil { warnNoLabels(path) }
        return detector
    }

    /// How `video` and `record` detect: a file's frames ahead on `--threads` single-threaded
    /// detectors, several frames at once (``DetectAhead``: on two cores about a third more frames
    /// a second than one detector split across both, whose threads wait for each other at every
    /// layer while decoding and encoding compete for the cores); a live source, motion gating, face
    /// naming or one thread on one detector with every thread, one frame at a time.
    func makeVideoDetection(file: Bool) throws -> VideoDetection {
        let count = threadsWithinCores(threads)
        guard file, count > 1 else {
            let detector = try makeDetector(pipelined: true)
            return VideoDetection(detect: { try detector.detect($0).detections }, ahead: nil)
        }
        let path = try modelPath
        let options = try detectorOptions()
        let pool = try loading(path) { try DetectorPool(modelPath: path, count: count, options: options) }
        if pool.labels == nil { warnNoLabels(path) }
        let detect: @Sendable (Image) throws -> [Detection] = { image in try pool.withDetector { try $0.detect(image).detections } }
        return VideoDetection(detect: detect, ahead: DetectAhead(threads: count, detect: detect))
    }

    private func detectorOptions() throws -> ObjectDetector.Options {
        var options = ObjectDetector.Options(scoreThreshold: threshold, maxResults: maxResults, backend: backend, resizeMode: resize?.mode, labelsPath: labels)
        options.floatPrecision = precision
        if let classes { options.categoryAllowlist = classes.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        if let mean, let std { options.normalization = .init(mean: [mean], std: [std]) }
        return options
    }

    private func loading<T>(_ path: String, _ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch let error as DetectorError {
            if case .cannotReadLabels = error { throw CommandFailure("--labels: \(error)") }
            throw CommandFailure("cannot use \(path): \(error)")
        } catch {
            throw CommandFailure("cannot use \(path): \(error)")
        }
    }

    private func warnNoLabels(_ path: String) {
        warn("no labels for \(path) (none in its metadata, no labelmap.txt or labels.txt beside it): classes print as \"class N\"; pass --labels FILE")
    }
}

/// The detection of `video` and `record` (``DetectorFlags/makeVideoDetection(file:)``): the step the
/// analysis calls, and for a file the same step run ahead on the pipeline's threads.
struct VideoDetection {
    let detect: (Image) throws -> [Detection]
    /// Nil: detect in line, one frame at a time.
    let ahead: DetectAhead?
}

struct Detect: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect",
        abstract: "Find objects in pictures and print them, optionally saving annotated copies.",
        discussion: """
            Reads JPEG, PNG, BMP and WebP (a JPEG's EXIF orientation is applied, so boxes refer to the \
            picture as displayed). Directories are searched for such files. Boxes are in pixels.

            Examples:
              spotter detect photo.jpg
              spotter detect photos/ --classes person --save-dir annotated/
              spotter detect photo.jpg --json
              spotter detect photos/ --format coco > results.json
            """)

    @Argument(help: "Pictures or directories of pictures.")
    var inputs: [String]

    @OptionGroup var detector: DetectorOptions

    @Option(help: "Output: table, json (one object per picture per line), coco, yolo or floats.")
    var format: OutputFormat = .table

    @Flag(help: "Same as --format json.")
    var json = false

    @Option(help: "Write annotated copies of the pictures here (folders of the inputs kept; never over an input).")
    var saveDir: String?

    @Flag(help: "Also search the folders inside input folders.")
    var recursive = false

    @Option(help: "With --format coco: also write the COCO images and categories (id, file_name, width, height; id, name) to this file, so image_id and category_id map back to files and labels.")
    var cocoImages: String?

    @Option(parsing: .unconditional, help: "Most megapixels a picture may declare; larger ones are refused before decoding (a few bytes can announce gigabytes).")
    var maxMegapixels: Double = 50

    func validate() throws {
        if cocoImages != nil && format != .coco { throw ValidationError("--coco-images goes with --format coco") }
        guard maxMegapixels > 0 else { throw ValidationError("--max-megapixels must be positive") }
    }

    var limits: ImageFile.Limits { .init(maxPixels: Int(maxMegapixels * 1_000_000)) }

    func run() throws {
        let found = expand(inputs, recursive: recursive, skipping: saveDir)
        for missing in found.missing { FileHandle.standardError.write(Data("\(missing): no such file or folder\n".utf8)) }
        for (path, kind) in found.skipped { FileHandle.standardError.write(Data("note: skipped \(path): \(kind), not a regular file\n".utf8)) }
        let files = found.files.map(\.path)
        guard !files.isEmpty else { throw CommandFailure("no pictures found in \(inputs.joined(separator: " "))") }
        let outputs = saveDir.map { annotatedPaths(for: found.files, in: $0) } ?? [:]
        if let saveDir {
            do { try FileManager.default.createDirectory(atPath: saveDir, withIntermediateDirectories: true) } catch {
                throw CommandFailure("--save-dir \(saveDir): \(error.localizedDescription)")
            }
        }
        let detector = try self.detector.makeDetector()
        let annotator = saveDir == nil ? nil : try Annotator()
        let format = json ? .json : self.format
        let progress = ProgressBar(total: files.count, enabled: files.count > 3)
        var failures = found.missing.count
        var unlabeled = Set<Int>()
        var coco: [[String: Any]] = []
        var cocoImageRows: [[String: Any]] = []
        for (index, file) in files.enumerated() {
            progress.update(index, note: URL(fileURLWithPath: file).lastPathComponent)
            do {
                var picture = try ImageFile.decode(file, limits: limits).upright
                let result = try detector.detect(picture)
                if let labels = detector.labels {
                    for d in result.detections where d.label == "class \(d.classIndex)" && unlabeled.insert(d.classIndex).inserted {
                        progress.error("Warning: \(labels.source) has no line for class \(d.classIndex) (\(labels.lines.count) lines); pass --labels FILE")
                    }
                }
                switch format {
                case .table: progress.print(table(file, result))
                case .json: progress.print(ResultEncoding.json(result, image: file))
                case .floats: progress.print(ResultEncoding.serialize(ResultEncoding.floats(result).map(Double.init)))
                case .yolo: progress.print("# \(file)\n" + ResultEncoding.yolo(result))
                case .coco:
                    coco += ResultEncoding.coco(result, imageID: Self.imageID(file, index: index), labels: detector.labels)
                    cocoImageRows.append(["id": Self.imageID(file, index: index), "file_name": file,
                                          "width": result.imageSize.width, "height": result.imageSize.height])
                }
                if let annotator, let target = outputs[file] {
                    annotator.draw(result.detections, on: &picture)
                    try FileManager.default.createDirectory(atPath: URL(fileURLWithPath: target).deletingLastPathComponent().path,
                                                            withIntermediateDirectories: true)
                    try ImageFile.write(picture, to: target)
                    if format == .yolo {
                        try ResultEncoding.yolo(result).write(toFile: URL(fileURLWithPath: target).deletingPathExtension().path + ".txt",
                                                              atomically: true, encoding: .utf8)
                    }
                }
            } catch {
                failures += 1
                // Media errors name the file themselves.
                let message = "\(error)"
                progress.error(message.contains(file) ? message : "\(file): \(message)")
            }
        }
        progress.finish()
        if format == .coco { print(ResultEncoding.serialize(coco)) }
        if let cocoImages {
            let categories = (detector.labels?.lines ?? []).enumerated().compactMap { line, name -> [String: Any]? in
                guard name != "???", let labels = detector.labels else { return nil }
                // The ids ResultEncoding.coco writes: COCO's 91-id scheme for COCO labels, else the class index.
                return ["id": labels.isCOCO ? line : line - labels.offset, "name": name]
            }
            let staged = StagedFile(cocoImages)
            do {
                try ResultEncoding.serialize(["images": cocoImageRows, "categories": categories]).write(toFile: staged.temporary, atomically: false, encoding: .utf8)
                try staged.commit()
            } catch {
                staged.discard()
                throw CommandFailure("--coco-images \(cocoImages): \(error.localizedDescription)")
            }
        }
        if failures > 0 {
            throw CommandFailure("\(failures) of \(files.count + found.missing.count) inputs could not be processed (see above)")
        }
    }

    func table(_ file: String, _ result: DetectionResult) -> String {
        var lines = ["\(file) (\(result.imageSize.width)x\(result.imageSize.height)), \(result.detections.count) found, inference \(String(format: "%.1f", result.timings.inference)) ms"]
        for d in result.detections {
            lines.append("  " + d.label.padding(toLength: 16, withPad: " ", startingAt: 0)
                + String(format: "%.3f  x %4.0f-%-4.0f y %4.0f-%-4.0f", d.score, d.box.minX, d.box.maxX, d.box.minY, d.box.maxY))
        }
        return lines.joined(separator: "\n")
    }

    /// COCO image ids come from numeric file names (000000397133.jpg), else the position.
    static func imageID(_ file: String, index: Int) -> Int {
        Int(URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent) ?? index + 1
    }
}

/// Picture file extensions `detect` looks for in folders (everything FFmpeg or libjpeg reads).
let pictureExtensions: Set<String> = ["jpg", "jpeg", "jfif", "png", "bmp", "webp", "tif", "tiff", "gif", "ppm", "pgm", "pnm"]

/// A picture found from the command line: its path and its path relative to the folder named on
/// the command line (just the file name for files named directly).
struct FoundPicture {
    var path: String
    var relative: String
}

/// Files named on the command line, with folders expanded to the pictures inside (recursively with
/// `recursive`, never inside `skipping`), sorted; names that do not exist are returned apart.
///
/// Inside folders only regular files are taken (symbolic links followed): a named pipe called
/// `b.jpg` would block the run on opening it, so it is listed in `skipped` with what it is.
func expand(_ inputs: [String], recursive: Bool, skipping: String? = nil) -> (files: [FoundPicture], missing: [String], skipped: [(String, String)]) {
    var files: [FoundPicture] = [], missing: [String] = [], irregular: [(String, String)] = []
    let manager = FileManager.default
    for input in inputs {
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: input, isDirectory: &isDirectory) else {
            missing.append(input)
            continue
        }
        guard isDirectory.boolValue else {
            files.append(FoundPicture(path: input, relative: URL(fileURLWithPath: input).lastPathComponent))
            continue
        }
        let root = URL(fileURLWithPath: input).standardizedFileURL
        // Earlier annotated copies in a save folder inside this one are not inputs.
        let skipped = skipping.map { URL(fileURLWithPath: $0).standardizedFileURL.path + "/" }.flatMap { $0 == root.path + "/" ? nil : $0 }
        let names = (try? recursive ? manager.subpathsOfDirectory(atPath: input) : manager.contentsOfDirectory(atPath: input)) ?? []
        for name in names.sorted() where pictureExtensions.contains(URL(fileURLWithPath: name).pathExtension.lowercased()) {
            let path = root.appendingPathComponent(name).path
            if let skipped, path.hasPrefix(skipped) { continue }
            if let kind = irregularKind(path) {
                // A folder named like a picture is not worth a note.
                if kind != "a folder" { irregular.append((path, kind)) }
                continue
            }
            files.append(FoundPicture(path: path, relative: name))
        }
    }
    return (files, missing, irregular)
}

/// Where `detect --save-dir` writes each picture's annotated copy: the picture's path relative to
/// the folder it was found in, below `folder`, as PNG for PNG inputs and JPEG otherwise. A name that
/// is already taken by another output of this run or by an input gets `-2`, `-3`... before its
/// extension, so no input is overwritten and no two inputs share an output.
func annotatedPaths(for pictures: [FoundPicture], in folder: String) -> [String: String] {
    var result: [String: String] = [:]
    var taken = Set<String>()
    let inputs = Set(pictures.compactMap { FileID($0.path) })
    for picture in pictures {
        let ext = picture.path.lowercased().hasSuffix(".png") ? "png" : "jpg"
        let stem = URL(fileURLWithPath: folder).appendingPathComponent(picture.relative).deletingPathExtension().path
        var candidate = "\(stem).\(ext)", suffix = 1
        while taken.contains(candidate) || FileID(candidate).map(inputs.contains) == true {
            suffix += 1
            candidate = "\(stem)-\(suffix).\(ext)"
        }
        taken.insert(candidate)
        result[picture.path] = candidate
    }
    return result
}
