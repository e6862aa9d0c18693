internal import CFreeType
import Imaging

/// A TrueType font rendered by FreeType into coverage masks.
///
/// Not thread-safe: use one font from one thread at a time. The FreeType library and face are
/// freed with the font.
public final class Font {
    /// DejaVu Sans Bold from Debian's fonts-dejavu-core.
    public static let defaultPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"

    public enum Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        case cannotLoad(path: String, code: Int32)
        case cannotSetSize(pixels: Int, code: Int32)

        public var description: String {
            switch self {
            case .cannotLoad(let path, let code):
                return "cannot load font \(path) (FreeType error \(code)); install fonts-dejavu-core or pass another font"
            case .cannotSetSize(let pixels, let code): return "cannot set font size \(pixels) px (FreeType error \(code))"
            }
        }
    }

    private var library: FT_Library?
    private var face: FT_Face?
    /// Pixel height asked for.
    public let pixelSize: Int

    /// Loads the font at `path` at `pixelSize` pixels per em.
    ///
    /// - Throws: ``Font/Error``.
    public init(path: String = Font.defaultPath, pixelSize: Int) throws {
        self.pixelSize = pixelSize
        var library: FT_Library?
        var status = FT_Init_FreeType(&library)
        guard status == 0, let library else { throw Error.cannotLoad(path: path, code: status) }
        self.library = library
        var face: FT_Face?
        status = FT_New_Face(library, path, 0, &face)
        guard status == 0, let face else { throw Error.cannotLoad(path: path, code: status) }
        self.face = face
        status = FT_Set_Pixel_Sizes(face, 0, FT_UInt(pixelSize))
        guard status == 0 else { throw Error.cannotSetSize(pixels: pixelSize, code: status) }
    }

    deinit {
        if let face { FT_Done_Face(face) }
        if let library { FT_Done_FreeType(library) }
    }

    /// Renders one line of text; the mask is as tall as the font's ascent plus descent.
    public func render(_ text: String) -> Mask {
        guard let face else { return Mask(width: 0, height: 0, coverage: []) }
        let ascent = Int(face.pointee.size.pointee.metrics.ascender >> 6)
        let descent = Int(-(face.pointee.size.pointee.metrics.descender >> 6))
        let height = max(1, ascent + descent)
        // First pass: the advance of every glyph; second: draw.
        var glyphs: [(x: Int, top: Int, width: Int, rows: Int, pitch: Int, bits: [UInt8])] = []
        var pen = 0
        for scalar in text.unicodeScalars {
            guard FT_Load_Char(face, FT_ULong(scalar.value), FT_Int32(FT_LOAD_RENDER)) == 0 else { continue }
            let slot = face.pointee.glyph.pointee
            let bitmap = slot.bitmap
            let count = Int(bitmap.rows) * Int(abs(bitmap.pitch))
            let bits = count > 0 && bitmap.buffer != nil ? Array(UnsafeBufferPointer(start: bitmap.buffer, count: count)) : []
            glyphs.append((pen + Int(slot.bitmap_left), ascent - Int(slot.bitmap_top), Int(bitmap.width), Int(bitmap.rows), Int(bitmap.pitch), bits))
            pen += Int(slot.advance.x >> 6)
        }
        let width = max(1, max(pen, glyphs.map { $0.x + $0.width }.max() ?? 0))
        var coverage = [UInt8](repeating: 0, count: width * height)
        for glyph in glyphs {
            for row in 0..<glyph.rows {
                let y = glyph.top + row
                guard (0..<height).contains(y) else { continue }
                for column in 0..<glyph.width {
                    let x = glyph.x + column
                    guard (0..<width).contains(x) else { continue }
                    let value = glyph.bits[row * abs(glyph.pitch) + column]
                    coverage[y * width + x] = max(coverage[y * width + x], value)
                }
            }
        }
        return Mask(width: width, height: height, coverage: coverage)
    }
}
