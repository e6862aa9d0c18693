/// An RGB colour.
public struct Color: Sendable, Equatable, Hashable, Codable {
    public var red, green, blue: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8) {
        (self.red, self.green, self.blue) = (red, green, blue)
    }

    public static let white = Color(red: 255, green: 255, blue: 255)
    public static let black = Color(red: 0, green: 0, blue: 0)

    /// Perceived brightness, 0...255 (BT.601 weights).
    public var luma: Int { (77 * Int(red) + 150 * Int(green) + 29 * Int(blue)) >> 8 }

    /// A distinct, stable colour for a class index: hues spaced by the golden angle.
    public static func forClass(_ index: Int) -> Color {
        let hue = (Double(index) * 0.618_033_988_75).truncatingRemainder(dividingBy: 1) * 6
        let sector = Int(hue), f = hue - Double(sector)
        let (v, s) = (0.95, 0.75)
        let p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f))
        let rgb: (Double, Double, Double)
        switch sector {
        case 0: rgb = (v, t, p)
        case 1: rgb = (q, v, p)
        case 2: rgb = (p, v, t)
        case 3: rgb = (p, q, v)
        case 4: rgb = (t, p, v)
        default: rgb = (v, p, q)
        }
        return Color(red: UInt8(rgb.0 * 255), green: UInt8(rgb.1 * 255), blue: UInt8(rgb.2 * 255))
    }
}

/// An 8-bit coverage mask (for example rendered text); 255 is fully covered.
public struct Mask: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var coverage: [UInt8]

    public init(width: Int, height: Int, coverage: [UInt8]) {
        precondition(coverage.count == width * height, "mask needs width * height bytes")
        (self.width, self.height, self.coverage) = (width, height, coverage)
    }
}

extension Image {
    /// Fills the pixels of `x..<x+width`, `y..<y+height` that lie inside the image; RGB24 only.
    public mutating func fill(x: Int, y: Int, width w: Int, height h: Int, color: Color) {
        precondition(format == .rgb24, "draw on RGB24 images")
        let x0 = max(0, x), y0 = max(0, y), x1 = min(width, x + w), y1 = min(height, y + h)
        guard x0 < x1, y0 < y1 else { return }
        for row in y0..<y1 {
            var d = row * strides[0] + x0 * 3
            for _ in x0..<x1 {
                data[d] = color.red; data[d + 1] = color.green; data[d + 2] = color.blue
                d += 3
            }
        }
    }

    /// Draws the outline of `rect` with a stroke of `lineWidth` pixels lying entirely inside both
    /// the rectangle and the image: the box is rounded to pixels and intersected with the frame
    /// first, so a box at the edge keeps its full stroke.
    public mutating func strokeRect(_ rect: Rect, lineWidth: Int, color: Color) {
        let x0 = max(0, Int(rect.minX.rounded())), y0 = max(0, Int(rect.minY.rounded()))
        let x1 = min(width, Int(rect.maxX.rounded())), y1 = min(height, Int(rect.maxY.rounded()))
        guard x1 > x0, y1 > y0, lineWidth > 0 else { return }
        let t = min(lineWidth, (x1 - x0 + 1) / 2, (y1 - y0 + 1) / 2)
        fill(x: x0, y: y0, width: x1 - x0, height: t, color: color)
        fill(x: x0, y: y1 - t, width: x1 - x0, height: t, color: color)
        fill(x: x0, y: y0, width: t, height: y1 - y0, color: color)
        fill(x: x1 - t, y: y0, width: t, height: y1 - y0, color: color)
    }

    /// Draws the closed polygon through `points` (continuous coordinates, the image spanning
    /// 0...width) with anti-aliased strokes `lineWidth` pixels wide; RGB24 only.
    public mutating func strokePolygon(_ points: [Point], lineWidth: Double, color: Color) {
        stroke(points, closed: true, lineWidth: lineWidth, color: color)
    }

    /// Draws the open path through `points` like ``strokePolygon(_:lineWidth:color:)``.
    public mutating func strokePolyline(_ points: [Point], lineWidth: Double, color: Color) {
        stroke(points, closed: false, lineWidth: lineWidth, color: color)
    }

    private mutating func stroke(_ points: [Point], closed: Bool, lineWidth: Double, color: Color) {
        precondition(format == .rgb24, "draw on RGB24 images")
        guard points.count >= 2, lineWidth > 0, points.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else { return }
        let half = lineWidth / 2
        for index in closed ? Array(points.indices) : Array(points.indices.dropLast()) {
            let a = points[index], b = points[(index + 1) % points.count]
            let x0 = max(0, Int((min(a.x, b.x) - half - 1).rounded(.down))), x1 = min(width - 1, Int((max(a.x, b.x) + half + 1).rounded(.up)))
            let y0 = max(0, Int((min(a.y, b.y) - half - 1).rounded(.down))), y1 = min(height - 1, Int((max(a.y, b.y) + half + 1).rounded(.up)))
            guard x0 <= x1, y0 <= y1 else { continue }
            let dx = b.x - a.x, dy = b.y - a.y, length2 = max(1e-12, dx * dx + dy * dy)
            for y in y0...y1 {
                for x in x0...x1 {
                    // Distance from the pixel centre to the segment, then coverage of a 1-pixel ramp.
                    let px = Double(x) + 0.5 - a.x, py = Double(y) + 0.5 - a.y
                    let t = min(1, max(0, (px * dx + py * dy) / length2))
                    let ex = px - t * dx, ey = py - t * dy
                    let coverage = min(1, max(0, half + 0.5 - (ex * ex + ey * ey).squareRoot()))
                    guard coverage > 0 else { continue }
                    let alpha = Int((coverage * 255).rounded()), d = y * strides[0] + x * 3
                    data[d] = UInt8((Int(data[d]) * (255 - alpha) + Int(color.red) * alpha + 127) / 255)
                    data[d + 1] = UInt8((Int(data[d + 1]) * (255 - alpha) + Int(color.green) * alpha + 127) / 255)
                    data[d + 2] = UInt8((Int(data[d + 2]) * (255 - alpha) + Int(color.blue) * alpha + 127) / 255)
                }
            }
        }
    }

    /// Blends `color` through `mask` with its top left at (`x`, `y`); clipped to the image.
    public mutating func blend(_ mask: Mask, x: Int, y: Int, color: Color) {
        precondition(format == .rgb24, "draw on RGB24 images")
        for my in 0..<mask.height where (0..<height).contains(y + my) {
            for mx in 0..<mask.width where (0..<width).contains(x + mx) {
                let a = Int(mask.coverage[my * mask.width + mx])
                guard a > 0 else { continue }
                let d = (y + my) * strides[0] + (x + mx) * 3
                data[d] = UInt8((Int(data[d]) * (255 - a) + Int(color.red) * a + 127) / 255)
                data[d + 1] = UInt8((Int(data[d + 1]) * (255 - a) + Int(color.green) * a + 127) / 255)
                data[d + 2] = UInt8((Int(data[d + 2]) * (255 - a) + Int(color.blue) * a + 127) / 255)
            }
        }
    }
}
