import Foundation

/// A model or sample video Spotter knows how to fetch.
public struct CatalogEntry: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case model, sample }
    /// How the download is packaged: the file itself, or a zip archive holding `files`.
    public enum Packaging: String, Codable, Sendable { case file, zip }

    public var name: String
    public var kind: Kind
    public var url: String
    public var packaging: Packaging
    /// The files the entry yields, the main one (the model, the video) first.
    public var files: [String]
    /// Size of the download in bytes, where known.
    public var size: Int?
    /// SHA-256 of the download (hex), where known; without it the store keeps the hash it saw.
    public var sha256: String?
    public var license: String
    public var summary: String

    /// Names become folder names: letters, digits, `.`, `_` and `-`, not starting with `.`. File
    /// names are relative paths inside the item's folder.
    /// - Throws: `StoreError.invalidCatalog` naming the entry.
    public func validate(source: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        guard !name.isEmpty, name.count <= 128, !name.hasPrefix("."), name.allSatisfy(allowed.contains) else {
            throw StoreError.invalidCatalog(path: source, reason: "entry name \"\(name)\" (use letters, digits, '.', '_' and '-')")
        }
        guard !files.isEmpty || packaging == .zip else {
            throw StoreError.invalidCatalog(path: source, reason: "entry \(name) lists no files")
        }
        for file in files {
            guard let parts = ArchiveExtractor.safeComponents(file), packaging == .zip || parts.count == 1 else {
                throw StoreError.invalidCatalog(path: source, reason: "entry \(name): file \"\(file)\" is not a plain relative name")
            }
        }
        guard let scheme = URL(string: url)?.scheme?.lowercased(), ["http", "https", "file"].contains(scheme) else {
            throw StoreError.invalidCatalog(path: source, reason: "entry \(name): \"\(url)\" is not an http(s) or file URL")
        }
    }

    public init(name: String, kind: Kind, url: String, packaging: Packaging, files: [String], size: Int? = nil,
                sha256: String? = nil, license: String, summary: String) {
        self.name = name
        self.kind = kind
        self.url = url
        self.packaging = packaging
        self.files = files
        self.size = size
        self.sha256 = sha256
        self.license = license
        self.summary = summary
    }
}

/// The models and sample videos the store can fetch by name.
///
/// The built-in catalog can be extended or overridden with a JSON file (an array of entries, or
/// `{"entries": [...]}`), named by `SPOTTER_CATALOG` in the CLI: handy for mirrors and own models.
public struct Catalog: Sendable {
    public var entries: [CatalogEntry]

    public init(entries: [CatalogEntry]) { self.entries = entries }

    /// The model `detect`, `video` and `record` use when none is given.
    public static let defaultModel = "coco-ssd-mobilenet-v1"

    public func entry(named name: String) -> CatalogEntry? { entries.first { $0.name == name } }

    /// This catalog with the entries of a JSON file added; an entry with a known name replaces it.
    /// - Throws: `StoreError.invalidCatalog` naming the file.
    public func merging(contentsOf file: URL) throws -> Catalog {
        struct Wrapped: Decodable { var entries: [CatalogEntry] }
        let extra: [CatalogEntry]
        do {
            let data = try Data(contentsOf: file)
            if let wrapped = try? JSONDecoder().decode(Wrapped.self, from: data) { extra = wrapped.entries }
            else { extra = try JSONDecoder().decode([CatalogEntry].self, from: data) }
        } catch {
            throw StoreError.invalidCatalog(path: file.path, reason: String(describing: error))
        }
        for entry in extra { try entry.validate(source: file.path) }
        var merged = entries.filter { entry in !extra.contains { $0.name == entry.name } }
        merged.append(contentsOf: extra)
        return Catalog(entries: merged)
    }

    public static let builtIn = Catalog(entries: [
        CatalogEntry(
            name: "coco-ssd-mobilenet-v1", kind: .model,
            url: "https://storage.googleapis.com/download.tensorflow.org/models/tflite/coco_ssd_mobilenet_v1_1.0_quant_2018_06_29.zip",
            packaging: .zip, files: ["detect.tflite", "labelmap.txt"],
            sha256: "a809cd290b4d6a2e8a9d5dad076e0bd695b8091974e0eed1052b480b2f21b6dc",
            license: "Apache-2.0",
            summary: "SSD MobileNet v1, COCO, uint8, 300x300 (the TensorFlow Lite example detector)"),
        CatalogEntry(
            name: "efficientdet-lite0", kind: .model,
            url: "https://storage.googleapis.com/mediapipe-models/object_detector/efficientdet_lite0/int8/1/efficientdet_lite0.tflite",
            packaging: .file, files: ["efficientdet_lite0.tflite"],
            license: "Apache-2.0",
            summary: "EfficientDet-Lite0, COCO, int8, 320x320, labels in its metadata (MediaPipe)"),
        CatalogEntry(
            name: "blazeface-short-range", kind: .model,
            url: "https://storage.googleapis.com/mediapipe-assets/face_detection_short_range.tflite",
            packaging: .file, files: ["face_detection_short_range.tflite"],
            license: "Apache-2.0",
            summary: "BlazeFace short range, faces with 6 keypoints, float16 weights, 128x128 (MediaPipe); for `spotter faces`"),
    ] + [
        ("one-by-one-person-detection", "people walk in one by one, 768x432, 2 min 19 s"),
        ("people-detection", "people walking through a room"),
        ("person-bicycle-car-detection", "a street with people, bicycles and cars"),
        ("face-demographics-walking-and-pause", "people walk towards the camera and pause"),
        ("store-aisle-detection", "shoppers in a store aisle"),
        ("worker-zone-detection", "workers in a factory zone"),
        ("car-detection", "cars on a road"),
    ].map { name, summary in
        CatalogEntry(name: name, kind: .sample,
                     url: "https://github.com/intel-iot-devkit/sample-videos/raw/master/\(name).mp4",
                     packaging: .file, files: ["\(name).mp4"], license: "CC-BY-4.0",
                     summary: "Intel IoT sample video: \(summary)")
    })
}
