import Evaluation
import Foundation
import Testing

/// The evaluator against pycocotools' own numbers on hand-made cases (a crowd region, a detection
/// over two objects, ties in score, empty pictures, a category without objects, area ranges, more
/// than 100 detections) and seeded random ones, written by `scripts/make_eval_fixtures.py`.
@Suite struct COCOEvaluatorTests {
    struct Case: Decodable {
        struct Expected: Decodable {
            var stats: [Double]
            var per_category: [String: Double]
        }
        var name: String
        var ground_truth: COCODataset
        var detections: [COCODetection]
        var pycocotools: Expected
    }

    static let cases: [Case] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/cocoeval-cases.json")
        struct File: Decodable { var cases: [Case] }
        do { return try JSONDecoder().decode(File.self, from: Data(contentsOf: url)).cases } catch {
            fatalError("\(url.path): \(error) (scripts/make_eval_fixtures.py writes it)")
        }
    }()

    @Test(arguments: cases.indices)
    func equalsPycocotools(_ index: Int) throws {
        let item = Self.cases[index]
        let result = try COCOEvaluator(groundTruth: item.ground_truth).evaluate(item.detections)
        for (n, (ours, theirs)) in zip(result.stats.values, item.pycocotools.stats).enumerated() {
            #expect(abs(ours - theirs) < 1e-9, "\(item.name): stat \(n) is \(ours), pycocotools \(theirs)")
        }
        for category in item.ground_truth.categories {
            let theirs = item.pycocotools.per_category[String(category.id)] ?? -1
            let ours = result.categories.first { $0.id == category.id }?.ap ?? -1
            #expect(abs(ours - theirs) < 1e-9, "\(item.name): category \(category.id) AP \(ours), pycocotools \(theirs)")
        }
    }

    @Test func theCasesCoverWhatTheyClaim() {
        let names = Set(Self.cases.map(\.name))
        for wanted in ["crowd region", "detection over two objects", "ties in score", "empty pictures", "category without objects", "area ranges"] {
            #expect(names.contains(wanted))
        }
        #expect(Self.cases.contains { $0.ground_truth.annotations.contains(where: \.isCrowd) })
        #expect(Self.cases.count >= 40)
    }

    @Test func aPerfectDetectorScoresOneAndNoDetectionsScoreZero() throws {
        let objects = (0..<5).map { COCODataset.Annotation(id: $0 + 1, imageID: 1 + $0 % 2, categoryID: 3, bbox: [Double($0) * 50, 10, 40, 80]) }
        let dataset = COCODataset(images: [.init(id: 1, fileName: "a.jpg"), .init(id: 2, fileName: "b.jpg")], annotations: objects,
                                  categories: [.init(id: 3, name: "cat"), .init(id: 7, name: "dog")])
        let evaluator = try COCOEvaluator(groundTruth: dataset)
        let perfect = try evaluator.evaluate(objects.map { .init(imageID: $0.imageID, categoryID: 3, bbox: $0.bbox, score: 0.9) })
        #expect(perfect.stats.ap == 1 && perfect.stats.ar100 == 1)
        #expect(perfect.categories.map(\.name) == ["cat"], "a category without objects has no AP")
        let none = try evaluator.evaluate([])
        #expect(none.stats.ap == 0 && none.stats.ar100 == 0)
    }

    @Test func detectionsOnUnknownPicturesAndBrokenBoxesAreErrors() throws {
        let dataset = COCODataset(images: [.init(id: 1, fileName: "a.jpg")], annotations: [], categories: [.init(id: 1, name: "person")])
        let evaluator = try COCOEvaluator(groundTruth: dataset)
        #expect(throws: EvaluationError.unknownImage(id: 2)) { try evaluator.evaluate([.init(imageID: 2, categoryID: 1, bbox: [0, 0, 1, 1], score: 1)]) }
        #expect(throws: EvaluationError.self) { try evaluator.evaluate([.init(imageID: 1, categoryID: 1, bbox: [0, 0, 1], score: 1)]) }
        #expect(throws: EvaluationError.self) { try evaluator.evaluate([.init(imageID: 1, categoryID: 1, bbox: [0, 0, 1, .nan], score: 1)]) }
    }

    @Test func filesThatAreNotCOCOSayWhy() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-coco-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let samples: [(String, String)] = [
            ("{\"images\": []}", "no \"annotations\""),
            ("[1, 2]", "top level"),
            ("not json", "not JSON"),
            ("{\"images\": [{\"id\": 1, \"file_name\": \"a.jpg\"}], \"categories\": [{\"id\": 1, \"name\": \"a\"}], \"annotations\": [{\"id\": 1, \"image_id\": 5, \"category_id\": 1, \"bbox\": [0, 0, 1, 1]}]}", "picture 5"),
            ("{\"images\": [], \"categories\": [], \"annotations\": [{\"id\": 1, \"image_id\": 5, \"category_id\": 1, \"bbox\": [0, 0, 1]}]}", "bbox"),
        ]
        for (n, (text, reason)) in samples.enumerated() {
            let file = folder.appendingPathComponent("\(n).json")
            try text.write(to: file, atomically: true, encoding: .utf8)
            do {
                _ = try COCODataset(contentsOf: file)
                Issue.record("\(text) was accepted")
            } catch let error as EvaluationError {
                guard case .notCOCO(let path, let why) = error else { Issue.record("\(error)"); continue }
                #expect(path == file.path)
                #expect(why.contains(reason), "\(why)")
            }
        }
    }

    @Test func summaryPrintsPycocotoolsLines() throws {
        let stats = COCOEvaluator.Stats(ap: 0.2043, ap50: 0.315, ap75: 0.2, apSmall: -1, apMedium: 0.1, apLarge: 0.4,
                                        ar1: 0.1, ar10: 0.2, ar100: 0.25, arSmall: 0, arMedium: 0.1, arLarge: 0.5)
        let lines = stats.summary.split(separator: "\n")
        #expect(lines.count == 12)
        #expect(lines[0] == " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.204")
        #expect(lines[3] == " Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = -1.000")
        #expect(lines[6] == " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.100")
    }
}

/// The fast reader of results files against `JSONDecoder` on the same text.
@Suite struct ResultsReaderTests {
    @Test func readsWhatJSONDecoderReads() throws {
        let texts = [
            #"[{"image_id": 9, "category_id": 1, "bbox": [1.5, 2.25e1, 0.1, 3], "score": 0.8984375}]"#,
            #"[ {"score":1e-3,"bbox":[ -0.0 , 1E2,5,6 ] , "category_id":90,"image_id":123456789} ,{"image_id":1,"category_id":2,"bbox":[0.30000000000000004,1,2,3],"score":0.1}]"#,
            "[]",
            "\n[{\"image_id\":1,\"category_id\":1,\"bbox\":[1,2,3,4],\"score\":0.5}]\n",
        ]
        for text in texts {
            let ours = try COCODetection.list(from: Data(text.utf8))
            let theirs = try JSONDecoder().decode([COCODetection].self, from: Data(text.utf8))
            #expect(ours == theirs, "\(text)")
        }
        // Every detection of the pycocotools cases, as Python wrote them.
        for item in COCOEvaluatorTests.cases.prefix(12) {
            let text = try JSONEncoder().encode(item.detections)
            #expect(try COCODetection.list(from: text) == item.detections)
        }
    }

    @Test func otherShapesGoThroughJSONDecoderAndBadTextIsAnError() throws {
        // An extra key: read by JSONDecoder, which ignores it.
        let extra = #"[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "segmentation": [[1, 2]]}]"#
        #expect(try COCODetection.list(from: Data(extra.utf8)).count == 1)
        for bad in [#"[{"image_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}]"#, #"[{"image_id": 1.5, "category_id": 1, "bbox": [], "score": 1}]"#,
                    "[{", "", #"{"image_id": 1}"#, #"[{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": NaN}]"#] {
            #expect(throws: DecodingError.self, "\(bad)") { try COCODetection.list(from: Data(bad.utf8)) }
        }
    }
}
