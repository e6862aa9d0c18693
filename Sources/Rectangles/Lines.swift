import Foundation
import Imaging

/// A straight edge at the working scale: a least-squares line through edge pixels and the extent
/// they cover along it.
struct Line {
    /// Sums for the least-squares fit.
    var n = 0.0, sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0, syy = 0.0
    /// A point on the line, its unit direction, and the covered interval along the direction.
    var center = Point(x: 0, y: 0), direction = Point(x: 1, y: 0)
    var start = 0.0, end = 0.0
    /// Total length of the segments merged into this line (occluded gaps do not count).
    var support = 0.0

    init() {}

    /// The least-squares line through `points`, its extent the points' span.
    init(through points: [Point]) {
        for p in points { add(p) }
        fit()
        let positions = points.map { position(of: $0) }
        start = positions.min() ?? 0
        end = positions.max() ?? 0
        support = end - start
    }

    var normal: Point { Point(x: -direction.y, y: direction.x) }
    var length: Double { end - start }

    mutating func add(_ p: Point) {
        n += 1; sx += p.x; sy += p.y; sxx += p.x * p.x; sxy += p.x * p.y; syy += p.y * p.y
    }

    mutating func absorb(_ other: Line) {
        n += other.n; sx += other.sx; sy += other.sy; sxx += other.sxx; sxy += other.sxy; syy += other.syy
        let e0 = other.point(at: other.start), e1 = other.point(at: other.end), e2 = point(at: start), e3 = point(at: end)
        support += other.support
        fit()
        let t0 = position(of: e0), t1 = position(of: e1), t2 = position(of: e2), t3 = position(of: e3)
        start = min(min(t0, t1), min(t2, t3))
        end = max(max(t0, t1), max(t2, t3))
    }

    /// Refits centre and direction from the sums (principal axis of the scatter).
    mutating func fit() {
        let cx = sx / n, cy = sy / n
        let a = sxx / n - cx * cx, b = sxy / n - cx * cy, c = syy / n - cy * cy
        center = Point(x: cx, y: cy)
        // The axis at half the angle of (a - c, 2b), from the double angle's cosine without
        // trigonometry: cos and sin of half an angle in (-90, 90] degrees.
        let u = a - c, v = 2 * b, r = (u * u + v * v).squareRoot()
        guard r > 0 else { direction = Point(x: 1, y: 0); return }
        let cosine = u / r
        direction = Point(x: max(0, (1 + cosine) / 2).squareRoot(), y: (v < 0 ? -1 : 1) * max(0, (1 - cosine) / 2).squareRoot())
    }

    func position(of p: Point) -> Double { (p.x - center.x) * direction.x + (p.y - center.y) * direction.y }
    func distance(to p: Point) -> Double { abs((p.x - center.x) * normal.x + (p.y - center.y) * normal.y) }
    func point(at t: Double) -> Point { Point(x: center.x + direction.x * t, y: center.y + direction.y * t) }

    /// Where this line crosses `other`; nil when they are nearly parallel.
    func intersection(with other: Line) -> Point? {
        let det = direction.x * other.direction.y - direction.y * other.direction.x
        guard abs(det) > 1e-6 else { return nil }
        let dx = other.center.x - center.x, dy = other.center.y - center.y
        let t = (dx * other.direction.y - dy * other.direction.x) / det
        return point(at: t)
    }
}

/// Edge chains split into straight segments, merged into lines.
enum LineFinder {
    /// Lines with at least `minimumLength` / 3 pixels of support, longest support first.
    static func lines(in edges: EdgeMap, minimumLength: Double) -> [Line] {
        var segments: [Line] = []
        let (points, runs) = chains(in: edges)
        for run in runs {
            split(points, from: run.lowerBound, to: run.upperBound - 1, into: &segments)
        }
        // Longest first (ties in the order found); indices sorted, not the segments themselves.
        let order = segments.indices.sorted { segments[$0].support > segments[$1].support }
        var merged: [Line] = []
        var index = MergeIndex(width: edges.width, height: edges.height)
        for k in order {
            let segment = segments[k]
            let first = segment.point(at: segment.start), last = segment.point(at: segment.end)
            // Collinear, and the gap between them at most `gapScale` times the shorter piece (plus
            // `gapAllowance`): a side broken by an occluder, a shadow or texture along it, not
            // unrelated clutter that happens to line up.
            func joins(_ line: Line) -> Bool {
                guard abs(line.direction.x * segment.direction.x + line.direction.y * segment.direction.y) > parallel,
                      line.distance(to: first) < 2.5, line.distance(to: last) < 2.5 else { return false }
                let a = line.position(of: first), b = line.position(of: last)
                let gap = max(0, min(a, b) - line.end, line.start - max(a, b))
                return gap <= gapScale * min(line.length, segment.length) + gapAllowance
            }
            // The earliest merged line that it joins, as a scan of all of them in order would find:
            // any such line is in the same direction bin or the next on either side, and its cell
            // there holds the segment's first point.
            let bin = directionBin(segment)
            var found: Int?
            for offset in 0..<3 {
                let near = (bin + directionBins - 1 + offset) % directionBins
                var node = index.first(inBin: near, near: first)
                while node >= 0 {
                    let candidate = index.line(at: node)
                    if candidate >= found ?? .max { break }
                    if joins(merged[candidate]) {
                        found = candidate
                        break
                    }
                    node = index.next(after: node)
                }
            }
            if let found {
                merged[found].absorb(segment)
                index.update(found, merged[found])
            } else {
                index.update(merged.count, segment)
                merged.append(segment)
            }
        }
        return merged.filter { $0.support >= minimumLength / 3 }.sorted { $0.support > $1.support }
    }

    /// Merged lines filed by direction bin and, within it, by offset across the bin's middle
    /// direction, so that a segment is compared only with lines it could join. Each cell's lines
    /// are a list in ascending order, linked through flat arrays (no array per cell to grow).
    struct MergeIndex {
        static let cellSize = 16.0
        let centre: Point
        let halfDiagonal: Double
        let cellsPerBin: Int
        /// Each cell's first and last node, or -1.
        var heads: [Int32]
        var tails: [Int32]
        /// Each node's line and the next node of its cell (-1 at the end); unlinked nodes stay unused.
        var lines: [Int32] = []
        var nexts: [Int32] = []
        /// Where each line is filed: its bin and first and last cell.
        var filed: [(bin: Int, low: Int, high: Int)] = []
        /// Unit normals of the bins' middle directions.
        static let normals: [Point] = (0..<LineFinder.directionBins).map { bin in
            let angle = (Double(bin) + 0.5) * 6 * .pi / 180
            return Point(x: -sin(angle), y: cos(angle))
        }

        init(width: Int, height: Int) {
            centre = Point(x: Double(width) / 2, y: Double(height) / 2)
            halfDiagonal = (centre.x * centre.x + centre.y * centre.y).squareRoot() + 3
            cellsPerBin = Int(2 * halfDiagonal / Self.cellSize) + 2
            heads = [Int32](repeating: -1, count: LineFinder.directionBins * cellsPerBin)
            tails = heads
        }

        func cell(_ offset: Double) -> Int { min(cellsPerBin - 1, max(0, Int((offset + halfDiagonal) / Self.cellSize))) }

        /// The first node of the lines filed in `bin` whose cells cover `point` (a point of the
        /// picture), or -1; ``next(after:)`` walks the rest in ascending order of line.
        func first(inBin bin: Int, near point: Point) -> Int {
            let n = Self.normals[bin]
            return Int(heads[bin * cellsPerBin + cell((point.x - centre.x) * n.x + (point.y - centre.y) * n.y)])
        }

        func next(after node: Int) -> Int { Int(nexts[node]) }
        func line(at node: Int) -> Int { Int(lines[node]) }

        /// Files line `index` (new, or moved by absorbing a segment): in its direction bin, in every
        /// cell holding a point of the picture within 2.5 pixels of it. Along the line the offset
        /// changes by at most the sine of its angle to the bin's middle times the distance.
        mutating func update(_ index: Int, _ line: Line) {
            let bin = LineFinder.directionBin(line), n = Self.normals[bin]
            let dx = line.center.x - centre.x, dy = line.center.y - centre.y
            let offset = dx * n.x + dy * n.y
            let reach = halfDiagonal + (dx * dx + dy * dy).squareRoot()
            let spread = reach * abs(line.direction.x * n.x + line.direction.y * n.y) + 3
            let place = (bin: bin, low: cell(offset - spread), high: cell(offset + spread))
            var old = (bin: -1, low: 0, high: -1)
            if index < filed.count {
                old = filed[index]
                if old == place { return }
                filed[index] = place
            } else {
                filed.append(place)
            }
            // Out of the cells it leaves, into those it enters; where it stays, it stays in order.
            let stays = old.bin == bin
            if old.bin >= 0 {
                for c in old.low...old.high where !(stays && c >= place.low && c <= place.high) {
                    remove(index, from: old.bin * cellsPerBin + c)
                }
            }
            for c in place.low...place.high where !(stays && c >= old.low && c <= old.high) {
                insert(index, into: bin * cellsPerBin + c)
            }
        }

        private mutating func insert(_ index: Int, into cell: Int) {
            let node = Int32(lines.count), value = Int32(index)
            lines.append(value)
            nexts.append(-1)
            let tail = tails[cell]
            if tail < 0 {
                heads[cell] = node
                tails[cell] = node
            } else if lines[Int(tail)] < value {
                nexts[Int(tail)] = node
                tails[cell] = node
            } else {
                // Before the first node with a greater line (the tail's is, so there is one).
                var previous: Int32 = -1, current = heads[cell]
                while lines[Int(current)] < value { previous = current; current = nexts[Int(current)] }
                nexts[Int(node)] = current
                if previous < 0 { heads[cell] = node } else { nexts[Int(previous)] = node }
            }
        }

        private mutating func remove(_ index: Int, from cell: Int) {
            var previous: Int32 = -1, current = heads[cell]
            while current >= 0 && lines[Int(current)] != Int32(index) { previous = current; current = nexts[Int(current)] }
            guard current >= 0 else { return }
            let after = nexts[Int(current)]
            if previous < 0 { heads[cell] = after } else { nexts[Int(previous)] = after }
            if tails[cell] == current { tails[cell] = previous }
        }
    }

    /// A segment joins a collinear line across a gap of at most this many times the shorter of the
    /// two, plus `gapAllowance` working pixels: texture along a border breaks its edge into short
    /// pieces with gaps longer than themselves. (Once the gap was at most the shorter piece plus 2:
    /// recall 0.908 / 0.890 / 0.875 on the rendered sets of seeds 12, 99 and 7, now 0.944 / 0.910
    /// / 0.907 with the other settings of that change.)
    static let gapScale = 4.0
    static let gapAllowance = 4.0

    /// Segments within 6 degrees of a line's direction may join it.
    static let parallel = cos(6 * Double.pi / 180)
    static let directionBins = 30

    /// Which 6-degree bin of directions (modulo 180 degrees) a line's lies in: how many of the bins'
    /// lower edges its direction, turned into 0..<180 degrees, is at or past (a binary search on
    /// cross products; no trigonometry).
    static func directionBin(_ line: Line) -> Int {
        var x = line.direction.x, y = line.direction.y
        if y < 0 || (y == 0 && x < 0) { x = -x; y = -y }
        var low = 0, high = directionBins
        while high - low > 1 {
            let middle = (low + high) / 2, edge = binEdges[middle]
            if edge.x * y - edge.y * x >= 0 { low = middle } else { high = middle }
        }
        return low
    }

    /// Unit vectors at the bins' lower edges: 0, 6, ..., 174 degrees.
    static let binEdges: [Point] = (0..<directionBins).map { bin in
        let angle = Double(bin) * 6 * .pi / 180
        return Point(x: cos(angle), y: sin(angle))
    }

    static let minimumSegment = 6

    /// Douglas-Peucker: a run of chain points within 1.6 px of the chord becomes a segment.
    static func split(_ chain: [Point], from first: Int, to last: Int, into segments: inout [Line]) {
        guard last - first + 1 >= minimumSegment else { return }
        let a = chain[first], b = chain[last]
        let dx = b.x - a.x, dy = b.y - a.y, length = max(1e-9, (dx * dx + dy * dy).squareRoot())
        var worst = 0.0, worstIndex = first
        for index in (first + 1)..<last {
            let d = abs((chain[index].x - a.x) * dy - (chain[index].y - a.y) * dx) / length
            if d > worst { worst = d; worstIndex = index }
        }
        if worst > 1.6 {
            split(chain, from: first, to: worstIndex, into: &segments)
            split(chain, from: worstIndex, to: last, into: &segments)
            return
        }
        var line = Line()
        for index in first...last { line.add(chain[index]) }
        line.fit()
        line.start = line.position(of: a)
        line.end = line.position(of: b)
        if line.start > line.end { swap(&line.start, &line.end) }
        line.support = line.length
        segments.append(line)
    }

    /// Ordered runs of 8-connected edge pixels, traced both ways from each unvisited pixel: all
    /// their points in one array, each chain a range of it.
    static func chains(in edges: EdgeMap) -> (points: [Point], runs: [Range<Int>]) {
        let w = edges.width, h = edges.height
        var points: [Point] = [], runs: [Range<Int>] = []
        guard w >= 3, h >= 3, edges.isEdge.count == w * h else { return (points, runs) }
        // 1 for an edge pixel not yet taken into a chain. Only inner pixels are edges (EdgeMap marks
        // rows and columns 1...size-2), so every neighbour of one is inside the picture.
        var open = edges.isEdge
        // Neighbours in circular order, so that the turn from one heading to another is the index
        // distance between them (0 straight ... 4 back): as moves in x and y (chain points are
        // tracked without dividing by the width) and as offsets in the pixel array.
        let steps = [Point(x: 1, y: 0), Point(x: 1, y: 1), Point(x: 0, y: 1), Point(x: -1, y: 1),
                     Point(x: -1, y: 0), Point(x: -1, y: -1), Point(x: 0, y: -1), Point(x: 1, y: -1)]
        let offsets = steps.map { Int($0.y) * w + Int($0.x) }
        // For each heading, the neighbours a walk may take (turning at most 90 degrees) in order of
        // preference: least turn first, ties to the lower index; heading 8 is a walk's first step,
        // which prefers the four straight neighbours.
        let preferred: [Int] = (0..<8).flatMap { heading -> [Int] in
            let turns = (0..<8).map { k in min((k - heading + 8) % 8, (heading - k + 8) % 8) }
            let allowed = (0..<8).filter { turns[$0] <= 2 }.sorted { (turns[$0], $0) < (turns[$1], $1) }
            return allowed + [Int](repeating: 0, count: 8 - allowed.count)
        } + [0, 2, 4, 6, 1, 3, 5, 7]
        open.withUnsafeMutableBufferPointer { open in
            offsets.withUnsafeBufferPointer { offsets in
                preferred.withUnsafeBufferPointer { preferred in
                    var forward: [Point] = [], backward: [Point] = []
                    /// Follows the edge from `start` (at `origin`), always to the unvisited neighbour that
                    /// turns least (at most 90 degrees), and records the pixels' positions in `path`.
                    func walk(from start: Int, at origin: Point, into path: inout [Point]) {
                        path.removeAll(keepingCapacity: true)
                        var current = start, heading = 8, position = origin
                        while true {
                            var best = -1
                            let first = heading &* 8, count = heading == 8 ? 8 : 5
                            var i = 0
                            while i < count {
                                let k = preferred[first &+ i]
                                if open[current &+ offsets[k]] != 0 { best = k; break }
                                i &+= 1
                            }
                            guard best >= 0 else { return }
                            current = current &+ offsets[best]
                            open[current] = 0
                            heading = best
                            position = position + steps[best]
                            path.append(position)
                        }
                    }
                    // Edge pixels are sparse: eight bytes without one are skipped at once.
                    let total = w * h, raw = UnsafeRawPointer(open.baseAddress!)
                    var block = 0
                    while block < total {
                        let end = min(block + 8, total)
                        if end - block == 8 && raw.loadUnaligned(fromByteOffset: block, as: UInt64.self) == 0 {
                            block = end
                            continue
                        }
                        // A walk may take pixels ahead of `start`: each is checked as it comes.
                        for start in block..<end where open[start] != 0 {
                            open[start] = 0
                            let origin = Point(x: Double(start % w), y: Double(start / w))
                            walk(from: start, at: origin, into: &forward)
                            walk(from: start, at: origin, into: &backward)
                            let count = backward.count + 1 + forward.count
                            guard count >= LineFinder.minimumSegment else { continue }
                            let first = points.count
                            points.append(contentsOf: backward.reversed())
                            points.append(origin)
                            points.append(contentsOf: forward)
                            runs.append(first..<points.count)
                        }
                        block = end
                    }
                }
            }
        }
        return (points, runs)
    }
}
