/// An axis-aligned rectangle in pixels (or normalized units), origin at the top left.
public struct Rect: Sendable, Equatable, Hashable, Codable {
    public var minX, minY, maxX, maxY: Double

    public init(minX: Double, minY: Double, maxX: Double, maxY: Double) {
        self.minX = minX
        self.minY = minY
        self.maxX = maxX
        self.maxY = maxY
    }

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.init(minX: x, minY: y, maxX: x + width, maxY: y + height)
    }

    public var width: Double { maxX - minX }
    public var height: Double { maxY - minY }
    public var area: Double { max(0, width) * max(0, height) }
    public var center: Point { Point(x: (minX + maxX) / 2, y: (minY + maxY) / 2) }

    public func contains(_ point: Point) -> Bool { minX <= point.x && point.x <= maxX && minY <= point.y && point.y <= maxY }

    /// This rectangle limited to `bounds`.
    public func clamped(to bounds: Rect) -> Rect {
        Rect(minX: min(max(minX, bounds.minX), bounds.maxX), minY: min(max(minY, bounds.minY), bounds.maxY),
             maxX: min(max(maxX, bounds.minX), bounds.maxX), maxY: min(max(maxY, bounds.minY), bounds.maxY))
    }

    /// Intersection over union with `other` (0 when either is empty).
    public func iou(_ other: Rect) -> Double {
        let w = min(maxX, other.maxX) - max(minX, other.minX), h = min(maxY, other.maxY) - max(minY, other.minY)
        guard w > 0, h > 0 else { return 0 }
        let intersection = w * h
        return intersection / (area + other.area - intersection)
    }
}

/// A point in pixels (or normalized units), origin at the top left, y down.
public struct Point: Sendable, Equatable, Hashable, Codable {
    public var x, y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public static func + (a: Point, b: Point) -> Point { Point(x: a.x + b.x, y: a.y + b.y) }
    public static func - (a: Point, b: Point) -> Point { Point(x: a.x - b.x, y: a.y - b.y) }
    public static func * (a: Point, s: Double) -> Point { Point(x: a.x * s, y: a.y * s) }

    /// Euclidean distance to `other`.
    public func distance(to other: Point) -> Double { ((x - other.x) * (x - other.x) + (y - other.y) * (y - other.y)).squareRoot() }
}

/// A 2-D affine map `p' = (a*x + b*y + tx, c*x + d*y + ty)`; every geometric step of image
/// preparation is one, so boxes map exactly between the source picture, the model input and a view.
public struct AffineMap: Sendable, Equatable {
    public var a, b, c, d, tx, ty: Double

    public init(a: Double, b: Double, c: Double, d: Double, tx: Double, ty: Double) {
        (self.a, self.b, self.c, self.d, self.tx, self.ty) = (a, b, c, d, tx, ty)
    }

    public static let identity = AffineMap(a: 1, b: 0, c: 0, d: 1, tx: 0, ty: 0)

    /// Scales x by `sx` and y by `sy`, then translates.
    public static func scale(_ sx: Double, _ sy: Double, translate tx: Double = 0, _ ty: Double = 0) -> AffineMap {
        AffineMap(a: sx, b: 0, c: 0, d: sy, tx: tx, ty: ty)
    }

    public func apply(x: Double, y: Double) -> (x: Double, y: Double) {
        (a * x + b * y + tx, c * x + d * y + ty)
    }

    public func apply(_ point: Point) -> Point {
        Point(x: a * point.x + b * point.y + tx, y: c * point.x + d * point.y + ty)
    }

    /// `other` applied after `self`.
    public func then(_ other: AffineMap) -> AffineMap {
        AffineMap(
            a: other.a * a + other.b * c, b: other.a * b + other.b * d,
            c: other.c * a + other.d * c, d: other.c * b + other.d * d,
            tx: other.a * tx + other.b * ty + other.tx, ty: other.c * tx + other.d * ty + other.ty)
    }

    /// The inverse map (the maps used here are never singular).
    public var inverted: AffineMap {
        let det = a * d - b * c
        let ia = d / det, ib = -b / det, ic = -c / det, id = a / det
        return AffineMap(a: ia, b: ib, c: ic, d: id, tx: -(ia * tx + ib * ty), ty: -(ic * tx + id * ty))
    }

    /// The smallest rectangle containing the image of `rect` (exact for the axis-aligned maps used here).
    public func apply(_ rect: Rect) -> Rect {
        let corners = [apply(x: rect.minX, y: rect.minY), apply(x: rect.maxX, y: rect.minY),
                       apply(x: rect.minX, y: rect.maxY), apply(x: rect.maxX, y: rect.maxY)]
        return Rect(minX: corners.map(\.x).min()!, minY: corners.map(\.y).min()!,
                    maxX: corners.map(\.x).max()!, maxY: corners.map(\.y).max()!)
    }
}

/// How a picture's stored pixels relate to its upright display, as EXIF orientation values 1-8.
public enum Orientation: Int, Sendable, CaseIterable, Codable {
    case up = 1, upMirrored = 2, down = 3, downMirrored = 4
    case leftMirrored = 5, right = 6, rightMirrored = 7, left = 8

    /// The orientation after rotating stored pixels clockwise by `degrees` (0, 90, 180, 270) and
    /// optionally mirroring horizontally afterwards.
    public init(rotation degrees: Int, mirrored: Bool = false) {
        switch ((degrees % 360 + 360) % 360, mirrored) {
        case (90, false): self = .right
        case (180, false): self = .down
        case (270, false): self = .left
        case (0, true): self = .upMirrored
        case (90, true): self = .leftMirrored
        case (180, true): self = .downMirrored
        case (270, true): self = .rightMirrored
        default: self = .up
        }
    }

    /// Clockwise rotation applied to the stored pixels to display them, before the mirror
    /// (EXIF 5 is the transpose: 90 then mirror; EXIF 7 the transverse: 270 then mirror).
    var rotation: Int {
        switch self {
        case .up, .upMirrored: return 0
        case .right, .leftMirrored: return 90
        case .down, .downMirrored: return 180
        case .left, .rightMirrored: return 270
        }
    }

    var mirrored: Bool { [.upMirrored, .downMirrored, .leftMirrored, .rightMirrored].contains(self) }

    /// Size of the upright picture for stored pixels of `size`.
    public func uprightSize(_ size: Size) -> Size {
        rotation % 180 == 0 ? size : Size(width: size.height, height: size.width)
    }

    /// Maps stored-pixel coordinates (continuous, edges at 0 and width) to upright coordinates.
    public func map(from size: Size) -> AffineMap {
        let w = Double(size.width), h = Double(size.height)
        var map: AffineMap
        switch rotation {
        case 90: map = AffineMap(a: 0, b: -1, c: 1, d: 0, tx: h, ty: 0)
        case 180: map = AffineMap(a: -1, b: 0, c: 0, d: -1, tx: w, ty: h)
        case 270: map = AffineMap(a: 0, b: 1, c: -1, d: 0, tx: 0, ty: w)
        default: map = .identity
        }
        if mirrored {
            map = map.then(AffineMap(a: -1, b: 0, c: 0, d: 1, tx: Double(uprightSize(size).width), ty: 0))
        }
        return map
    }
}

/// How a picture is fitted into a view, as camera apps draw boxes over a preview.
public enum ContentMode: String, Sendable, Codable {
    /// The whole picture is visible; bars fill the rest (aspect fit).
    case fit
    /// The picture covers the view; the overflow is cut off (aspect fill).
    case fill
    /// The picture is stretched to the view.
    case stretch
}

/// Maps picture coordinates into a view rectangle (scale plus offset).
public func viewMap(from picture: Size, to view: Rect, mode: ContentMode) -> AffineMap {
    let sx = view.width / Double(picture.width), sy = view.height / Double(picture.height)
    switch mode {
    case .stretch:
        return .scale(sx, sy, translate: view.minX, view.minY)
    case .fit, .fill:
        let s = mode == .fit ? min(sx, sy) : max(sx, sy)
        let dx = (view.width - s * Double(picture.width)) / 2, dy = (view.height - s * Double(picture.height)) / 2
        return .scale(s, s, translate: view.minX + dx, view.minY + dy)
    }
}
