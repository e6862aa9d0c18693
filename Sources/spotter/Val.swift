import ArgumentParser
import Detection
import Dispatch
import Evaluation
import Foundation
import Imaging
import Inference
import Media
import ModelStore
import Pipeline

struct Val: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "val",
        abstract: "Measure a model's accuracy on COCO-annotated pictures: COCO mAP, as pycocotools computes it.",
        discussion: """
            Runs the model on every picture the annotations list (file_name under --images), keeps \
            every detection down to --threshold (YOLO: class-wise suppression at IoU 0.7, at most 300 \
            per picture, as Ultralytics' val), maps the model's labels to the dataset's categories by \
            name, and prints the 12 numbers of pycocotools' COCOeval.summarize(). Pictures that are \
            missing or unreadable are named, left out of the numbers, and make the exit status 1.

            Examples:
              spotter val --model yolov8n.tflite --images coco128/train2017 \\
                --annotations coco128/annotations/instances_train2017.json
              spotter val --model detect.tflite --images val2017 \\
                --annotations instances_val2017.json --per-class
              spotter val --model detect.tflite --images val2017 \\
                --annotations instances_val2017.json --json --save-json dets.json
              spotter val --annotations instances_val2017.json --detections dets.json
            """)

    @Option(help: "The model: a .tflite file, a catalog name or an http(s) URL (default: $SPOTTER_MODEL, else coco-ssd-mobilenet-v1).")
    var model: String?

    @Option(help: "The folder the annotations' file_name entries are under.")
    var images: String?

    @Option(help: "COCO instances JSON (images, annotations with bbox and area, categories).")
    var annotations: String

    @Option(help: "Score these detections (COCO results JSON, as --save-json writes or another tool does) instead of running a model.")
    var detections: String?

    @Option(help: "Also write the detections in COCO's results format (image_id, category_id, bbox [x, y, w, h], score).")
    var saveJson: String?

    @Flag(help: "Print one JSON object (AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl, images, seconds).")
    var json = false

    @Flag(help: "Also print AP@[.5:.95] and AP50 of each category.")
    var perClass = false

    @Option(parsing: .unconditional, help: "Lowest score kept (Ultralytics' val: 0.001).")
    var threshold: Float = 0.001

    @Option(parsing: .unconditional, help: "Pictures detected at once, each on one thread (default: the cores this process may use).")
    var threads: Int?

    @Option(help: "Kernels: xnnpack or reference.")
    var backend: Interpreter.Options.Backend = .xnnpack

    @Option(help: "A labels file (default: the model's metadata, else labelmap.txt or labels.txt beside the model).")
    var labels: String?

    @Option(parsing: .unconditional, help: "Most megapixels a picture may declare.")
    var maxMegapixels: Double = 50

    @OptionGroup var store: StoreFlags

    func validate() throws {
        if detections != nil {
            guard images == nil, model == nil, saveJson == nil else { throw ValidationError("--detections scores a results file: give it without --model, --images or --save-json") }
        } else if images == nil {
            throw ValidationError("give --images DIR (the pictures the annotations list), or --detections FILE to score saved detections")
        }
        guard (0...1).contains(threshold) else { throw ValidationError("--threshold must be between 0 and 1") }
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
        guard maxMegapixels > 0 else { throw ValidationError("--max-megapixels must be positive") }
    }

    /// What `--json` prints: one object.
    struct Report: Encodable {
        var stats: COCOEvaluator.Stats
        var images: Int
        var missing: Int
        var seconds: Double
        var imagesPerSecond: Double?
        /// The evaluator alone (matching, accumulation, summary), without reading or detecting.
        var evaluationSeconds: Double
        var categories: [COCOEvaluator.CategoryResult]?

        enum CodingKeys: String, CodingKey {
            case images, missing, seconds, categories
            case imagesPerSecond = "images_per_second"
            case evaluationSeconds = "evaluation_seconds"
        }

        func encode(to encoder: any Encoder) throws {
            try stats.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(images, forKey: .images)
            try c.encode(missing, forKey: .missing)
            try c.encode(seconds, forKey: .seconds)
            try c.encodeIfPresent(imagesPerSecond, forKey: .imagesPerSecond)
            try c.encode(evaluationSeconds, forKey: .evaluationSeconds)
            try c.encodeIfPresent(categories, forKey: .categories)
        }
    }

    func run() throws {
        let clock = ContinuousClock.now
        let dataset: COCODataset
        do { dataset = try COCODataset(contentsOf: URL(fileURLWithPath: annotations)) } catch {
            throw CommandFailure("--annotations: \(error)")
        }
        if let detections {
            try score(detections, against: dataset, started: clock)
            return
        }
        let images = self.images!
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: images, isDirectory: &isFolder), isFolder.boolValue else {
            throw CommandFailure("--images \(images): no such folder")
        }
        if let saveJson {
            let target = URL(fileURLWithPath: saveJson).standardizedFileURL.path
            if target == URL(fileURLWithPath: annotations).standardizedFileURL.path {
                throw CommandFailure("--save-json \(saveJson) is the annotations file; choose another name")
            }
            let folder = URL(fileURLWithPath: images)
            if dataset.images.contains(where: { folder.appendingPathComponent($0.fileName).standardizedFileURL.path == target }) {
                throw CommandFailure("--save-json \(saveJson) is one of the pictures; choose another name")
            }
        }
        let modelPath = try store.resolve(model ?? ProcessInfo.processInfo.environment["SPOTTER_MODEL"] ?? Catalog.defaultModel).path
        var options = ObjectDetector.Options.validation(threadCount: threadsWithinCores(threads), backend: backend)
        options.scoreThreshold = threshold
        options.labelsPath = labels
        // One single-threaded detector per worker: each worker decodes, prepares and detects its
        // own pictures, so the cores never wait on one another (more pictures a second than one
        // picture on several threads, whose threads idle while a picture is decoded).
        let workers = threadsWithinCores(threads)
        let pool: DetectorPool
        do { pool = try DetectorPool(modelPath: modelPath, count: workers, options: options) } catch {
            throw CommandFailure("cannot use \(modelPath): \(error)")
        }
        let categoryOf = try Self.categories(pool.labels, dataset: dataset, model: modelPath)

        let pictures = dataset.images.sorted { $0.id < $1.id }
        let limits = ImageFile.Limits(maxPixels: Int(maxMegapixels * 1_000_000))
        let folder = URL(fileURLWithPath: images)
        let progress = ProgressBar(total: pictures.count, enabled: !json)
        /// Per picture, in id order: its detections, or why it could not be read.
        let results = Locked([Result<[COCODetection], CommandFailure>?](repeating: nil, count: pictures.count))
        let next = Locked(0), finished = Locked(0)
        let detectStart = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while true {
                let index = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < pictures.count else { return }
                let picture = pictures[index]
                let path = folder.appendingPathComponent(picture.fileName).path
                let result: Result<[COCODetection], CommandFailure>
                do {
                    let image = try ImageFile.decode(path, limits: limits).upright
                    let found = try pool.withDetector { try $0.detect(image) }
                    result = .success(found.detections.compactMap { d in
                        categoryOf[d.label].map {
                            COCODetection(imageID: picture.id, categoryID: $0, bbox: [d.box.minX, d.box.minY, d.box.width, d.box.height], score: Double(d.score))
                        }
                    })
                } catch {
                    let message = "\(error)"
                    result = .failure(CommandFailure(message.contains(picture.fileName) ? message : "\(path): \(message)"))
                }
                results.withLock { $0[index] = result }
                finished.withLock { done in
                    done += 1
                    if case .failure(let failure) = result { progress.error(failure.description) }
                    progress.update(done, note: picture.fileName)
                }
            }
        }
        progress.finish()
        var detections: [COCODetection] = []
        var evaluated: [COCODataset.Image] = []
        var failed: [String] = []
        for (picture, result) in zip(pictures, results.value) {
            switch result {
            case .success(let found)?:
                detections += found
                evaluated.append(picture)
            default:
                failed.append(picture.fileName)
            }
        }
        let detectSeconds = Self.seconds(ContinuousClock.now - detectStart)
        guard !evaluated.isEmpty else {
            throw CommandFailure("none of the \(pictures.count) pictures the annotations list could be read under \(images)")
        }

        // The numbers cover the pictures that were read.
        var groundTruth = dataset
        if evaluated.count < dataset.images.count {
            let kept = Set(evaluated.map(\.id))
            groundTruth.images = dataset.images.filter { kept.contains($0.id) }
            groundTruth.annotations = dataset.annotations.filter { kept.contains($0.imageID) }
        }
        let evaluationStart = ContinuousClock.now
        let evaluation = try COCOEvaluator(groundTruth: groundTruth).evaluate(detections)
        let evaluationSeconds = Self.seconds(ContinuousClock.now - evaluationStart)
        let seconds = Self.seconds(ContinuousClock.now - clock)
        let rate = Double(evaluated.count) / max(detectSeconds, 1e-9)
        show(evaluation, images: evaluated.count, missing: failed.count, detections: detections.count, seconds: seconds, rate: rate,
             evaluationSeconds: evaluationSeconds, source: URL(fileURLWithPath: modelPath).lastPathComponent)
        // After the numbers, so a file that cannot be written does not take them with it.
        if let saveJson { try Self.write(detections, to: saveJson) }
        if !failed.isEmpty {
            throw CommandFailure("\(failed.count) of the \(pictures.count) pictures could not be read (named above); the numbers cover the other \(evaluated.count)")
        }
    }

    /// `--detections`: scores a results file.
    func score(_ path: String, against dataset: COCODataset, started: ContinuousClock.Instant) throws {
        let found: [COCODetection]
        do { found = try COCODetection.list(from: Data(contentsOf: URL(fileURLWithPath: path))) } catch let error as DecodingError {
            throw CommandFailure("--detections \(path) is not a COCO results list (image_id, category_id, bbox, score): \(error)")
        } catch {
            throw CommandFailure("--detections \(path): \(error.localizedDescription)")
        }
        let evaluationStart = ContinuousClock.now
        let evaluation: COCOEvaluator.Evaluation
        do { evaluation = try COCOEvaluator(groundTruth: dataset).evaluate(found) } catch {
            throw CommandFailure("--detections \(path): \(error)")
        }
        show(evaluation, images: dataset.images.count, missing: 0, detections: found.count, seconds: Self.seconds(ContinuousClock.now - started),
             rate: nil, evaluationSeconds: Self.seconds(ContinuousClock.now - evaluationStart), source: URL(fileURLWithPath: path).lastPathComponent)
    }

    /// Prints the numbers: pycocotools' summary and a per-category table, or one JSON object.
    func show(_ evaluation: COCOEvaluator.Evaluation, images: Int, missing: Int, detections: Int, seconds: Double, rate: Double?,
              evaluationSeconds: Double, source: String) {
        if json {
            print(ResultEncoding.encode(Report(stats: evaluation.stats, images: images, missing: missing,
                                               seconds: (seconds * 1000).rounded() / 1000, imagesPerSecond: rate.map { ($0 * 10).rounded() / 10 },
                                               evaluationSeconds: (evaluationSeconds * 10000).rounded() / 10000,
                                               categories: perClass ? evaluation.categories : nil)))
            return
        }
        print(evaluation.stats.summary)
        if perClass {
            print("\n" + "category".padding(toLength: 16, withPad: " ", startingAt: 0) + "  objects  AP@[.5:.95]   AP50")
            for category in evaluation.categories {
                print(category.name.padding(toLength: 16, withPad: " ", startingAt: 0)
                      + String(format: "  %7d  %11.3f  %5.3f", category.objects, category.ap, category.ap50))
            }
        }
        let speed = rate.map { String(format: ", %.1f pictures/s", $0) } ?? ""
        print(String(format: "\n%d pictures, %d detections%@, %.2f s in all (%@)", images, detections, speed, seconds, source))
    }

    /// Model label → dataset category id, by name (case and spaces aside); every label must map.
    static func categories(_ labels: Labels?, dataset: COCODataset, model: String) throws -> [String: Int] {
        guard let labels else {
            throw CommandFailure("\(model) has no labels (none in its metadata, no labelmap.txt or labels.txt beside it): pass --labels FILE")
        }
        func key(_ name: String) -> String { name.lowercased().filter { !$0.isWhitespace && $0 != "_" && $0 != "-" } }
        let byName = Dictionary(dataset.categories.map { (key($0.name), $0.id) }, uniquingKeysWith: { first, _ in first })
        var mapping: [String: Int] = [:], unmapped: [String] = []
        for name in labels.lines where !name.isEmpty && name != "???" {
            if let id = byName[key(name)] { mapping[name] = id } else { unmapped.append(name) }
        }
        guard unmapped.isEmpty else {
            throw CommandFailure("""
                \(unmapped.count) of the model's labels name no category of the annotations: \(unmapped.prefix(12).joined(separator: ", "))\
                \(unmapped.count > 12 ? ", ..." : ""); its categories are \(dataset.categories.prefix(12).map(\.name).joined(separator: ", "))\
                \(dataset.categories.count > 12 ? ", ..." : ""). Pass --labels FILE with the dataset's names.
                """)
        }
        return mapping
    }

    /// COCO results JSON, written to a temporary name and renamed.
    static func write(_ detections: [COCODetection], to path: String) throws {
        let staged = StagedFile(path)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        do {
            try encoder.encode(detections).write(to: URL(fileURLWithPath: staged.temporary))
            try staged.commit()
        } catch {
            staged.discard()
            throw CommandFailure("--save-json \(path): \(error.localizedDescription)")
        }
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
}
