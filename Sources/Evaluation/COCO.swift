import Foundation

/// The parts of a COCO instances file (`instances_*.json`) that box evaluation reads: pictures,
/// annotated objects and categories. Other keys (segmentations, licences, captions) are skipped.
///
/// ```swift
/// let dataset = try COCODataset(contentsOf: URL(fileURLWithPath: "instances_val2017.json"))
/// let evaluation = try COCOEvaluator(groundTruth: dataset).evaluate(detections)
/// print(evaluation.stats.ap)
/// ```
public struct COCODataset: Codable, Sendable, Equatable {
    public struct Image: Codable, Sendable, Equatable {
        public var id: Int
        /// Relative to the pictures folder.
        public var fileName: String
        public var width: Int?
        public var height: Int?

        enum CodingKeys: String, CodingKey {
            case id, width, height
            case fileName = "file_name"
        }

        public init(id: Int, fileName: String, width: Int? = nil, height: Int? = nil) {
            (self.id, self.fileName, self.width, self.height) = (id, fileName, width, height)
        }
    }

    public struct Annotation: Codable, Sendable, Equatable {
        public var id: Int
        public var imageID: Int
        public var categoryID: Int
        /// x, y, width, height in pixels.
        public var bbox: [Double]
        /// The object's area (COCO: its segmentation's), which decides small, medium or large;
        /// the box's width times height when the file has none.
        public var area: Double
        /// A crowd region: detections inside it are neither hits nor misses.
        public var isCrowd: Bool

        enum CodingKeys: String, CodingKey {
            case id, bbox, area
            case imageID = "image_id"
            case categoryID = "category_id"
            case isCrowd = "iscrowd"
        }

        public init(id: Int, imageID: Int, categoryID: Int, bbox: [Double], area: Double? = nil, isCrowd: Bool = false) {
            (self.id, self.imageID, self.categoryID, self.bbox, self.isCrowd) = (id, imageID, categoryID, bbox, isCrowd)
            self.area = area ?? (bbox.count == 4 ? bbox[2] * bbox[3] : 0)
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(Int.self, forKey: .id)
            imageID = try c.decode(Int.self, forKey: .imageID)
            categoryID = try c.decode(Int.self, forKey: .categoryID)
            bbox = try c.decode([Double].self, forKey: .bbox)
            guard bbox.count == 4, bbox.allSatisfy(\.isFinite) else {
                throw DecodingError.dataCorruptedError(forKey: .bbox, in: c, debugDescription: "bbox must be 4 numbers [x, y, width, height], not \(bbox)")
            }
            area = try c.decodeIfPresent(Double.self, forKey: .area) ?? bbox[2] * bbox[3]
            // 0 or 1 in COCO's files; true or false in some exporters'.
            if let flag = try? c.decodeIfPresent(Int.self, forKey: .isCrowd) {
                isCrowd = flag != 0
            } else {
                isCrowd = try c.decodeIfPresent(Bool.self, forKey: .isCrowd) ?? false
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(imageID, forKey: .imageID)
            try c.encode(categoryID, forKey: .categoryID)
            try c.encode(bbox, forKey: .bbox)
            try c.encode(area, forKey: .area)
            try c.encode(isCrowd ? 1 : 0, forKey: .isCrowd)
        }
    }

    public struct Category: Codable, Sendable, Equatable {
        public var id: Int
        public var name: String

        public init(id: Int, name: String) {
            (self.id, self.name) = (id, name)
        }
    }

    public var images: [Image]
    public var annotations: [Annotation]
    public var categories: [Category]

    public init(images: [Image], annotations: [Annotation], categories: [Category]) {
        (self.images, self.annotations, self.categories) = (images, annotations, categories)
    }

    /// Reads and checks an instances file.
    ///
    /// - Throws: ``EvaluationError/notCOCO(path:reason:)`` when the file is not COCO instances
    ///   JSON (missing keys, wrong types, objects on pictures or categories it does not list);
    ///   ``EvaluationError/cannotRead(path:reason:)``.
    public init(contentsOf url: URL) throws {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw EvaluationError.cannotRead(path: url.path, reason: (error as NSError).localizedDescription)
        }
        do {
            self = try JSONDecoder().decode(COCODataset.self, from: data)
        } catch let error as DecodingError {
            throw EvaluationError.notCOCO(path: url.path, reason: Self.describe(error))
        } catch {
            throw EvaluationError.notCOCO(path: url.path, reason: "\(error)")
        }
        try check(path: url.path)
    }

    /// Objects must name listed pictures and categories; ids must be unique.
    func check(path: String) throws {
        let imageIDs = Set(images.map(\.id)), categoryIDs = Set(categories.map(\.id))
        guard imageIDs.count == images.count else { throw EvaluationError.notCOCO(path: path, reason: "two pictures share an id") }
        guard categoryIDs.count == categories.count else { throw EvaluationError.notCOCO(path: path, reason: "two categories share an id") }
        if let stray = annotations.first(where: { !imageIDs.contains($0.imageID) }) {
            throw EvaluationError.notCOCO(path: path, reason: "annotation \(stray.id) is on picture \(stray.imageID), which \"images\" does not list")
        }
        if let stray = annotations.first(where: { !categoryIDs.contains($0.categoryID) }) {
            throw EvaluationError.notCOCO(path: path, reason: "annotation \(stray.id) has category \(stray.categoryID), which \"categories\" does not list")
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func place(_ path: [any CodingKey]) -> String {
            path.isEmpty ? "the top level" : path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .keyNotFound(let key, let context): return "no \"\(key.stringValue)\" in \(place(context.codingPath))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(place(context.codingPath)): \(context.debugDescription)"
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "not JSON (\(context.underlyingError.map { "\($0)" } ?? context.debugDescription))" : "\(place(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}

/// One detection in COCO's results format (`--save-json`, pycocotools' `loadRes`).
public struct COCODetection: Codable, Sendable, Equatable {
    public var imageID: Int
    public var categoryID: Int
    /// x, y, width, height in pixels.
    public var bbox: [Double]
    public var score: Double

    enum CodingKeys: String, CodingKey {
        case bbox, score
        case imageID = "image_id"
        case categoryID = "category_id"
    }

    public init(imageID: Int, categoryID: Int, bbox: [Double], score: Double) {
        (self.imageID, self.categoryID, self.bbox, self.score) = (imageID, categoryID, bbox, score)
    }
}

public enum EvaluationError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotRead(path: String, reason: String)
    case notCOCO(path: String, reason: String)
    /// Detections on a picture the annotations do not list (pycocotools refuses them too).
    case unknownImage(id: Int)
    /// A detection whose box is not 4 finite numbers or whose score is not finite.
    case invalidDetection(index: Int, reason: String)

    public var description: String {
        switch self {
        case .cannotRead(let path, let reason): return "cannot read \(path): \(reason)"
        case .notCOCO(let path, let reason): return "\(path) is not COCO instances JSON: \(reason)"
        case .unknownImage(let id): return "a detection is on picture \(id), which the annotations do not list"
        case .invalidDetection(let index, let reason): return "detection \(index): \(reason)"
        }
    }
}
