import Foundation
import Imaging
import Testing
import Tracking

/// The optimal assignment against every permutation, and the tracker on trajectories whose right
/// answer is known by construction.
@Suite struct AssignmentTests {
    /// The least total cost over every way to pair rows with distinct columns (rows ≤ columns).
    static func bruteForce(_ cost: [Double], rows: Int, columns: Int) -> Double {
        var best = Double.infinity
        var used = [Bool](repeating: false, count: columns)
        func search(_ row: Int, _ total: Double) {
            if row == rows {
                best = min(best, total)
                return
            }
            for column in 0..<columns where !used[column] {
                used[column] = true
                search(row + 1, total + cost[row * columns + column])
                used[column] = false
            }
        }
        search(0, 0)
        return best
    }

    @Test(arguments: [(1, 1), (2, 3), (3, 3), (4, 6), (5, 5), (6, 4), (3, 7), (7, 7)])
    func matchesBruteForceOnRandomMatrices(rows: Int, columns: Int) {
        var generator = SplitMix(seed: UInt64(rows * 31 + columns))
        var solver = Assignment()
        for _ in 0..<40 {
            let cost = (0..<(rows * columns)).map { _ in Double(generator.next() % 1000) / 100 }
            solver.solve(cost, rows: rows, columns: columns, maximumCost: .infinity)
            #expect(solver.pairs.count == min(rows, columns))
            #expect(Set(solver.pairs.map(\.row)).count == solver.pairs.count && Set(solver.pairs.map(\.column)).count == solver.pairs.count)
            let total = solver.pairs.reduce(0) { $0 + cost[$1.row * columns + $1.column] }
            let expected = rows <= columns ? Self.bruteForce(cost, rows: rows, columns: columns)
                : Self.bruteForce((0..<(columns * rows)).map { cost[($0 % rows) * columns + $0 / rows] }, rows: columns, columns: rows)
            #expect(abs(total - expected) < 1e-9, "\(total) vs \(expected)")
        }
    }

    @Test func pairsAboveTheLimitAreLeftUnmatched() {
        var solver = Assignment()
        solver.solve([0.1, 5, 5, 0.2], rows: 2, columns: 2, maximumCost: 1)
        #expect(solver.pairs.map { [$0.row, $0.column] } == [[0, 0], [1, 1]])
        solver.solve([0.1, 5, 5, 3], rows: 2, columns: 2, maximumCost: 1)
        #expect(solver.pairs.map { [$0.row, $0.column] } == [[0, 0]])
    }
}

/// A deterministic random number generator for the tests.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct KalmanTests {
    /// A box moving at a constant speed: after a few updates the filter predicts the next position
    /// within a pixel, and a gap of several frames is predicted along the same line.
    @Test func followsConstantVelocity() {
        var filter = BoxKalman(box: SIMD4(100, 200, 40, 80))
        for step in 1...20 {
            filter.predict(steps: 1)
            filter.update(observed: SIMD4(100 + 5 * Double(step), 200 - 2 * Double(step), 40, 80))
        }
        filter.predict(steps: 1)
        #expect(abs(filter.box.x - 205) < 1 && abs(filter.box.y - 158) < 1, "\(filter.box)")
        filter.predict(steps: 4)
        #expect(abs(filter.box.x - 225) < 2 && abs(filter.box.y - 150) < 2, "\(filter.box)")
    }
}

@Suite struct ObjectTrackerTests {
    static func box(_ x: Double, _ y: Double, _ w: Double = 40, _ h: Double = 100) -> Rect {
        Rect(minX: x, minY: y, maxX: x + w, maxY: y + h)
    }

    /// Two people walking past each other: each keeps its id through the crossing.
    @Test func crossingObjectsKeepTheirIDs() {
        var tracker = ObjectTracker()
        var ids: [[Int?]] = []
        for frame in 0..<60 {
            let t = Double(frame) / 30
            let a = ObjectTracker.Input(box: Self.box(50 + 6 * Double(frame), 100), score: 0.9)
            let b = ObjectTracker.Input(box: Self.box(410 - 6 * Double(frame), 110), score: 0.85)
            ids.append(tracker.update([a, b], time: t))
        }
        let first = ids[2], last = ids[59]
        #expect(first[0] != nil && first[1] != nil && first[0] != first[1])
        #expect(last == first, "\(first) -> \(last)")
        #expect(Set(ids.dropFirst(2).flatMap { $0.compactMap { $0 } }) == Set(first.compactMap { $0 }))
    }

    /// A person hidden for half a second comes back with the same id; one gone longer than the
    /// lost-track time comes back with a new one, and the old track is reported ended.
    @Test func aShortGapKeepsTheIDALongOneEndsIt() {
        var tracker = ObjectTracker()
        var seen: [Int] = []
        for frame in 0..<90 {
            let hidden = (30..<45).contains(frame) || (55..<88).contains(frame)
            let input = ObjectTracker.Input(box: Self.box(100 + 3 * Double(frame), 100), score: 0.9)
            let ids = tracker.update(hidden ? [] : [input], time: Double(frame) / 30)
            if let id = ids.first ?? nil { seen.append(id) }
            if frame == 86 { #expect(tracker.ended.count == 1 || tracker.tracks.allSatisfy { $0.id != seen.first }) }
        }
        // Frames 0-29 and 45-54: one id across the half-second gap.
        #expect(seen.count > 40 && Set(seen.prefix(40)).count == 1, "\(seen)")
        #expect(seen.last != seen.first, "after 33 frames unseen (over 1 s) the track ended: \(seen)")
    }

    /// Boxes of different classes are never one track, however much they overlap.
    @Test func classesAreNotMixed() {
        var tracker = ObjectTracker()
        var pairs: [[Int?]] = []
        for frame in 0..<10 {
            let person = ObjectTracker.Input(box: Self.box(100, 100), score: 0.9, classIndex: 0)
            let dog = ObjectTracker.Input(box: Self.box(102, 102), score: 0.9, classIndex: 17)
            pairs.append(tracker.update(frame % 2 == 0 ? [person, dog] : [dog, person], time: Double(frame) / 30))
        }
        let ids = pairs.last!
        #expect(ids[0] != nil && ids[1] != nil && ids[0] != ids[1])
        #expect(pairs[9][0] == pairs[8][1] && pairs[9][1] == pairs[8][0], "\(pairs)")
    }

    /// Half the frames (a source at 15 fps, or frames skipped) track as well as every frame.
    @Test func aLowerOrVariableFrameRateKeepsTheTrack() {
        var tracker = ObjectTracker()
        var ids: [Int?] = []
        var t = 0.0
        for frame in 0..<40 {
            t += frame % 3 == 0 ? 2.0 / 30 : 1.0 / 30
            ids.append(tracker.update([.init(box: Self.box(100 + 180 * t, 100), score: 0.9)], time: t).first ?? nil)
        }
        #expect(Set(ids.dropFirst(1).compactMap { $0 }).count == 1, "\(ids)")
    }

    /// A weak detection (occlusion) continues a track seen in the last frame but starts none.
    @Test func weakDetectionsContinueButNeverStartTracks() {
        var tracker = ObjectTracker()
        var ids: [Int?] = []
        for frame in 0..<20 {
            let score: Float = frame < 5 ? 0.9 : 0.3
            ids.append(tracker.update([.init(box: Self.box(100 + 2 * Double(frame), 100), score: score)], time: Double(frame) / 30).first ?? nil)
        }
        #expect(Set(ids.compactMap { $0 }).count == 1 && ids.last! != nil, "\(ids)")
        var fresh = ObjectTracker()
        for frame in 0..<10 {
            #expect(fresh.update([.init(box: Self.box(100, 100), score: 0.3)], time: Double(frame) / 30) == [nil])
        }
    }
}

@Suite struct ZoneTests {
    /// The zones file's shape, pixels and normalized, and the checks on it.
    @Test func zonesFilesDecodeAndAreChecked() throws {
        let json = #"{"normalized": true, "zones": [{"name": "door", "polygon": [[0, 0.5], [0.5, 0.5], [0.5, 1]], "inertia": 2}], "lines": [{"name": "gate", "from": [0.5, 0], "to": [0.5, 1]}]}"#
        let layout = try JSONDecoder().decode(ZoneLayout.self, from: Data(json.utf8))
        try layout.validate()
        let pixels = layout.inPixels(width: 640, height: 480)
        #expect(pixels.zones[0].polygon == [Point(x: 0, y: 240), Point(x: 320, y: 240), Point(x: 320, y: 480)])
        #expect(pixels.lines[0].to == Point(x: 320, y: 480) && pixels.normalized == nil)
        var bad = layout
        bad.lines.append(.init(name: "gate", from: Point(x: 0, y: 0), to: Point(x: 1, y: 1)))
        #expect(throws: ZoneError.self) { try bad.validate() }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ZoneLayout.self, from: Data(#"{"lines": [{"name": "a", "from": [1], "to": [2, 3]}]}"#.utf8)) }
    }

    /// A box walking right along y = 300 past a zone and over a line: enter at the third
    /// observation inside, leave at the third outside, one crossing at the second observation past
    /// the line; a box seen once on the other side and back counts nothing.
    @Test func enterExitAndCrossAtTheContractsFrames() {
        let layout = ZoneLayout(zones: [.init(name: "z", polygon: [Point(x: 100, y: 0), Point(x: 200, y: 0), Point(x: 200, y: 480), Point(x: 100, y: 480)])],
                                lines: [.init(name: "l", from: Point(x: 300, y: 480), to: Point(x: 300, y: 0))])
        var monitor = ZoneMonitor(layout: layout)
        var log: [(Int, ZoneEvent)] = []
        for step in 0..<40 {
            let x = 50 + 10 * Double(step)
            for event in monitor.observe(track: 7, box: Rect(minX: x - 5, minY: 200, maxX: x + 5, maxY: 300), time: Double(step)) { log.append((step, event)) }
        }
        // x = 100 at step 5 (on the edge: inside), so enter at step 7; x = 210 at step 16, exit at 18;
        // x = 310 at step 26 (right of an upward line is x > 300: L -> R, `in`), counted at step 27.
        #expect(log.map(\.0) == [7, 18, 27], "\(log)")
        #expect(log.map(\.1) == [.enter(track: 7, zone: "z"), .exit(track: 7, zone: "z"), .cross(track: 7, line: "l", direction: .in)])
        var hop = ZoneMonitor(layout: layout)
        var events: [ZoneEvent] = []
        for x in [290.0, 290, 310, 290, 290] { events += hop.observe(track: 1, box: Rect(minX: x - 5, minY: 0, maxX: x + 5, maxY: 100), time: 0) }
        #expect(events.isEmpty)
    }
}
