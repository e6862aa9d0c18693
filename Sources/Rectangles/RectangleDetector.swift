import Foundation
import Imaging

/// A rectangle found in a picture: its four corners as displayed, and how well edges support it.
///
/// Coordinates are continuous: the upright picture spans `0...width` and `0...height`, pixel
/// `(i, j)` is centred at `(i + 0.5, j + 0.5)`, y grows downwards.
public struct RectangleObservation: Sendable, Equatable {
    /// Top-left, top-right, bottom-right, bottom-left in pixels of the upright picture: clockwise
    /// as displayed, starting from the corner nearest the picture's top-left (least `x + y`).
    public var corners: [Point]
    /// Size of the upright picture the corners refer to.
    public var imageSize: Size
    /// Fraction of the outline (0...1) along which the picture has an edge matching the side.
    public var confidence: Double

    public var topLeft: Point { corners[0] }
    public var topRight: Point { corners[1] }
    public var bottomRight: Point { corners[2] }
    public var bottomLeft: Point { corners[3] }

    /// The corners divided by the picture's size (0...1, origin top-left).
    public var normalizedCorners: [Point] {
        corners.map { Point(x: $0.x / Double(imageSize.width), y: $0.y / Double(imageSize.height)) }
    }

    /// The smallest axis-aligned box holding the corners, in pixels.
    public var boundingBox: Rect { RectangleDetector.bounds(corners) }
}

/// Finds rectangular things (pages, cards, screens, signs, boxes) and returns their corners, as
/// Apple Vision's `VNDetectRectanglesRequest` does, with the same options and defaults.
///
/// Method: luma at a working scale (shorter side about 240 pixels; 320 for a second look when
/// nothing or only a weak rectangle is found, see ``Options/retriesAtFinerScale``), smoothing,
/// gradients, thin edges with hysteresis, edge chains split into straight segments, collinear
/// segments merged into lines (so a side broken by an occluder, a shadow or texture stays one
/// line), the lines with the most edge along them kept, quadrilaterals from four of them meeting at
/// corners, each scored by the fraction of its outline that has a matching edge and ranked by that,
/// its contrast, its size and how little edges run on past its corners (weights fitted on a
/// rendered set), lowered when a side has little colour step across it (a wire, not a boundary),
/// each side moved out onto a well-supported parallel edge just outside it (a sign's
/// border, a screen's bezel), or to where a rim's colour ends when that edge is broken, then every
/// side re-fitted at full resolution to sub-pixel edge positions and the corners taken as the
/// refined sides' intersections.
///
/// ```swift
/// let detector = RectangleDetector(options: .init(maximumObservations: 0))
/// for rectangle in detector.detect(in: photo) { print(rectangle.corners, rectangle.confidence) }
/// ```
public struct RectangleDetector: Sendable {
    /// What counts as a rectangle. Measures are taken on the quadrilateral as it appears in the
    /// upright picture (Vision's approach): perspective shortens far sides and skews corners, so a
    /// tilted page needs a wider `quadratureTolerance` or a lower `minimumAspectRatio` than a flat one.
    public struct Options: Sendable, Equatable {
        /// Least shorter/longer ratio, where shorter and longer are the mean lengths of the two
        /// pairs of opposite sides. Default 0.5.
        public var minimumAspectRatio: Double
        /// Greatest shorter/longer ratio (1 admits squares). Default 1.0.
        public var maximumAspectRatio: Double
        /// Greatest deviation from 90 degrees of any corner angle, in degrees (0...45). Default 30.
        public var quadratureTolerance: Double
        /// Least mean length of the shorter pair of opposite sides, as a fraction of the picture's
        /// shorter side. Default 0.2.
        public var minimumSize: Double
        /// Least confidence (fraction of the outline supported by edges). Default 0.0: every
        /// rectangle that passes the detector's own checks (edge support, and a least rank that
        /// small, weakly supported outlines through texture do not reach).
        public var minimumConfidence: Double
        /// Most rectangles returned, strongest first; 0 returns all. Default 1.
        public var maximumObservations: Int
        /// When nothing passes at the working scale (shorter side about 240 pixels), or the
        /// strongest rectangle there has a confidence below 0.8, look once more at about 320 and
        /// keep the answer whose strongest rectangle is the better supported: small or faint
        /// rectangles in texture are found more often (recall 0.848 -> 0.885 and 0.827 -> 0.877 on
        /// two rendered sets, no more false ones), but a picture so searched twice takes four to
        /// six times as long. Default true; per-frame video work (`spotter video`, the server's
        /// live sources) turns it off. Not one of Vision's options.
        public var retriesAtFinerScale: Bool

        public init(minimumAspectRatio: Double = 0.5, maximumAspectRatio: Double = 1.0, quadratureTolerance: Double = 30,
                    minimumSize: Double = 0.2, minimumConfidence: Double = 0.0, maximumObservations: Int = 1,
                    retriesAtFinerScale: Bool = true) {
            self.minimumAspectRatio = minimumAspectRatio
            self.maximumAspectRatio = maximumAspectRatio
            self.quadratureTolerance = quadratureTolerance
            self.minimumSize = minimumSize
            self.minimumConfidence = minimumConfidence
            self.maximumObservations = maximumObservations
            self.retriesAtFinerScale = retriesAtFinerScale
        }
    }

    /// Problems with the options, found before any picture is read.
    public enum OptionsError: Error, Equatable, Sendable, CustomStringConvertible {
        case outOfRange(option: String, value: Double, range: ClosedRange<Double>)
        case emptyAspectRange(minimum: Double, maximum: Double)

        public var description: String {
            switch self {
            case .outOfRange(let option, let value, let range):
                return "\(option) \(value) is outside \(range.lowerBound)...\(range.upperBound)"
            case .emptyAspectRange(let minimum, let maximum):
                return "minimum aspect ratio \(minimum) is above the maximum \(maximum)"
            }
        }
    }

    public let options: Options

    public init(options: Options = Options()) throws {
        func check(_ name: String, _ value: Double, _ range: ClosedRange<Double>) throws {
            guard range.contains(value) else { throw OptionsError.outOfRange(option: name, value: value, range: range) }
        }
        try check("minimum aspect ratio", options.minimumAspectRatio, 0...1)
        try check("maximum aspect ratio", options.maximumAspectRatio, 0...1)
        try check("quadrature tolerance", options.quadratureTolerance, 0...45)
        try check("minimum size", options.minimumSize, 0...1)
        try check("minimum confidence", options.minimumConfidence, 0...1)
        try check("maximum observations", Double(options.maximumObservations), 0...Double(Int32.max))
        guard options.minimumAspectRatio <= options.maximumAspectRatio else {
            throw OptionsError.emptyAspectRange(minimum: options.minimumAspectRatio, maximum: options.maximumAspectRatio)
        }
        self.options = options
    }

    /// Rectangles in `image` (any pixel format), strongest first, with corners in the coordinates
    /// of the picture turned upright by `orientation`.
    public func detect(in image: Image, orientation: Orientation = .up) -> [RectangleObservation] {
        let coarse = Self.factor(image.size, workingSide: 240), fine = Self.factor(image.size, workingSide: 320)
        let found = detect(in: image, orientation: orientation, factor: coarse)
        guard options.retriesAtFinerScale, fine < coarse, (found.first?.confidence ?? 0) < Self.confidentEnough else { return found }
        let closer = detect(in: image, orientation: orientation, factor: fine)
        // The answer whose strongest rectangle is the better supported.
        return (closer.first?.confidence ?? 0) > (found.first?.confidence ?? 0) ? closer : found
    }

    /// Below this confidence, the strongest rectangle at the working scale gets a second look
    /// (``Options/retriesAtFinerScale``): a quarter of the rendered test pictures do.
    static let confidentEnough = 0.8

    /// The downscaling factor that brings the picture's shorter side to about `workingSide` pixels
    /// (at most 257: the downscaling's 16-bit column sums hold that many rows).
    static func factor(_ size: Size, workingSide: Int) -> Int {
        min(Luma.largestFactor, max(1, min(size.width, size.height) / workingSide))
    }

    /// Rectangles found at the working scale of `factor`.
    private func detect(in image: Image, orientation: Orientation, factor: Int) -> [RectangleObservation] {
        let luma = Luma(image)
        let planes = luma.downscaled(by: factor, channels: true)
        let edges = EdgeMap(planes)
        let lines = LineFinder.lines(in: edges, minimumLength: QuadFinder.minimumSide(options, imageSize: image.size, factor: factor))
        let finder = QuadFinder(edges: edges, planes: planes, lines: lines, options: options, factor: factor, imageSize: image.size)
        var quads = finder.candidates()
        quads.sort { $0.rank > $1.rank }

        var kept: [RectangleObservation] = []
        var keptBoxes: [Rect] = []
        let toUpright = orientation.map(from: image.size)
        let upright = orientation.uprightSize(image.size)
        var order = QuadFinder.PenalizedOrder(finder: finder, quads: quads)
        while let candidate = order.next() {
            if options.maximumObservations > 0 && kept.count >= options.maximumObservations { break }
            let quad = finder.widened(finder.outerFrame(of: candidate, among: quads))
            guard quad.confidence >= options.minimumConfidence else { continue }
            let corners = Refiner(luma: luma, factor: factor).refine(quad.corners)
            guard Self.passes(corners, options: options, imageSize: image.size) else { continue }
            let box = Self.bounds(corners)
            if keptBoxes.contains(where: { $0.iou(box) > 0.9 }) { continue }
            keptBoxes.append(box)
            kept.append(RectangleObservation(corners: Self.displayOrder(corners.map { toUpright.apply($0) }),
                                             imageSize: upright, confidence: quad.confidence))
        }
        return kept
    }

    /// The option checks on corners in pixels of a picture of `imageSize`.
    static func passes(_ corners: [Point], options: Options, imageSize: Size) -> Bool {
        let shape = Shape(corners)
        guard shape.isConvex else { return false }
        let shorter = Double(min(imageSize.width, imageSize.height))
        return shape.shorterPair >= options.minimumSize * shorter
            && shape.aspectRatio >= options.minimumAspectRatio - 1e-9 && shape.aspectRatio <= options.maximumAspectRatio + 1e-9
            && shape.worstCornerDeviation <= options.quadratureTolerance
    }

    static func bounds(_ corners: [Point]) -> Rect {
        Rect(minX: corners.map(\.x).min()!, minY: corners.map(\.y).min()!, maxX: corners.map(\.x).max()!, maxY: corners.map(\.y).max()!)
    }

    /// Clockwise as displayed (y down), from the corner with the least `x + y` (ties: the upper one).
    static func displayOrder(_ corners: [Point]) -> [Point] {
        let cx = corners.map(\.x).reduce(0, +) / 4, cy = corners.map(\.y).reduce(0, +) / 4
        let clockwise = corners.sorted { atan2($0.y - cy, $0.x - cx) < atan2($1.y - cy, $1.x - cx) }
        let first = clockwise.indices.min { a, b in
            let ka = clockwise[a].x + clockwise[a].y, kb = clockwise[b].x + clockwise[b].y
            return ka != kb ? ka < kb : clockwise[a].y < clockwise[b].y
        }!
        return Array(clockwise[first...] + clockwise[..<first])
    }
}

/// The measures the options constrain, for a quadrilateral given corner by corner around its outline.
struct Shape {
    let sides: [Double]
    let angles: [Double]
    let isConvex: Bool

    init(_ corners: [Point]) {
        sides = (0..<4).map { corners[$0].distance(to: corners[($0 + 1) % 4]) }
        var crossSigns: [Double] = []
        angles = (0..<4).map { index in
            let u = corners[(index + 3) % 4] - corners[index], v = corners[(index + 1) % 4] - corners[index]
            crossSigns.append(u.x * v.y - u.y * v.x)
            let cosine = (u.x * v.x + u.y * v.y) / max(1e-12, (u.x * u.x + u.y * u.y).squareRoot() * (v.x * v.x + v.y * v.y).squareRoot())
            return acos(min(1, max(-1, cosine))) * 180 / .pi
        }
        isConvex = crossSigns.allSatisfy { $0 > 0 } || crossSigns.allSatisfy { $0 < 0 }
    }

    var shorterPair: Double { min(sides[0] + sides[2], sides[1] + sides[3]) / 2 }
    var longerPair: Double { max(sides[0] + sides[2], sides[1] + sides[3]) / 2 }
    var aspectRatio: Double { longerPair > 0 ? shorterPair / longerPair : 0 }
    var worstCornerDeviation: Double { angles.map { abs($0 - 90) }.max() ?? 90 }
}
