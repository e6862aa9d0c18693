import Foundation
import Imaging

/// A candidate quadrilateral: corners in full-resolution continuous coordinates, around the outline.
struct Quad {
    var corners: [Point]
    var confidence: Double
    /// Ordering key: confidence, plus the share of the outline with contrast across it (a boundary
    /// has it all along, an outline through texture in patches), with a preference for larger
    /// outlines (the page over the photo printed on it).
    var rank: Double
}

/// Quadrilaterals from four lines meeting at corners, scored by edge support along the outline.
struct QuadFinder {
    let edges: EdgeMap
    let lines: [Line]
    let options: RectangleDetector.Options
    let factor: Int
    let imageSize: Size

    /// At most this many of the best-supported lines take part.
    static let lineLimit = 64
    /// Least fraction of each side, and of the whole outline, that must have a matching edge.
    static let sideSupport = 0.45
    static let outlineSupport = 0.7
    /// Longest run of a side without an edge, as a fraction of the side: an occluder may hide a
    /// third of it; a longer gap is usually a line that runs on to another object.
    static let longestGap = 0.35
    /// Least brightness change across a side (grey levels per working pixel) that supports it;
    /// weaker edges are everywhere in texture and noise.
    static let supportingGradient = 3.0

    /// Where this line meets another: the other line, the position along this one, the point.
    struct Corner {
        let other: Int
        let t: Double
        let point: Point
    }

    /// At most this many corners per line take part (those with the best-supported partners).
    static let cornerLimit = 48

    func candidates() -> [Quad] {
        let used = Array(lines.prefix(Self.lineLimit))
        var corners = [[Corner]](repeating: [], count: used.count)
        let minimumAngle = (90 - options.quadratureTolerance - 8) * .pi / 180
        for i in used.indices {
            for j in (i + 1)..<max(i + 1, used.count) {
                let a = used[i], b = used[j]
                let cosine = abs(a.direction.x * b.direction.x + a.direction.y * b.direction.y)
                guard acos(min(1, cosine)) >= minimumAngle, let p = a.intersection(with: b) else { continue }
                let ta = a.position(of: p), tb = b.position(of: p)
                // Both lines reach the point (allowing for a hidden corner), and at least one of
                // them ends there: the other may run on into collinear clutter.
                guard reaches(a, ta), reaches(b, tb), Self.endsNear(a, ta) || Self.endsNear(b, tb) else { continue }
                corners[i].append(Corner(other: j, t: ta, point: p))
                corners[j].append(Corner(other: i, t: tb, point: p))
            }
        }
        for i in corners.indices where corners[i].count > Self.cornerLimit {
            corners[i] = Array(corners[i].sorted { used[$0.other].support > used[$1.other].support }.prefix(Self.cornerLimit))
        }
        let shortest = 0.4 * minimumSide
        // Quads are keyed by their four lines, sides by their two corners (each the meeting of two
        // lines): many quadrilaterals share a side, whose support is then measured once.
        var seen = Set<Int>()
        var sides: [Int: Support?] = [:]
        func corner(_ i: Int, _ j: Int) -> Int { min(i, j) * Self.lineLimit + max(i, j) }
        func side(_ from: Int, _ to: Int, _ p: Point, _ q: Point) -> Support? {
            let key = from * Self.lineLimit * Self.lineLimit + to
            if let known = sides[key] { return known }
            let measured = support(from: p, to: q)
            sides[key] = measured
            return measured
        }
        var quads: [Quad] = []
        for a in used.indices {
            for ab in corners[a] where ab.other > a {
                let b = ab.other, tb = used[b].position(of: ab.point)
                for ad in corners[a] where ad.other > a && ad.other != b && abs(ad.t - ab.t) >= shortest {
                    let d = ad.other
                    for bc in corners[b] where bc.other > a && bc.other != d && abs(bc.t - tb) >= shortest {
                        let c = bc.other, tc = used[c].position(of: bc.point)
                        for cd in corners[c] where cd.other == d && abs(cd.t - tc) >= shortest {
                            guard cd.point.distance(to: ad.point) >= shortest else { continue }
                            // The same four lines in another cyclic order make another quadrilateral.
                            let key = ((a * Self.lineLimit + min(b, d)) * Self.lineLimit + c) * Self.lineLimit + max(b, d)
                            guard seen.insert(key).inserted else { continue }
                            let points = [ab.point, bc.point, cd.point, ad.point]
                            let ids = [corner(a, b), corner(b, c), corner(c, d), corner(a, d)]
                            if let quad = score(points, support: { side(ids[$0], ids[($0 + 1) % 4], points[$0], points[($0 + 1) % 4]) }) {
                                quads.append(quad)
                            }
                        }
                    }
                }
            }
        }
        return quads
    }

    /// Least side length in working pixels that the options allow.
    var minimumSide: Double { Self.minimumSide(options, imageSize: imageSize, factor: factor) }

    static func minimumSide(_ options: RectangleDetector.Options, imageSize: Size, factor: Int) -> Double {
        max(8, options.minimumSize * Double(min(imageSize.width, imageSize.height)) / Double(factor))
    }

    /// Whether position `t` is on the line or not far beyond either end (a corner hidden by an occluder).
    func reaches(_ line: Line, _ t: Double) -> Bool {
        let beyond = max(2 * line.length, minimumSide) + 4
        return t >= line.start - beyond && t <= line.end + beyond
    }

    /// Whether position `t` is near one of the line's ends rather than well inside it.
    static func endsNear(_ line: Line, _ t: Double) -> Bool {
        let inside = 0.2 * line.length + 2
        return t <= line.start + inside || t >= line.end - inside
    }

    /// What ``support(from:to:)`` measures along one side.
    typealias Support = (found: Double, samples: Double, strong: Double)

    /// Edge support of the outline through `points` (working pixel coordinates), side `k` running
    /// from point `k` to the next as `support(k)` measures it; nil when it fails the options or the
    /// support thresholds.
    func score(_ points: [Point], support: (Int) -> Support?) -> Quad? {
        let scale = Double(factor)
        let full = points.map { Point(x: ($0.x + 0.5) * scale, y: ($0.y + 0.5) * scale) }
        let w = Double(imageSize.width), h = Double(imageSize.height), margin = 2 * scale
        guard full.allSatisfy({ $0.x >= -margin && $0.y >= -margin && $0.x <= w + margin && $0.y <= h + margin }) else { return nil }
        // A little slack on the shape: refinement moves corners, the final check is exact.
        var loose = options
        loose.quadratureTolerance = min(90, options.quadratureTolerance + 5)
        loose.minimumAspectRatio = max(0, options.minimumAspectRatio - 0.05)
        loose.maximumAspectRatio = min(1, options.maximumAspectRatio + 0.05)
        loose.minimumSize = options.minimumSize * 0.9
        guard RectangleDetector.passes(full, options: loose, imageSize: imageSize) else { return nil }
        var hits = 0.0, total = 0.0, contrasted = 0.0
        for side in 0..<4 {
            guard let (found, samples, strong) = support(side) else { return nil }
            hits += found
            total += samples
            contrasted += strong
        }
        let confidence = hits / total
        guard confidence >= Self.outlineSupport else { return nil }
        let area = abs(zip(full, full.dropFirst() + [full[0]]).map { $0.x * $1.y - $1.x * $0.y }.reduce(0, +)) / 2
        return Quad(corners: full, confidence: confidence, rank: confidence + 0.5 * contrasted / total + 1.5 * (area / (w * h)).squareRoot())
    }

    /// How well edges support the side from `a` to `b` (working coordinates): the samples along it
    /// that lie on an edge, the number of samples, and those with contrast across the side
    /// (whether or not on a thin edge); nil (as soon as it is certain) when fewer
    /// than `sideSupport` of them hit or a run without a hit is longer than `longestGap` of them.
    ///
    /// A sample hits when an edge pixel within one pixel across the side has a gradient within
    /// about 25 degrees of the side's normal and at least `supportingGradient` strong. Only runs of
    /// three or more hits count: texture and noise give scattered hits, a boundary gives runs.
    func support(from a: Point, to b: Point) -> Support? {
        let dx = b.x - a.x, dy = b.y - a.y, length = (dx * dx + dy * dy).squareRoot()
        guard length >= 2 else { return nil }
        let nx = -dy / length, ny = dx / length
        let count = Int(length)
        let w = edges.width, h = edges.height
        let needed = Int((Self.sideSupport * Double(count)).rounded(.up)), longest = Int(Self.longestGap * Double(count))
        var found = 0, gap = 0, hits = 0, misses = 0, strong = 0, failed = false
        func endRun() {
            if hits >= 3 { found += hits; gap = max(gap, misses); misses = 0 } else { misses += hits }
            hits = 0
        }
        edges.isEdge.withUnsafeBufferPointer { isEdge in
            edges.gx.withUnsafeBufferPointer { gxs in
                edges.gy.withUnsafeBufferPointer { gys in
                    for step in 0..<count {
                        // Hopeless already: too long without an edge, or too few samples left.
                        if misses > longest || found + hits + (count - step) < needed {
                            failed = true
                            return
                        }
                        let t = (Double(step) + 0.5) / Double(count)
                        let px = a.x + dx * t, py = a.y + dy * t
                        var hit = false, contrast = false
                        // On the side, then one pixel either side of it.
                        for k in 0..<3 {
                            let offset = k == 0 ? 0.0 : k == 1 ? -1.0 : 1.0
                            // Nearest pixel; points off the picture have no edge.
                            let fx = px + nx * offset + 0.5, fy = py + ny * offset + 0.5
                            guard fx >= 0, fy >= 0, fx < Double(w), fy < Double(h) else { continue }
                            let i = Int(fy) * w + Int(fx)
                            let gx = Double(gxs[i]), gy = Double(gys[i])
                            let across = gx * nx + gy * ny
                            if abs(across) >= Self.supportingGradient { contrast = true }
                            guard isEdge[i] != 0 else { continue }
                            if across * across >= 0.81 * (gx * gx + gy * gy) && abs(across) >= Self.supportingGradient {
                                hit = true
                                break
                            }
                        }
                        if contrast { strong += 1 }
                        if hit { hits += 1 } else { endRun(); misses += 1 }
                    }
                }
            }
        }
        if failed { return nil }
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

    func refine(_ corners: [Point]) -> [Point] {
        var sides: [Line] = []
        for index in 0..<4 {
            guard let side = refineSide(from: corners[index], to: corners[(index + 1) % 4]) else { return corners }
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

    /// Edge positions across the side, fitted with a line after dropping outliers (occluders,
    /// shadows crossing the side); nil when too few samples find an edge.
    func refineSide(from a: Point, to b: Point) -> Line? {
        let length = a.distance(to: b)
        guard length >= 4 else { return nil }
        let direction = (b - a) * (1 / length), normal = Point(x: -direction.y, y: direction.x)
        let reach = factor + 2
        let count = min(48, max(8, Int(length / 4)))
        var positions: [(t: Double, offset: Double, polarity: Double)] = []
        for index in 0..<count {
            let t = length * (0.06 + 0.88 * (Double(index) + 0.5) / Double(count))
            let base = a + direction * t
            // Luma profile across the side, averaged over three points along it.
            var profile: [Float] = []
            for o in -(reach + 1)...(reach + 1) {
                let p = base + normal * Double(o)
                profile.append((luma.sample(p.x, p.y) + luma.sample(p.x + direction.x, p.y + direction.y)
                                + luma.sample(p.x - direction.x, p.y - direction.y)) / 3)
            }
            var best = 0, bestValue: Float = 0
            for i in 1..<(profile.count - 1) {
                let g = abs(profile[i + 1] - profile[i - 1])
                if g > bestValue { bestValue = g; best = i }
            }
            guard best > 1, best < profile.count - 2, bestValue >= 4 else { continue }
            let gm = abs(profile[best] - profile[best - 2]), g0 = bestValue, gp = abs(profile[best + 2] - profile[best])
            let denominator = gm - 2 * g0 + gp
            let shift = denominator != 0 ? Double(0.5 * (gm - gp) / denominator) : 0
            let polarity: Double = profile[best + 1] > profile[best - 1] ? 1 : -1
            positions.append((t, Double(best - reach - 1) + max(-0.5, min(0.5, shift)), polarity))
        }
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
