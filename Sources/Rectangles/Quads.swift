import Foundation
import Imaging

/// A candidate quadrilateral: corners in full-resolution continuous coordinates, around the outline.
struct Quad {
    var corners: [Point]
    var confidence: Double
    /// Ordering key (``QuadFinder/rankWeights``).
    var rank: Double
}

/// Quadrilaterals from four lines meeting at corners, scored by edge support along the outline.
struct QuadFinder {
    let edges: EdgeMap
    /// The working-scale picture the edges were found in (red, green, blue, or luma alone).
    let planes: [Plane]
    let lines: [Line]
    let options: RectangleDetector.Options
    let factor: Int
    let imageSize: Size

    /// How candidates are ranked: confidence, plus these weights times the share of the outline
    /// with contrast across it (a boundary has it all along, an outline through texture in
    /// patches), the square root of the outline's share of the picture (the page over the photo
    /// printed on it), and minus the run-on past the corners (``runOnReach``), summed over the four
    /// corners: the longer of each corner's two runs (a T: the outline is cut short by a line inside
    /// a larger object) and the shorter (an X: two lines that cross). Fitted as a conditional logit
    /// on a rendered set (`make_rectangle_set.py --seed 7 --count 1200`), checked on two others.
    static let rankWeights = (contrast: 0.42, size: 1.18, runningOn: 0.068, crossing: 0.049)
    /// Candidates ranked lower are not rectangles: mostly small, weakly supported outlines through
    /// texture (when it came in, false rectangles per empty picture went 0.133 -> 0.050 and 0.113 ->
    /// 0.047 on two rendered sets, and no rectangle found before was lost).
    static let leastRank = 1.35
    /// Run-on past a corner is the share of edge hits over this fraction of the side beyond it
    /// (at least `runOnLeast` working pixels).
    static let runOnReach = 0.25
    static let runOnLeast = 6.0
    /// At most this many of the best-supported lines take part (64 found no more rectangles on the
    /// rendered sets once texture-broken sides were merged, in more time), chosen from the
    /// ``linePool`` longest merged lines (``bestSupported()``).
    static let lineLimit = 56
    static let linePool = 224
    /// Least fraction of each side, and of the whole outline, that must have a matching edge.
    /// Faint sides (a light page on a light wall, a dark card on a dark coat) have edges along
    /// half of them or less; the ranking and ``leastRank`` turn away texture that passes too.
    static let sideSupport = 0.4
    static let outlineSupport = 0.68
    /// Longest run of a side without an edge, as a fraction of the side: an occluder may hide
    /// two fifths of it; a longer gap is usually a line that runs on to another object. (These
    /// three were 0.45, 0.7 and 0.35: recall 0.946 -> 0.954, 0.921 -> 0.942, 0.909 -> 0.916 on the
    /// rendered sets of seeds 12, 99 and 7, false rectangles per empty picture 0 -> 0.05 on seed
    /// 12 and unchanged on the others; the gap made most of the difference.)
    static let longestGap = 0.4
    /// Least brightness change across a side (grey levels per working pixel) that supports it;
    /// weaker edges are everywhere in texture and noise.
    static let supportingGradient = 3.0

    /// Where this line meets another: the other line, the position along this one, the point.
    struct Corner {
        let other: Int
        let t: Double
        let point: Point
    }

    /// At most this many corners per line take part (those with the best-supported partners, by
    /// ``bestSupported()``'s measure; 48 found as many rectangles on the rendered sets, in more
    /// time). Ordered by merged segment length alone, as before that measure, held-out seed 6 and
    /// tuned seed 99 found one rectangle fewer (0.723, 0.929), the other seven sets the same.
    static let cornerLimit = 32

    func candidates() -> [Quad] {
        let (used, support) = bestSupported()
        var corners = [[Corner]](repeating: [], count: used.count)
        // Lines meeting at no less than this angle: the cosine of their directions at most this.
        let largestCosine = cos((90 - options.quadratureTolerance - 8) * .pi / 180)
        for i in used.indices {
            for j in (i + 1)..<max(i + 1, used.count) {
                let a = used[i], b = used[j]
                let cosine = abs(a.direction.x * b.direction.x + a.direction.y * b.direction.y)
                guard cosine <= largestCosine, let p = a.intersection(with: b) else { continue }
                let ta = a.position(of: p), tb = b.position(of: p)
                // Both lines reach the point (allowing for a hidden corner), and at least one of
                // them ends there: the other may run on into collinear clutter.
                guard reaches(a, ta), reaches(b, tb), Self.endsNear(a, ta) || Self.endsNear(b, tb) else { continue }
                corners[i].append(Corner(other: j, t: ta, point: p))
                corners[j].append(Corner(other: i, t: tb, point: p))
            }
        }
        for i in corners.indices where corners[i].count > Self.cornerLimit {
            corners[i] = Array(corners[i].sorted { support[$0.other] > support[$1.other] }.prefix(Self.cornerLimit))
        }
        // Where line i meets line j: the index of that corner in corners[i], or -1.
        let n = used.count
        var cornerIndex = [Int32](repeating: -1, count: n * n)
        for i in corners.indices {
            for (k, corner) in corners[i].enumerated() { cornerIndex[i * n + corner.other] = Int32(k) }
        }
        let shortest = 0.4 * minimumSide
        // Sides are keyed by their two corners (each the meeting of two lines), in either order:
        // many quadrilaterals share a side, whose support is then measured once.
        var sides: [Int: Support?] = [:]
        // Each line's edge profile between its outermost corners, made when a side first needs it.
        var profiles = [Profile?](repeating: nil, count: n)
        func corner(_ i: Int, _ j: Int) -> Int { min(i, j) * Self.lineLimit + max(i, j) }
        func side(_ from: Int, _ to: Int, along line: Int, _ p: Point, _ q: Point) -> Support? {
            let key = min(from, to) * Self.lineLimit * Self.lineLimit + max(from, to)
            if let known = sides[key] { return known }
            if profiles[line] == nil {
                let ts = corners[line].map(\.t)
                let first = ts.min() ?? 0, last = ts.max() ?? 0
                // Past the outermost corners by a whole number of steps (so the samples between them
                // do not move), far enough to see whether edges run on past any corner (``runOnReach``).
                let margin = (Self.runOnReach * (last - first) + Self.runOnLeast).rounded(.up)
                profiles[line] = profile(of: used[line], from: first - margin, to: last + margin)
            }
            let measured = profiles[line]!.support(from: used[line].position(of: p), to: used[line].position(of: q))
            sides[key] = measured
            return measured
        }
        var quads: [Quad] = []
        for a in used.indices {
            for ab in corners[a] where ab.other > a {
                let b = ab.other, tb = used[b].position(of: ab.point)
                // The cycle a-b-c-d with a its least line and b < d: each quadrilateral of four lines
                // (in each of its cyclic orders) is met once.
                for ad in corners[a] where ad.other > b && abs(ad.t - ab.t) >= shortest {
                    let d = ad.other
                    for bc in corners[b] where bc.other > a && bc.other != d && abs(bc.t - tb) >= shortest {
                        let c = bc.other, tc = used[c].position(of: bc.point)
                        let k = Int(cornerIndex[c * n + d])
                        guard k >= 0 else { continue }
                        let cd = corners[c][k]
                        guard abs(cd.t - tc) >= shortest, cd.point.distance(to: ad.point) >= shortest else { continue }
                        let ids = (corner(a, b), corner(b, c), corner(c, d), corner(a, d))
                        // Cheap shape checks first; sides measured only for outlines that pass them.
                        guard let shape = outline(ab.point, bc.point, cd.point, ad.point),
                              let s0 = side(ids.0, ids.1, along: b, ab.point, bc.point),
                              let s1 = side(ids.1, ids.2, along: c, bc.point, cd.point),
                              let s2 = side(ids.2, ids.3, along: d, cd.point, ad.point),
                              let s3 = side(ids.3, ids.0, along: a, ad.point, ab.point) else { continue }
                        // The run-on penalty only lowers the rank: measured only where it may decide.
                        guard var quad = shape.scored(s0, s1, s2, s3), quad.rank >= Self.leastRank else { continue }
                        // How far edges run on past each corner along its two lines: where both end,
                        // an outline's corner; where one runs on, a line inside a larger object (T);
                        // where both do, two crossing lines (X).
                        let td = used[d].position(of: cd.point), tad = used[d].position(of: ad.point)
                        func runOn(_ line: Int, _ t: Double, _ other: Double) -> Double {
                            profiles[line]!.hitShare(past: t, awayFrom: other, least: Self.runOnLeast, reach: Self.runOnReach)
                        }
                        var runsOn = (longer: 0.0, shorter: 0.0)
                        func meeting(_ x: Double, _ y: Double) { runsOn.longer += max(x, y); runsOn.shorter += min(x, y) }
                        meeting(runOn(a, ab.t, ad.t), runOn(b, tb, bc.t))
                        meeting(runOn(b, bc.t, tb), runOn(c, tc, cd.t))
                        meeting(runOn(c, cd.t, tc), runOn(d, td, tad))
                        meeting(runOn(d, tad, td), runOn(a, ad.t, ab.t))
                        let w = Self.rankWeights
                        quad.rank = quad.rank - w.runningOn * runsOn.longer - w.crossing * runsOn.shorter
                        if quad.rank >= Self.leastRank { quads.append(quad) }
                    }
                }
            }
        }
        return quads
    }

    /// How much a candidate's rank drops for its weakest side (``stepAcross(_:_:)``):
    /// ``weakSideWeight`` times the share by which that side's step falls short of ``weakSideStep``
    /// grey levels. A boundary has one colour on one side and another on the other; a wire of a
    /// rack, a trough's leg or a crease in texture has much the same on both. Of the first
    /// rectangles reported on held-out seeds 1 and 4 and tuned seed 12, the weakest side's step was
    /// below 20 on 29 of 1168 true ones, 20 of 155 wrong ones and 7 of 14 false ones (on empty
    /// pictures). A weight of 0.3 (corners within 2.5%): false rectangles per empty picture on
    /// held-out seed 4 0.117 -> 0.083, the other sets unchanged; recall held-out seeds 1-5 0.765 /
    /// 0.717 / 0.692 / 0.731 / 0.750 -> 0.762 / 0.717 / 0.692 / 0.731 / 0.750, tuned seeds 12 / 7 /
    /// 99 0.938 / 0.910 / 0.927 -> 0.938 / 0.912 / 0.929; seed 6, rendered after the choice, 0.725 ->
    /// 0.723 with false ones unchanged (0.050). A weight of 0.6 brought seed 4 to 0.067 and seed 5
    /// 0.050 -> 0.033, for 1 to 3 rectangles fewer on six of the nine sets.
    static let weakSideStep = 20.0
    static let weakSideWeight = 0.3

    /// `quad`'s rank lowered for its weakest side (``weakSideWeight``).
    func penalizedRank(_ quad: Quad) -> Double {
        let scale = Double(factor)
        let c = quad.corners.map { Point(x: $0.x / scale - 0.5, y: $0.y / scale - 0.5) }
        let weakest = (0..<4).map { stepAcross(c[$0], c[($0 + 1) % 4]) }.min()!
        return quad.rank - Self.weakSideWeight * max(0, Self.weakSideStep - weakest) / Self.weakSideStep
    }

    /// The colour step across the side from `p` to `q` (working pixels): at each pixel step along
    /// its middle 80%, the largest difference in any plane between the means of the three pixels
    /// 2 to 4 pixels inside and the three outside, and the median of those over the side (0 when
    /// no step has both bands on the picture).
    func stepAcross(_ p: Point, _ q: Point) -> Double {
        let length = p.distance(to: q)
        guard length >= 4 else { return 0 }
        let along = (q - p) * (1 / length), across = Point(x: -along.y, y: along.x)
        var steps: [Float] = []
        steps.reserveCapacity(Int(length))
        for t in stride(from: 0.1 * length, through: 0.9 * length, by: 1) {
            let centre = p + along * t
            let inside = (2...4).compactMap { pixel(centre - across * Double($0)) }
            let outside = (2...4).compactMap { pixel(centre + across * Double($0)) }
            guard inside.count == 3, outside.count == 3 else { continue }
            steps.append(planes.map { plane in
                abs(inside.reduce(0) { $0 + plane.pixels[$1] } - outside.reduce(0) { $0 + plane.pixels[$1] }) / 3
            }.max()!)
        }
        guard !steps.isEmpty else { return 0 }
        steps.sort()
        return Double(steps[steps.count / 2])
    }

    /// The candidates in order of ``penalizedRank(_:)``, those that it leaves at or above
    /// ``leastRank``, measured lazily: since the penalty only lowers a rank, a candidate is
    /// measured only once every one ranked above it has been, so a caller that wants the first few
    /// measures a few. Each comes back as it was found (its rank before the penalty).
    struct PenalizedOrder: IteratorProtocol {
        let finder: QuadFinder
        /// Highest rank first.
        let quads: [Quad]
        var measured = 0
        /// Measured candidates not yet returned: their index and lowered rank.
        var waiting: [(index: Int, rank: Double)] = []

        mutating func next() -> Quad? {
            while measured < quads.count, waiting.allSatisfy({ $0.rank < quads[measured].rank }) {
                let rank = finder.penalizedRank(quads[measured])
                if rank >= QuadFinder.leastRank { waiting.append((measured, rank)) }
                measured += 1
            }
            // Ties to the one found first.
            guard let best = waiting.indices.max(by: { (waiting[$0].rank, -waiting[$0].index) < (waiting[$1].rank, -waiting[$1].index) })
            else { return nil }
            return quads[waiting.remove(at: best).index]
        }
    }

    /// The ``lineLimit`` lines with the most support: the length of the segments merged into the
    /// line or, when more, its edge hits (``profile(of:from:to:)``, one per pixel step) from end to
    /// end; ties in the order found. Texture breaks a photo's side into pieces too short or too
    /// crooked to be segments, which leaves its merged length below many lines of the texture
    /// (seed 1 of the held-out family: 9 of the 22 photos with three of four sides found had the
    /// fourth at ranks 58 to 205), while the edge pixels are still there along most of it. On the
    /// rendered sets (corners within 2.5%): held-out seeds 1-5 0.756 / 0.717 / 0.690 / 0.727 / 0.735
    /// -> 0.765 / 0.717 / 0.692 / 0.731 / 0.750 (4 and 5 not looked at while choosing), tuned seeds
    /// 12 / 7 / 99 0.933 / 0.910 / 0.925 -> 0.938 / 0.910 / 0.927; false rectangles one more on seed
    /// 1 and on seed 7, one fewer on seed 12. Ranking by edge hits alone: 0.767 / 0.706 / 0.700.
    /// Returns the lines and their support, best first.
    func bestSupported() -> (lines: [Line], support: [Double]) {
        let pool = Array(lines.prefix(Self.linePool))
        let support = pool.map { line -> Double in
            max(line.support, Double(hits(along: line, from: line.start, to: line.end)))
        }
        let best = pool.indices.sorted { support[$0] != support[$1] ? support[$0] > support[$1] : $0 < $1 }.prefix(Self.lineLimit)
        return (best.map { pool[$0] }, best.map { support[$0] })
    }

    /// The outermost of the candidates that enclose `quad` closely (every corner within 10% of its
    /// diagonal, in some order) with nearly its confidence (at most ``outerConfidenceDrop`` less)
    /// and rank (at most 0.1 less), and frame it all round (``framesAllRound(_:_:)``), or `quad`
    /// itself: a photo's white border or a card's rim outlines the object, the inner edge is part
    /// of its picture. On the rendered sets (`spotter rectangles`, both looks), with the ranking of
    /// its time: seed 12 0.885 -> 0.908, seed 7 0.850 -> 0.875, seed 99 0.875 -> 0.890; the
    /// corners' error falls on all three. Asking the frame to go all round kept a box's side face
    /// out of its outline: on the held-out family (`--family heldout`, corners within 2.5%) seeds
    /// 1, 2, 3 went 0.721 -> 0.735, 0.681 -> 0.698, 0.652 -> 0.671 (boxes 0.46 -> 0.63 and 0.52 ->
    /// 0.68 on seeds 1 and 2), the tuned family's seeds 12, 7, 99 0.931 -> 0.933, 0.910 -> 0.912,
    /// 0.927 -> 0.921.
    func outerFrame(of quad: Quad, among quads: [Quad]) -> Quad {
        let c = quad.corners
        let tolerance = 0.1 * max(c[0].distance(to: c[2]), c[1].distance(to: c[3]))
        var best = quad, bestArea = Self.area(c)
        for other in quads where other.confidence >= quad.confidence - Self.outerConfidenceDrop && other.rank >= quad.rank - 0.1 {
            let o = other.corners, otherArea = Self.area(o)
            guard otherArea > bestArea, c.allSatisfy({ Self.encloses(o, $0) }), Self.hugs(c, o, within: tolerance),
                  framesAllRound(c, o) else { continue }
            best = other
            bestArea = otherArea
        }
        return best
    }

    /// Whether `outer` frames `inner` all round. On each pair of opposite sides, either the nearer
    /// side of `outer` lies at least ``farRimShare`` as far outside `inner` as the farther one
    /// (perspective narrows a far rim), or the band `outer` adds beyond the farther side has the
    /// colour (within ``rimColourMatch`` in every channel) of a band as deep beside the nearer one:
    /// inside it (`inner` already holds the rim there) or outside (the rim's outer edge there too
    /// faint to make a candidate). A border, a bezel or a rim has one colour all round; a box's
    /// side face, seen beside one or two sides of its front, does not.
    func framesAllRound(_ inner: [Point], _ outer: [Point]) -> Bool {
        let (sides, outwards, _) = workingSides(inner)
        let scale = Double(factor)
        let matched = inner.map { p in outer.min { p.distance(to: $0) < p.distance(to: $1) }! }
            .map { Point(x: $0.x / scale - 0.5, y: $0.y / scale - 0.5) }
        let depths = (0..<4).map { k -> Double in
            func depth(_ p: Point) -> Double { (p.x - sides[k].center.x) * outwards[k].x + (p.y - sides[k].center.y) * outwards[k].y }
            return (depth(matched[k]) + depth(matched[(k + 1) % 4])) / 2
        }
        return (0..<2).allSatisfy { k in
            let (deep, shallow) = depths[k] >= depths[k + 2] ? (k, k + 2) : (k + 2, k)
            let depth = depths[deep], level = depths[shallow]
            if level >= Self.farRimShare * depth - 1 { return true }
            guard depth >= 3, let rim = bandColour(sides[deep], from: 1, to: depth - 1, outward: outwards[deep]) else { return false }
            return [(level - depth + 1, level - 1), (level + 1, level + depth - 1)].contains { band in
                Self.sameColour(rim, bandColour(sides[shallow], from: band.0, to: band.1, outward: outwards[shallow]))
            }
        }
    }

    /// ``framesAllRound(_:_:)``'s bounds, chosen on the held-out family's seeds 1 and 2 with the
    /// tuned set kept where it was (0.25 or 0.6, colours within 24, 40 or 60 grey levels): each
    /// found 0.733-0.742 and 0.690-0.698 on them, boxes 0.54-0.69; at 60 boxes fell back.
    static let farRimShare = 0.25
    static let rimColourMatch = 40.0

    /// Whether two band colours (``bandColour(_:from:to:outward:)``) agree within
    /// ``rimColourMatch`` in every plane; a band off the picture agrees with nothing.
    static func sameColour(_ a: [Double]?, _ b: [Double]?) -> Bool {
        guard let a, let b else { return false }
        return zip(a, b).allSatisfy { abs($0 - $1) <= rimColourMatch }
    }

    /// The mean colour (one value per plane) of the band beside the middle 80% of `line` from
    /// `from` to `to` working pixels along `outward` (negative: inside), or nil when it is off the picture.
    func bandColour(_ line: Line, from: Double, to: Double, outward: Point) -> [Double]? {
        var sums = [Double](repeating: 0, count: planes.count), count = 0
        let inset = 0.1 * line.length
        for t in stride(from: line.start + inset, through: line.end - inset, by: 1) {
            for offset in stride(from: min(from, to), through: max(from, to), by: 1) {
                guard let i = pixel(line.point(at: t) + outward * offset) else { continue }
                for (k, plane) in planes.enumerated() { sums[k] += Double(plane.pixels[i]) }
                count += 1
            }
        }
        return count > 0 ? sums.map { $0 / Double(count) } : nil
    }

    /// The index in the working-scale planes of the pixel that holds `p` (working pixels, pixel
    /// centres at whole numbers), or nil when it is off the picture.
    func pixel(_ p: Point) -> Int? {
        let w = planes[0].width, h = planes[0].height
        let x = Int((p.x + 0.5).rounded(.down)), y = Int((p.y + 0.5).rounded(.down))
        return x >= 0 && y >= 0 && x < w && y < h ? y * w + x : nil
    }

    /// The sides of a quadrilateral (corners in full-resolution pixels) as lines at the working
    /// scale, side k from corner k to the next, each with its unit normal pointing out of the
    /// quadrilateral, and the mean length of the shorter pair of opposite sides.
    func workingSides(_ corners: [Point]) -> (sides: [Line], outwards: [Point], shorter: Double) {
        let scale = Double(factor)
        let c = corners.map { Point(x: $0.x / scale - 0.5, y: $0.y / scale - 0.5) }
        let cx = c.map(\.x).reduce(0, +) / 4, cy = c.map(\.y).reduce(0, +) / 4
        let shorter = min(c[0].distance(to: c[1]) + c[2].distance(to: c[3]), c[1].distance(to: c[2]) + c[3].distance(to: c[0])) / 2
        var sides: [Line] = [], outwards: [Point] = []
        for k in 0..<4 {
            let line = Line(through: [c[k], c[(k + 1) % 4]])
            var outward = line.normal
            if (line.center.x - cx) * outward.x + (line.center.y - cy) * outward.y < 0 { outward = outward * -1 }
            sides.append(line)
            outwards.append(outward)
        }
        return (sides, outwards, shorter)
    }

    /// Each side moved out onto the outermost parallel edge just outside it (within ``rimReach`` of
    /// the shorter side) that edges support along at least ``rimSupport`` of it: a sign's painted
    /// border, a screen's bezel or a card's rim is part of the object, and its inner edge is often
    /// the stronger one. Sides move one by one, so an outline found partly on the inner and partly
    /// on the outer edge comes out whole (``outerFrame(of:among:)`` needs a candidate that is).
    /// A side whose rim's outer edge is too broken for that moves out by colour instead
    /// (``colourRim(of:among:outwards:reach:)``).
    func widened(_ quad: Quad) -> Quad {
        let scale = Double(factor)
        let working = workingSides(quad.corners), outwards = working.outwards
        var sides = working.sides
        let reach = Int((Self.rimReach * working.shorter).rounded())
        guard reach >= 3 else { return quad }
        // Offsets 1 and 2 still see the side's own edge (a hit is within a pixel of the line).
        let moves = (0..<4).map { k in (3...reach).last { rimSupported(sides[k], offset: Double($0), outward: outwards[k]) } ?? 0 }
        // A rim goes all round: the side opposite a moved one has an edge inside it at about the
        // same depth (or moved as far itself). A box's side face, seen on one side only, does not.
        var moved = false
        let found = sides
        for k in 0..<4 where moves[k] > 0 {
            let j = (k + 2) % 4, depth = Double(moves[k]), opposite = Double(moves[j])
            let low = max(3, Int((0.6 * depth).rounded(.down))), high = Int((1.4 * depth).rounded(.up)) + 1
            if abs(opposite - depth) <= 0.4 * depth + 1
                || (low...high).contains(where: { rimSupported(found[j], offset: opposite - Double($0), outward: outwards[j]) }) {
                sides[k].center = sides[k].center + outwards[k] * depth
                moved = true
            }
        }
        // A side no edge moved, on the inner edge of a rim whose colour the other sides hold inside them.
        for k in 0..<4 where moves[k] == 0 {
            guard let depth = colourRim(of: k, among: sides, outwards: outwards, reach: reach) else { continue }
            sides[k].center = sides[k].center + outwards[k] * Double(depth)
            moved = true
        }
        guard moved else { return quad }
        var corners: [Point] = []
        for k in 0..<4 {
            guard let p = sides[(k + 3) % 4].intersection(with: sides[k]) else { return quad }
            corners.append(Point(x: (p.x + 0.5) * scale, y: (p.y + 0.5) * scale))
        }
        return Quad(corners: corners, confidence: quad.confidence, rank: quad.rank)
    }

    /// How far side `k` (of `sides`, with their outward normals) lies inside a rim that its edge
    /// outside is too faint to show (``widened(_:)``'s edge test): a screen's dark bezel against a
    /// dark coat, a sign's border against leaves of its colour. The band just outside the side has
    /// the colour (within ``rimColourMatch``) of the bands just inside at least two of the other
    /// sides (a rim goes round) and not the colour just inside it (the side is a boundary); the rim
    /// ends at the first depth within `reach` where the colour outside changes, and edges there
    /// support a side (``sideSupport``). Nil otherwise. `sides` are the sides as ``widened(_:)`` has
    /// moved them so far (a side its edge test moved holds the rim inside it too). On the rendered
    /// sets (`spotter rectangles`, both looks, corners within 2.5%): held-out family seeds 1 / 2 / 3
    /// 0.735 / 0.698 / 0.671 -> 0.746 / 0.715 / 0.690, tuned family seeds 12 / 7 / 99 0.933 / 0.912
    /// / 0.921 -> 0.935 / 0.910 / 0.927, false rectangles unchanged. A first version compared with
    /// the sides as found (0.744 / 0.710 / 0.683); in it, asking one other side instead of two gave
    /// 0.742 / 0.719 / 0.692 and 0.933 / 0.910 / 0.929, all three 0.738 / 0.706 / 0.677 and 0.935 /
    /// 0.912 / 0.925: two, the design's choice, was kept (the tuned family ties all three).
    func colourRim(of k: Int, among sides: [Line], outwards: [Point], reach: Int) -> Int? {
        func band(_ side: Int, _ from: Double, _ to: Double) -> [Double]? { bandColour(sides[side], from: from, to: to, outward: outwards[side]) }
        let outside = band(k, 1, 2)
        guard !Self.sameColour(outside, band(k, -2, -1)),
              (0..<4).filter({ $0 != k && Self.sameColour(outside, band($0, -2, -1)) }).count >= 2,
              let depth = (3...max(3, reach)).first(where: { !Self.sameColour(outside, band(k, Double($0) + 1, Double($0) + 2)) }), depth < reach,
              [depth, depth + 1].contains(where: { rimSupported(sides[k], offset: Double($0), outward: outwards[k], least: Self.sideSupport) })
        else { return nil }
        return depth
    }

    /// Whether edges support `line` moved `offset` working pixels along `outward` over at least
    /// `least` (``rimSupport`` unless given) of its middle 80% (the corners, where the neighbouring
    /// sides' edges are, left out).
    func rimSupported(_ line: Line, offset: Double, outward: Point, least: Double = Self.rimSupport) -> Bool {
        var shifted = line
        shifted.center = line.center + outward * offset
        let inset = 0.1 * line.length
        let profile = profile(of: shifted, from: line.start + inset, to: line.end - inset)
        return profile.hitShare(0, profile.steps.count - 1) >= least
    }

    /// How far out a side may move (``widened(_:)``), as a share of the quadrilateral's shorter
    /// side, and the least share of it the edge there must support. Chosen on the held-out family's
    /// seed 1 (`make_rectangle_set.py --family heldout`) with the tuned set kept where it was
    /// (0.954): 0.08 and 0.6, with at most 0.15 less support than the side had, found 0.669 ->
    /// 0.696 of the rectangles there; 0.12 and 0.7 without that bound 0.708; 0.1 and 0.55 lost
    /// rectangles on the tuned set (0.927) by moving sides onto texture beside them. Sides moved
    /// onto a box's side face cost boxes 0.48 -> 0.40; asking for the rim on the opposite side
    /// too brought them back (0.54 on seed 3) and seed 1 to 0.721.
    static let rimReach = 0.12
    static let rimSupport = 0.7

    /// How much less of its outline the enclosing frame may have supported: its outer side is
    /// often the fainter edge (a white page on a light wall, a dark card on a dark coat). 0.1
    /// rather than 0.05 found 0.944 -> 0.946, 0.910 -> 0.921 and 0.907 -> 0.909 of the rectangles
    /// on the rendered sets of seeds 12, 99 and 7 (0.15 no more; false ones unchanged).
    static let outerConfidenceDrop = 0.1

    static func area(_ c: [Point]) -> Double {
        abs((0..<4).reduce(0.0) { $0 + c[$1].x * c[($1 + 1) % 4].y - c[($1 + 1) % 4].x * c[$1].y }) / 2
    }

    /// Whether the convex quadrilateral `q` holds point `p` (up to about a pixel outside).
    static func encloses(_ q: [Point], _ p: Point) -> Bool {
        let sides = (0..<4).map { k -> Double in
            let a = q[k], b = q[(k + 1) % 4]
            return (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
        }
        return sides.allSatisfy { $0 >= -1 } || sides.allSatisfy { $0 <= 1 }
    }

    /// Whether every corner of `a` is within `tolerance` of a corner of `b`, matched in order
    /// around both outlines (either way round, from any start).
    static func hugs(_ a: [Point], _ b: [Point], within tolerance: Double) -> Bool {
        for order in [b, Array(b.reversed())] {
            for shift in 0..<4 where (0..<4).allSatisfy({ a[$0].distance(to: order[($0 + shift) % 4]) <= tolerance }) { return true }
        }
        return false
    }

    /// Least side length in working pixels that the options allow.
    var minimumSide: Double { Self.minimumSide(options, imageSize: imageSize, factor: factor) }

    static func minimumSide(_ options: RectangleDetector.Options, imageSize: Size, factor: Int) -> Double {
        max(8, options.minimumSize * Double(min(imageSize.width, imageSize.height)) / Double(factor))
    }

    /// Whether position `t` is on the line or not far beyond either end (a corner hidden by an
    /// occluder): up to 1.5 times the line's length (or the least side) past it. (Twice the length,
    /// once texture-broken sides were merged, found 2 more rectangles of 480 on one rendered set
    /// and none on another, for a fifth more time.)
    func reaches(_ line: Line, _ t: Double) -> Bool {
        let beyond = max(1.5 * line.length, minimumSide) + 4
        return t >= line.start - beyond && t <= line.end + beyond
    }

    /// Whether position `t` is near one of the line's ends rather than well inside it.
    static func endsNear(_ line: Line, _ t: Double) -> Bool {
        let inside = 0.2 * line.length + 2
        return t <= line.start + inside || t >= line.end - inside
    }

    /// What ``support(from:to:)`` measures along one side.
    typealias Support = (found: Double, samples: Double, strong: Double)

    /// The outline through p0...p3 (working pixel coordinates) in full-resolution pixels, when it
    /// is inside the picture and passes the options with some slack (refinement moves corners; the
    /// final check is exact); nil otherwise. Most candidates end here, before any side is measured.
    func outline(_ p0: Point, _ p1: Point, _ p2: Point, _ p3: Point) -> Outline? {
        let scale = Double(factor)
        @inline(__always) func full(_ p: Point) -> Point { Point(x: (p.x + 0.5) * scale, y: (p.y + 0.5) * scale) }
        let f0 = full(p0), f1 = full(p1), f2 = full(p2), f3 = full(p3)
        let w = Double(imageSize.width), h = Double(imageSize.height), margin = 2 * scale
        @inline(__always) func inside(_ p: Point) -> Bool { p.x >= -margin && p.y >= -margin && p.x <= w + margin && p.y <= h + margin }
        guard inside(f0), inside(f1), inside(f2), inside(f3),
              Self.roughlyPasses(f0, f1, f2, f3, options: options, imageSize: imageSize) else { return nil }
        return Outline(corners: (f0, f1, f2, f3), pictureArea: w * h)
    }

    /// An outline that passed the shape checks, in full-resolution pixels.
    struct Outline {
        let corners: (Point, Point, Point, Point)
        let pictureArea: Double

        /// The candidate, given each side's edge support (side k from corner k to the next), ranked
        /// before the run-on penalty; nil when the whole outline's support is below `outlineSupport`.
        func scored(_ s0: Support, _ s1: Support, _ s2: Support, _ s3: Support) -> Quad? {
            let total = s0.samples + s1.samples + s2.samples + s3.samples
            let confidence = (s0.found + s1.found + s2.found + s3.found) / total
            guard confidence >= QuadFinder.outlineSupport else { return nil }
            let contrasted = s0.strong + s1.strong + s2.strong + s3.strong
            let (f0, f1, f2, f3) = corners
            let signedArea = (f0.x * f1.y - f1.x * f0.y + f1.x * f2.y - f2.x * f1.y + f2.x * f3.y - f3.x * f2.y + f3.x * f0.y - f0.x * f3.y) / 2
            // Clockwise as displayed (y down), so that refinement, which walks each side from one corner
            // to the next, sees every quadrilateral the same way however its lines were met.
            let w = QuadFinder.rankWeights
            let rank = confidence + w.contrast * contrasted / total + w.size * (abs(signedArea) / pictureArea).squareRoot()
            return Quad(corners: signedArea >= 0 ? [f0, f1, f2, f3] : [f0, f3, f2, f1], confidence: confidence, rank: rank)
        }
    }

    /// ``RectangleDetector/passes(_:options:imageSize:)`` with slack (5 degrees more quadrature
    /// tolerance, aspect ratios 0.05 wider, 10% less minimum size), on four corners in pixels and
    /// without trigonometry: a corner deviates from square by at most t when the cosine of its
    /// angle is at most sin(t) in magnitude.
    static func roughlyPasses(_ a: Point, _ b: Point, _ c: Point, _ d: Point, options: RectangleDetector.Options, imageSize: Size) -> Bool {
        let e0 = b - a, e1 = c - b, e2 = d - c, e3 = a - d
        let l0 = (e0.x * e0.x + e0.y * e0.y).squareRoot(), l1 = (e1.x * e1.x + e1.y * e1.y).squareRoot()
        let l2 = (e2.x * e2.x + e2.y * e2.y).squareRoot(), l3 = (e3.x * e3.x + e3.y * e3.y).squareRoot()
        // Turning the same way at every corner: convex.
        let k0 = e3.x * e0.y - e3.y * e0.x, k1 = e0.x * e1.y - e0.y * e1.x, k2 = e1.x * e2.y - e1.y * e2.x, k3 = e2.x * e3.y - e2.y * e3.x
        guard (k0 > 0 && k1 > 0 && k2 > 0 && k3 > 0) || (k0 < 0 && k1 < 0 && k2 < 0 && k3 < 0) else { return false }
        let pairA = (l0 + l2) / 2, pairB = (l1 + l3) / 2
        let shorter = min(pairA, pairB), longer = max(pairA, pairB)
        let aspect = longer > 0 ? shorter / longer : 0
        guard shorter >= options.minimumSize * 0.9 * Double(min(imageSize.width, imageSize.height)),
              aspect >= max(0, options.minimumAspectRatio - 0.05) - 1e-9, aspect <= min(1, options.maximumAspectRatio + 0.05) + 1e-9
        else { return false }
        let limit = sin(min(90, options.quadratureTolerance + 5) * .pi / 180)
        @inline(__always) func square(_ u: Point, _ lu: Double, _ v: Point, _ lv: Double) -> Bool {
            abs(u.x * v.x + u.y * v.y) <= limit * max(1e-12, lu * lv)
        }
        return square(e3, l3, e0, l0) && square(e0, l0, e1, l1) && square(e1, l1, e2, l2) && square(e2, l2, e3, l3)
    }

    /// Whether the edge map supports a line at each pixel step from `first` to `last` (positions
    /// along it): a step hits when an edge pixel within one pixel across the line has a gradient
    /// within about 25 degrees of the line's normal and at least `supportingGradient` strong; it
    /// has contrast when any of those three pixels (edge or not) has that much gradient across.
    func profile(of line: Line, from first: Double, to last: Double) -> Profile {
        var steps = [UInt8](repeating: 0, count: max(0, Int(last - first)) + 1)
        scan(line, from: first, to: last) { step, value in steps[step] = value }
        return Profile(first: first, steps: steps)
    }

    /// The number of steps from `first` to `last` that hit, as ``profile(of:from:to:)`` finds them.
    func hits(along line: Line, from first: Double, to last: Double) -> Int {
        var hits = 0
        scan(line, from: first, to: last) { _, value in hits += Int(value & 1) }
        return hits
    }

    /// ``profile(of:from:to:)``'s measure at each step, handed to `body` with the step's index:
    /// bit 0 a hit, bit 1 contrast.
    @inline(__always)
    private func scan(_ line: Line, from first: Double, to last: Double, _ body: (Int, UInt8) -> Void) {
        let count = max(0, Int(last - first)) + 1
        let nx = line.normal.x, ny = line.normal.y
        let w = edges.width, h = edges.height
        edges.isEdge.withUnsafeBufferPointer { isEdge in
            edges.gx.withUnsafeBufferPointer { gxs in
                edges.gy.withUnsafeBufferPointer { gys in
                    for step in 0..<count {
                        let centre = line.point(at: first + Double(step) + 0.5)
                        var hit = false, contrast = false
                        // On the line, then one pixel either side of it.
                        for k in 0..<3 where !hit {
                            let offset = k == 0 ? 0.0 : k == 1 ? -1.0 : 1.0
                            // Nearest pixel; points off the picture have no edge.
                            let fx = centre.x + nx * offset + 0.5, fy = centre.y + ny * offset + 0.5
                            guard fx >= 0, fy >= 0, fx < Double(w), fy < Double(h) else { continue }
                            let i = Int(fy) * w + Int(fx)
                            let gx = Double(gxs[i]), gy = Double(gys[i])
                            let across = gx * nx + gy * ny
                            if abs(across) >= Self.supportingGradient { contrast = true }
                            if isEdge[i] != 0 && across * across >= 0.81 * (gx * gx + gy * gy) && abs(across) >= Self.supportingGradient {
                                hit = true
                            }
                        }
                        body(step, (hit ? 1 : 0) | (contrast ? 2 : 0))
                    }
                }
            }
        }
    }
}

/// A line's edge support at each pixel step (``QuadFinder/profile(of:from:to:)``): bit 0 a hit,
/// bit 1 contrast across it.
struct Profile {
    let first: Double
    let steps: [UInt8]

    /// The share of samples that hit beyond position `t`, on the side away from `other`, over
    /// `reach` of the distance between them (at least `least` pixels).
    func hitShare(past t: Double, awayFrom other: Double, least: Double, reach: Double) -> Double {
        let extent = max(least, reach * abs(t - other))
        let (from, to) = t > other ? (t, t + extent) : (t - extent, t)
        // Sample k lies at first + k + 0.5.
        let low = max(0, Int((from - first - 0.5).rounded(.up))), high = min(steps.count - 1, Int((to - first - 0.5).rounded(.down)))
        return hitShare(low, high)
    }

    /// The share of samples `low` through `high` that hit (0 when there are none).
    func hitShare(_ low: Int, _ high: Int) -> Double {
        guard high >= low else { return 0 }
        var hits = 0
        for k in low...high where steps[k] & 1 != 0 { hits += 1 }
        return Double(hits) / Double(high - low + 1)
    }

    /// How well edges support the part of the line from position `a` to `b`: the samples (one per
    /// pixel) that hit, the number of samples, and those with contrast across the line; nil (as
    /// soon as it is certain) when fewer than `sideSupport` of them hit or a run without a hit is
    /// longer than `longestGap` of them. Only runs of three or more hits count: texture and noise
    /// give scattered hits, a boundary gives runs.
    func support(from a: Double, to b: Double) -> QuadFinder.Support? {
        let lo = min(a, b), length = abs(b - a)
        guard length >= 2, !steps.isEmpty else { return nil }
        let count = Int(length)
        let needed = Int((QuadFinder.sideSupport * Double(count)).rounded(.up)), longest = Int(QuadFinder.longestGap * Double(count))
        var found = 0, gap = 0, hits = 0, misses = 0, strong = 0
        @inline(__always) func endRun() {
            if hits >= 3 { found += hits; gap = max(gap, misses); misses = 0 } else { misses += hits }
            hits = 0
        }
        let spacing = length / Double(count), last = steps.count - 1
        for step in 0..<count {
            // Hopeless already: too long without an edge, or too few samples left.
            if misses > longest || found + hits + (count - step) < needed { return nil }
            let index = min(last, max(0, Int(lo + (Double(step) + 0.5) * spacing - first)))
            let value = steps[index]
            if value & 2 != 0 { strong += 1 }
            if value & 1 != 0 { hits += 1 } else { endRun(); misses += 1 }
        }
        endRun()
        guard found >= needed, max(gap, misses) <= longest else { return nil }
        return (Double(found), Double(count), Double(strong))
    }
}

/// Moves each side onto the strongest edge near it at full resolution (sub-pixel), then takes the
/// corners where the refined sides meet.
struct Refiner {
    let luma: Luma
    let factor: Int

    /// Most places along a side where the edge across it is found: 48 gave the same recall on the
    /// rendered sets (seeds 12, 99, 7: 0.954, 0.942, 0.916 against 0.954, 0.942, 0.914 now) and
    /// corner error (0.24, 0.24, 0.22% against 0.25, 0.23, 0.22%), a third more refinement time.
    static let sidePlaces = 32

    /// The corners refined twice: the second pass, from the first's corners and looking only 2
    /// pixels across each side, no longer depends on where the working scale put them.
    func refine(_ corners: [Point]) -> [Point] {
        refineOnce(refineOnce(corners, reach: factor + 2), reach: 2)
    }

    /// Each side moved onto the strongest edge within `reach` pixels across it.
    func refineOnce(_ corners: [Point], reach: Int) -> [Point] {
        var sides: [Line] = []
        for index in 0..<4 {
            guard let side = refineSide(from: corners[index], to: corners[(index + 1) % 4], reach: reach) else { return corners }
            sides.append(side)
        }
        var refined: [Point] = []
        for index in 0..<4 {
            guard let p = sides[(index + 3) % 4].intersection(with: sides[index]),
                  p.distance(to: corners[index]) <= Double(2 * factor + 4) else { return corners }
            refined.append(p)
        }
        return refined
    }

    /// Edge positions across the side (at most ``sidePlaces`` of them), fitted with a line after
    /// dropping outliers (occluders, shadows crossing the side); nil when too few places find an
    /// edge. The edges are looked for in luma and in each colour channel, and the channel with the
    /// most contrast where it finds them is used: a red sign against green leaves has about their
    /// luma, and in luma its side moves onto the nearest dark branch. (Luma alone before: held-out
    /// seeds 1 / 2 / 3 0.746 / 0.715 / 0.690 -> 0.756 / 0.717 / 0.690, corner error 0.29 / 0.31 /
    /// 0.30% -> 0.27 / 0.29 / 0.28%; the tuned family's seed 12 0.935 -> 0.933, within 5% 459 -> 458
    /// of 480; the real photos' monitor 1.07% -> 0.80% of the diagonal.)
    func refineSide(from a: Point, to b: Point, reach: Int) -> Line? {
        let length = a.distance(to: b)
        guard length >= 4 else { return nil }
        let direction = (b - a) * (1 / length), normal = Point(x: -direction.y, y: direction.x)
        let count = min(Self.sidePlaces, max(8, Int(length / 4)))
        let width = 2 * reach + 3
        // Grey and YUV pictures: luma is all they have.
        let channels = luma.hasColour ? 4 : 1
        // The profile across the side at each place, for each channel (luma, then red, green and
        // blue), each value averaged over three points along the side.
        var profiles = [Float](repeating: 0, count: channels * count * width)
        var places: [Double] = []
        for index in 0..<count {
            let t = length * (0.06 + 0.88 * (Double(index) + 0.5) / Double(count))
            places.append(t)
            let base = a + direction * t
            for o in 0..<width {
                let p = base + normal * Double(o - reach - 1)
                let at = index * width + o
                if channels == 1 {
                    profiles[at] = (luma.sample(p.x, p.y) + luma.sample(p.x + direction.x, p.y + direction.y)
                                    + luma.sample(p.x - direction.x, p.y - direction.y)) / 3
                } else {
                    let c = (luma.colour(p.x, p.y) + luma.colour(p.x + direction.x, p.y + direction.y)
                             + luma.colour(p.x - direction.x, p.y - direction.y)) / 3
                    profiles[at] = Luma.luma(c)
                    profiles[count * width + at] = c.x
                    profiles[2 * count * width + at] = c.y
                    profiles[3 * count * width + at] = c.z
                }
            }
        }
        let found = (0..<channels).map { channel in
            edges(in: profiles[(channel * count * width)..<((channel + 1) * count * width)], width: width, reach: reach, places: places)
        }
        for channel in found.indices.sorted(by: { (found[$0].strength, -$0) > (found[$1].strength, -$1) }) {
            if let line = fit(found[channel].positions, from: a, direction: direction, normal: normal, places: count) { return line }
        }
        return nil
    }

    /// At each place (a profile of `width` values across the side, the side at its middle), where
    /// the strongest change lies (sub-pixel) and which way it goes, if it is at least 4 levels; and
    /// the sum of those changes.
    func edges(in profiles: ArraySlice<Float>, width: Int, reach: Int, places: [Double])
        -> (positions: [(t: Double, offset: Double, polarity: Double)], strength: Float) {
        var positions: [(t: Double, offset: Double, polarity: Double)] = []
        var strength: Float = 0
        for (index, t) in places.enumerated() {
            let first = profiles.startIndex + index * width
            let profile = profiles[first..<(first + width)]
            var best = 0, bestValue: Float = 0
            for i in 1..<(width - 1) {
                let g = abs(profile[first + i + 1] - profile[first + i - 1])
                if g > bestValue { bestValue = g; best = i }
            }
            guard best > 1, best < width - 2, bestValue >= 4 else { continue }
            let gm = abs(profile[first + best] - profile[first + best - 2]), g0 = bestValue, gp = abs(profile[first + best + 2] - profile[first + best])
            let denominator = gm - 2 * g0 + gp
            let shift = denominator != 0 ? Double(0.5 * (gm - gp) / denominator) : 0
            let polarity: Double = profile[first + best + 1] > profile[first + best - 1] ? 1 : -1
            positions.append((t, Double(best - reach - 1) + max(-0.5, min(0.5, shift)), polarity))
            strength += bestValue
        }
        return (positions, strength)
    }

    /// The line through the edge positions of the majority polarity, outliers dropped; nil when
    /// fewer than a third of the `places` (at least 4) are left.
    func fit(_ positions: [(t: Double, offset: Double, polarity: Double)], from a: Point, direction: Point, normal: Point, places count: Int) -> Line? {
        // The majority polarity: the side is one boundary, dark-to-light or light-to-dark.
        let polarity: Double = positions.map(\.polarity).reduce(0, +) >= 0 ? 1 : -1
        var points = positions.filter { $0.polarity == polarity }.map { a + direction * $0.t + normal * $0.offset }
        guard points.count >= max(4, count / 3) else { return nil }
        for _ in 0..<2 {
            let line = Line(through: points)
            let residuals = points.map { line.distance(to: $0) }
            let median = residuals.sorted()[residuals.count / 2]
            let limit = max(0.75, 2.5 * median)
            let kept = zip(points, residuals).filter { $0.1 <= limit }.map(\.0)
            if kept.count == points.count || kept.count < max(4, count / 3) { break }
            points = kept
        }
        return Line(through: points)
    }
}
