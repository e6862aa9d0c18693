import Imaging
import Typeface

/// Draws detections on pictures: a box per detection in a stable colour per class, a dot per
/// keypoint, and a tag with the label and score placed inside the picture, in black or white for contrast.
///
/// Not thread-safe (it owns a FreeType font).
public final class Annotator {
    /// Stroke width in pixels; default scales with the picture (2 px per 400 px of the shorter side).
    public var lineWidth: Int?
    /// Label text height in pixels; default scales with the picture like the strokes (a thirtieth of
    /// the shorter side, at least 12: 14 px on 432-line video, 36 px on 1080).
    public var fontSize: Int?
    private let fontPath: String
    private var fonts: [Int: Font] = [:]
    /// Rendered tags by size and text; a video repeats the same few labels and scores frame after frame.
    private var tags: [String: Mask] = [:]

    /// - Throws: ``Font/Error`` when the font cannot be loaded.
    public init(fontPath: String = Font.defaultPath, fontSize: Int? = nil) throws {
        self.fontPath = fontPath
        self.fontSize = fontSize
        // Load once now, so a missing font is an error here and not at the first picture.
        fonts[14] = try Font(path: fontPath, pixelSize: 14)
    }

    /// Draws `detections` (boxes in the picture's pixels) onto `image`, converting it to RGB24.
    public func draw(_ detections: [Detection], on image: inout Image) {
        if image.format != .rgb24 { image = image.converted(to: .rgb24) }
        let stroke = lineWidth ?? max(2, min(image.width, image.height) / 200)
        let size = fontSize ?? max(12, (min(image.width, image.height) + 15) / 30)
        for detection in detections.reversed() {
            let color = Color.forClass(detection.classIndex)
            image.strokeRect(detection.box, lineWidth: stroke, color: color)
            for point in detection.keypoints ?? [] {
                // A dot twice the stroke wide, kept inside the picture.
                let side = 2 * stroke
                let x = min(max(0, Int(point.x.rounded()) - stroke), image.width - side), y = min(max(0, Int(point.y.rounded()) - stroke), image.height - side)
                if x >= 0, y >= 0 { image.fill(x: x, y: y, width: side, height: side, color: color) }
            }
            let who = detection.identity.map { ": \($0.name ?? "unknown")" } ?? ""
            // A tracked object: `#12 person 0.81`; otherwise `person 81%`.
            let words = detection.track.map { "#\($0) \(detection.label)\(who) \(Self.twoDecimals(detection.score))" }
                ?? "\(detection.label)\(who) \(Int((detection.score * 100).rounded()))%"
            let text = tag(words, size: size)
            let pad = max(3, size / 5)
            let tagWidth = min(text.width + 2 * pad, image.width), tagHeight = min(text.height + 2 * pad, image.height)
            var x = max(0, Int(detection.box.minX.rounded()))
            x = min(x, image.width - tagWidth)
            // Above the box when there is room, else just inside its top edge.
            var y = Int(detection.box.minY.rounded()) - tagHeight
            if y < 0 { y = max(0, Int(detection.box.minY.rounded())) }
            y = min(y, image.height - tagHeight)
            image.fill(x: x, y: y, width: tagWidth, height: tagHeight, color: color)
            image.blend(text, x: x + pad, y: y + pad, color: color.luma > 140 ? .black : .white)
        }
    }

    /// `0.81`: a score to two decimals.
    static func twoDecimals(_ score: Float) -> String {
        let hundredths = Int((score * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }

    private func tag(_ text: String, size: Int) -> Mask {
        let key = "\(size) \(text)"
        if let mask = tags[key] { return mask }
        if tags.count > 1024 { tags.removeAll() }
        let font: Font
        if let loaded = fonts[size] {
            font = loaded
        } else {
            // The font loaded in init, so another size of it loads too.
            font = (try? Font(path: fontPath, pixelSize: size)) ?? fonts[14]!
            fonts[size] = font
        }
        let mask = font.render(text)
        tags[key] = mask
        return mask
    }
}
