import Imaging

extension Image {
    /// Outlines `rectangles` with strokes that scale with the picture; each top-left corner gets a dot.
    public mutating func outline(_ rectangles: [RectangleObservation]) {
        let width = max(2, Double(min(self.width, height)) / 200)
        for (index, rectangle) in rectangles.enumerated() {
            let color = Color.forClass(index + 2)
            strokePolygon(rectangle.corners, lineWidth: width, color: color)
            let dot = rectangle.topLeft
            fill(x: Int(dot.x - 1.5 * width), y: Int(dot.y - 1.5 * width), width: Int(3 * width), height: Int(3 * width), color: color)
        }
    }
}

extension RectangleObservation: Encodable {
    enum CodingKeys: String, CodingKey { case corners, normalized, box, confidence }

    private struct Box: Encodable { let xmin, ymin, xmax, ymax: Double }

    /// `corners` [[x, y] x4] in pixels (3 decimals), `normalized` corners (6 decimals), `box`
    /// {xmin, ymin, xmax, ymax}, `confidence` (3 decimals).
    public func encode(to encoder: any Encoder) throws {
        func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
        func round6(_ value: Double) -> Double { (value * 1_000_000).rounded() / 1_000_000 }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(corners.map { [round3($0.x), round3($0.y)] }, forKey: .corners)
        try container.encode(normalizedCorners.map { [round6($0.x), round6($0.y)] }, forKey: .normalized)
        let box = boundingBox
        try container.encode(Box(xmin: round3(box.minX), ymin: round3(box.minY), xmax: round3(box.maxX), ymax: round3(box.maxY)), forKey: .box)
        try container.encode(round3(confidence), forKey: .confidence)
    }
}
