import Foundation

/// COCO box evaluation as pycocotools' `COCOeval` (iouType "bbox") defines it, in Swift.
///
/// Per picture and category, detections (best first, at most 100) are matched greedily to the
/// objects at ten IoU thresholds 0.50...0.95; crowd regions absorb detections without counting
/// them; objects outside an area range (small < 32², medium < 96², large) and detections matched
/// to nothing outside it are ignored for that range. Precision is interpolated at 101 recall points
/// and averaged over thresholds and categories. Ties in score keep the detections' given order,
/// as numpy's stable sort does, so results agree with pycocotools to rounding.
///
/// ```swift
/// let evaluator = try COCOEvaluator(groundTruth: dataset)
/// let result = try evaluator.evaluate(detections)
/// print(result.stats.ap, result.stats.ap50)
/// ```
///
/// Thread safety: a value type; `evaluate` may run on several threads at once.
public struct COCOEvaluator: Sendable {
    /// What pycocotools' `Params` holds for boxes.
    public struct Parameters: Sendable {
        /// 0.50, 0.55 ... 0.95, as `np.linspace(.5, 0.95, 10)` computes them.
        public var iouThresholds: [Double] = linspace(0.5, 0.95, 10)
        /// 0.00, 0.01 ... 1.00 (`np.linspace(0, 1, 101)`).
        public var recallThresholds: [Double] = linspace(0, 1, 101)
        /// Detections per picture and category counted: 1, 10 and 100.
        public var maxDetections: [Int] = [1, 10, 100]
        /// all, small, medium, large: object areas in pixels².
        public var areaRanges: [(label: String, range: ClosedRange<Double>)] = [
            ("all", 0...1e10), ("small", 0...1024), ("medium", 1024...9216), ("large", 9216...1e10),
        ]

        public init() {}

        /// numpy's `linspace(start, stop, count)`: `i * step + start`, the last exactly `stop`.
        static func linspace(_ start: Double, _ stop: Double, _ count: Int) -> [Double] {
            let step = (stop - start) / Double(count - 1)
            return (0..<count).map { $0 == count - 1 ? stop : Double($0) * step + start }
        }
    }

    public let groundTruth: COCODataset
    public let parameters: Parameters
    /// Sorted picture ids and category ids, as pycocotools' defaults.
    private let imageIDs: [Int]
    private let categoryIDs: [Int]
    private let imageIndex: [Int: Int]
    private let categoryIndex: [Int: Int]
    /// A box as pycocotools reads it: x, y, width, height.
    struct Box {
        var x, y, w, h: Double
        init(_ b: [Double]) { (x, y, w, h) = (b[0], b[1], b[2], b[3]) }
    }
    /// An annotated object, without references (the matching loop copies them freely).
    struct Object {
        var box: Box
        var area: Double
        var isCrowd: Bool
        var id: Int
    }
    /// Objects of each (category, picture) cell, in file order: `objects[k * images + i]`.
    private let objects: [[Object]]

    /// - Throws: ``EvaluationError/notCOCO(path:reason:)`` when objects name unlisted pictures or categories.
    public init(groundTruth: COCODataset, parameters: Parameters = Parameters()) throws {
        try groundTruth.check(path: "the annotations")
        self.groundTruth = groundTruth
        self.parameters = parameters
        imageIDs = groundTruth.images.map(\.id).sorted()
        categoryIDs = groundTruth.categories.map(\.id).sorted()
        imageIndex = Dictionary(uniqueKeysWithValues: imageIDs.enumerated().map { ($1, $0) })
        categoryIndex = Dictionary(uniqueKeysWithValues: categoryIDs.enumerated().map { ($1, $0) })
        var cells = [[Object]](repeating: [], count: imageIDs.count * categoryIDs.count)
        for object in groundTruth.annotations {
            cells[categoryIndex[object.categoryID]! * imageIDs.count + imageIndex[object.imageID]!]
                .append(Object(box: Box(object.bbox), area: object.area, isCrowd: object.isCrowd, id: object.id))
        }
        objects = cells
    }

    /// The result of one evaluation.
    public struct Evaluation: Sendable {
        /// The 12 numbers of `COCOeval.summarize()`; -1 where nothing could be measured.
        public var stats: Stats
        /// AP@[.5:.95] and AP50 (all areas, 100 detections) of each category with objects.
        public var categories: [CategoryResult]
        /// `precision[t][r][k][a][m]` flattened (T, R, K, A, M), -1 where undefined.
        public var precision: [Double]
        /// `recall[t][k][a][m]` flattened, -1 where undefined.
        public var recall: [Double]
    }

    public struct CategoryResult: Sendable, Codable, Equatable {
        public var id: Int
        public var name: String
        public var ap: Double
        public var ap50: Double
        /// Objects of this category (crowd regions not counted).
        public var objects: Int
    }

    /// `COCOeval.stats`, named as Ultralytics and the CLI's JSON name them.
    public struct Stats: Sendable, Codable, Equatable {
        public var ap, ap50, ap75, apSmall, apMedium, apLarge: Double
        public var ar1, ar10, ar100, arSmall, arMedium, arLarge: Double

        public init(ap: Double, ap50: Double, ap75: Double, apSmall: Double, apMedium: Double, apLarge: Double,
                    ar1: Double, ar10: Double, ar100: Double, arSmall: Double, arMedium: Double, arLarge: Double) {
            (self.ap, self.ap50, self.ap75, self.apSmall, self.apMedium, self.apLarge) = (ap, ap50, ap75, apSmall, apMedium, apLarge)
            (self.ar1, self.ar10, self.ar100, self.arSmall, self.arMedium, self.arLarge) = (ar1, ar10, ar100, arSmall, arMedium, arLarge)
        }

        enum CodingKeys: String, CodingKey {
            case ap = "AP", ap50 = "AP50", ap75 = "AP75", apSmall = "APs", apMedium = "APm", apLarge = "APl"
            case ar1 = "AR1", ar10 = "AR10", ar100 = "AR100", arSmall = "ARs", arMedium = "ARm", arLarge = "ARl"
        }

        /// In `summarize()`'s order.
        public var values: [Double] { [ap, ap50, ap75, apSmall, apMedium, apLarge, ar1, ar10, ar100, arSmall, arMedium, arLarge] }

        /// `summarize()`'s lines, with its labels.
        public var summary: String {
            let rows: [(Bool, String, String, Int)] = [
                (true, "0.50:0.95", "all", 100), (true, "0.50", "all", 100), (true, "0.75", "all", 100),
                (true, "0.50:0.95", "small", 100), (true, "0.50:0.95", "medium", 100), (true, "0.50:0.95", "large", 100),
                (false, "0.50:0.95", "all", 1), (false, "0.50:0.95", "all", 10), (false, "0.50:0.95", "all", 100),
                (false, "0.50:0.95", "small", 100), (false, "0.50:0.95", "medium", 100), (false, "0.50:0.95", "large", 100),
            ]
            return zip(rows, values).map { row, value in
                let (isAP, iou, area, dets) = row
                let title = isAP ? "Average Precision  (AP)" : "Average Recall     (AR)"
                let pad = { (s: String, n: Int) in String(repeating: " ", count: max(0, n - s.count)) + s }
                return String(format: " %@ @[ IoU=%@ | area=%@ | maxDets=%@ ] = %.3f", title, iou.padding(toLength: 9, withPad: " ", startingAt: 0),
                              pad(area, 6), pad(String(dets), 3), value)
            }.joined(separator: "\n")
        }
    }

    /// Evaluates `detections` against the ground truth.
    ///
    /// Detections of categories the annotations do not list are left out, as pycocotools does.
    /// - Throws: ``EvaluationError/unknownImage(id:)``, ``EvaluationError/invalidDetection(index:reason:)``.
    public func evaluate(_ detections: [COCODetection]) throws -> Evaluation {
        let images = imageIDs.count, K = categoryIDs.count
        let p = parameters
        let (T, R, A, M) = (p.iouThresholds.count, p.recallThresholds.count, p.areaRanges.count, p.maxDetections.count)
        let maxDet = p.maxDetections.max() ?? 100
        let thresholds = p.iouThresholds.map { min($0, 1 - 1e-10) }
        let ranges = p.areaRanges.map(\.range)
        // Detections per cell in the given order (pycocotools' loadRes keeps it).
        var boxes: [Box] = [], scores: [Double] = []
        boxes.reserveCapacity(detections.count)
        scores.reserveCapacity(detections.count)
        var found = [[Int32]](repeating: [], count: images * K)
        for (n, detection) in detections.enumerated() {
            guard let i = imageIndex[detection.imageID] else { throw EvaluationError.unknownImage(id: detection.imageID) }
            guard detection.bbox.count == 4, detection.bbox.allSatisfy(\.isFinite) else {
                throw EvaluationError.invalidDetection(index: n, reason: "bbox must be 4 finite numbers, not \(detection.bbox)")
            }
            guard detection.score.isFinite else { throw EvaluationError.invalidDetection(index: n, reason: "score \(detection.score)") }
            guard let k = categoryIndex[detection.categoryID] else { continue }
            found[k * images + i].append(Int32(boxes.count))
            boxes.append(Box(detection.bbox))
            scores.append(detection.score)
        }
        var precision = [Double](repeating: -1, count: T * R * K * A * M)
        var recall = [Double](repeating: -1, count: T * K * A * M)
        var categoryResults: [CategoryResult] = []
        let names = Dictionary(groundTruth.categories.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })

        // Reused for every category.
        var ious: [Double] = [], bestIoU: [Double] = [], areas: [Double] = [], order: [Int] = [], taken: [Bool] = []
        var cellFlags: [UInt8] = []
        // The hits' precision and recall, in the order of the curve.
        var hitPrecision: [Double] = [], hitRecall: [Double] = []
        for k in 0..<K {
            // evaluateImg for every picture and area range: the detections of the pictures in
            // picture order, each picture's best first, and per area range and IoU threshold
            // whether each is a hit, a miss or ignored.
            var entryScore: [Double] = [], entryRank: [Int32] = []
            // 0: a miss, 1: a hit, 2: ignored; per area range `[cellStart * T + t * D + rank]`.
            var flags = [[UInt8]](repeating: [], count: A)
            var counted = [Int](repeating: 0, count: A)
            var cellStarts: [Int] = []
            for i in 0..<images {
                let gt = objects[k * images + i]
                var dt = found[k * images + i]
                if gt.isEmpty && dt.isEmpty { continue }
                // Best first; ties keep the given order (numpy's mergesort is stable).
                dt.sort { scores[Int($0)] != scores[Int($1)] ? scores[Int($0)] > scores[Int($1)] : $0 < $1 }
                if dt.count > maxDet { dt.removeLast(dt.count - maxDet) }
                let G = gt.count, D = dt.count
                cellStarts.append(entryScore.count)
                // pycocotools' bbIou; a crowd region's union is the detection's own area.
                ious.removeAll(keepingCapacity: true)
                bestIoU.removeAll(keepingCapacity: true)
                areas.removeAll(keepingCapacity: true)
                for (rank, d) in dt.enumerated() {
                    entryScore.append(scores[Int(d)])
                    entryRank.append(Int32(rank))
                    let box = boxes[Int(d)]
                    areas.append(box.w * box.h)
                    var most = 0.0
                    for object in gt {
                        let b = object.box
                        let w = min(box.w + box.x, b.w + b.x) - max(box.x, b.x)
                        let h = min(box.h + box.y, b.h + b.y) - max(box.y, b.y)
                        guard w > 0, h > 0 else { ious.append(0); continue }
                        let intersection = w * h, area = box.w * box.h
                        let iou = intersection / (object.isCrowd ? area : area + b.w * b.h - intersection)
                        ious.append(iou)
                        most = max(most, iou)
                    }
                    bestIoU.append(most)
                }
                for a in 0..<A {
                    let range = ranges[a]
                    // Objects not ignored first, each group in file order (np.argsort, mergesort).
                    order.removeAll(keepingCapacity: true)
                    for g in 0..<G where !(gt[g].isCrowd || !range.contains(gt[g].area)) { order.append(g) }
                    let countedHere = order.count
                    counted[a] += countedHere
                    for g in 0..<G where gt[g].isCrowd || !range.contains(gt[g].area) { order.append(g) }
                    cellFlags.removeAll(keepingCapacity: true)
                    cellFlags.append(contentsOf: repeatElement(0, count: T * D))
                    for t in 0..<T {
                        taken.removeAll(keepingCapacity: true)
                        taken.append(contentsOf: repeatElement(false, count: G))
                        for d in 0..<D {
                            var best = thresholds[t], m = -1
                            // Most detections overlap no object enough at this threshold: no match to look for.
                            if bestIoU[d] >= best {
                                for position in 0..<G {
                                    let g = order[position]
                                    // An object already taken (unless a crowd) cannot be matched again.
                                    if taken[position] && !gt[g].isCrowd { continue }
                                    // Matched to an object that counts: ignored ones (sorted last) cannot do better.
                                    if m > -1 && m < countedHere && position >= countedHere { break }
                                    let iou = ious[d * G + g]
                                    if iou < best { continue }
                                    best = iou
                                    m = position
                                }
                            }
                            var flag: UInt8 = 0
                            if m > -1 {
                                taken[m] = true
                                // pycocotools records the object's id: an id of 0 reads as no match.
                                flag = m >= countedHere ? 2 : gt[order[m]].id != 0 ? 1 : 0
                            }
                            // A detection matched to nothing outside the area range is ignored.
                            if flag == 0 && !range.contains(areas[d]) { flag = 2 }
                            cellFlags[t * D + d] = flag
                        }
                    }
                    flags[a].append(contentsOf: cellFlags)
                }
            }
            if cellStarts.isEmpty { continue }
            cellStarts.append(entryScore.count)
            // accumulate: one stable sort of the category's detections by score serves every area
            // range and detection limit (a limit only leaves out later ranks of each picture).
            let sorted = entryScore.indices.sorted { entryScore[$0] != entryScore[$1] ? entryScore[$0] > entryScore[$1] : $0 < $1 }
            // Each entry, in that order: its rank in its picture and where its flags are (its
            // cell's start times T plus its rank; a threshold t adds t times the cell's size).
            let n = sorted.count
            var rankSorted = [Int32](repeating: 0, count: n), slotBase = [Int](repeating: 0, count: n), cellSize = [Int](repeating: 0, count: n)
            var cellOf = [Int32](repeating: 0, count: n)
            for c in 0..<(cellStarts.count - 1) {
                for e in cellStarts[c]..<cellStarts[c + 1] { cellOf[e] = Int32(c) }
            }
            for (position, e) in sorted.enumerated() {
                let c = Int(cellOf[e]), start = cellStarts[c]
                rankSorted[position] = entryRank[e]
                slotBase[position] = start * T + Int(entryRank[e])
                cellSize[position] = cellStarts[c + 1] - start
            }
            // `[t * n + position]`.
            var outcome = [UInt8](repeating: 0, count: T * n)
            for a in 0..<A where counted[a] > 0 {
                let total = Double(counted[a])
                flags[a].withUnsafeBufferPointer { flags in
                    for position in 0..<n {
                        let base = slotBase[position], size = cellSize[position]
                        for t in 0..<T { outcome[t * n + position] = flags[base + t * size] }
                    }
                }
                for (m, limit) in p.maxDetections.enumerated() {
                    for t in 0..<T {
                        // The curve has a point per detection, but the interpolated precision at a
                        // recall is the best precision at or after it, always reached at a hit
                        // (a miss lowers it, an ignored one keeps it): only hits need keeping.
                        var tp = 0.0, fp = 0.0
                        hitPrecision.removeAll(keepingCapacity: true)
                        hitRecall.removeAll(keepingCapacity: true)
                        for position in 0..<n where Int(rankSorted[position]) < limit {
                            switch outcome[t * n + position] {
                            case 1:
                                tp += 1
                                hitRecall.append(tp / total)
                                hitPrecision.append(tp / (fp + tp + Double.ulpOfOne))
                            case 0: fp += 1
                            default: break
                            }
                        }
                        recall[((t * K + k) * A + a) * M + m] = tp / total
                        let hits = hitRecall.count
                        if hits > 1 {
                            for i in stride(from: hits - 1, to: 0, by: -1) where hitPrecision[i] > hitPrecision[i - 1] { hitPrecision[i - 1] = hitPrecision[i] }
                        }
                        var position = 0
                        for (r, threshold) in p.recallThresholds.enumerated() {
                            // np.searchsorted(rc, threshold, side="left") lands on the first hit
                            // reaching it (or the first point, whose interpolated precision is the
                            // first hit's); past the last hit the precision stays 0.
                            while position < hits && hitRecall[position] < threshold { position += 1 }
                            precision[(((t * R + r) * K + k) * A + a) * M + m] = position < hits ? hitPrecision[position] : 0
                        }
                    }
                }
            }
            let objectsOfCategory = (0..<images).reduce(0) { $0 + objects[k * images + $1].filter { !$0.isCrowd }.count }
            if objectsOfCategory > 0 {
                let all = p.areaRanges.firstIndex { $0.label == "all" } ?? 0
                let last = p.maxDetections.firstIndex(of: maxDet) ?? (M - 1)
                let ap = Self.mean((0..<T).flatMap { t in (0..<R).map { r in precision[(((t * R + r) * K + k) * A + all) * M + last] } })
                let ap50 = Self.mean((0..<R).map { r in precision[(((0 * R + r) * K + k) * A + all) * M + last] })
                categoryResults.append(.init(id: categoryIDs[k], name: names[categoryIDs[k]] ?? "\(categoryIDs[k])", ap: ap, ap50: ap50, objects: objectsOfCategory))
            }
        }
        let stats = summarize(precision: precision, recall: recall, K: K)
        return Evaluation(stats: stats, categories: categoryResults, precision: precision, recall: recall)
    }

    /// The mean of the entries that are not -1 (undefined), or -1 when none is: `summarize()`'s rule.
    private static func mean(_ values: [Double]) -> Double {
        let valid = values.filter { $0 > -1 }
        return valid.isEmpty ? -1 : valid.reduce(0, +) / Double(valid.count)
    }

    /// `summarize()`: means over the entries that are not -1.
    private func summarize(precision: [Double], recall: [Double], K: Int) -> Stats {
        let p = parameters
        let (T, R, A, M) = (p.iouThresholds.count, p.recallThresholds.count, p.areaRanges.count, p.maxDetections.count)
        func area(_ label: String) -> Int { p.areaRanges.firstIndex { $0.label == label } ?? 0 }
        func dets(_ n: Int) -> Int { p.maxDetections.firstIndex(of: n) ?? (M - 1) }
        func threshold(_ value: Double?) -> [Int] {
            guard let value else { return Array(0..<T) }
            return p.iouThresholds.indices.filter { abs(p.iouThresholds[$0] - value) < 1e-12 }
        }
        func ap(_ iou: Double? = nil, _ a: String = "all", _ m: Int = 100) -> Double {
            let (ai, mi) = (area(a), dets(m))
            return Self.mean(threshold(iou).flatMap { t in (0..<R).flatMap { r in (0..<K).map { k in precision[(((t * R + r) * K + k) * A + ai) * M + mi] } } })
        }
        func ar(_ a: String = "all", _ m: Int = 100) -> Double {
            let (ai, mi) = (area(a), dets(m))
            return Self.mean((0..<T).flatMap { t in (0..<K).map { k in recall[((t * K + k) * A + ai) * M + mi] } })
        }
        let last = p.maxDetections.last ?? 100
        return Stats(ap: ap(), ap50: ap(0.5, "all", last), ap75: ap(0.75, "all", last), apSmall: ap(nil, "small", last),
                     apMedium: ap(nil, "medium", last), apLarge: ap(nil, "large", last),
                     ar1: ar("all", p.maxDetections.first ?? 1), ar10: ar("all", p.maxDetections.count > 1 ? p.maxDetections[1] : 10), ar100: ar("all", last),
                     arSmall: ar("small", last), arMedium: ar("medium", last), arLarge: ar("large", last))
    }
}
