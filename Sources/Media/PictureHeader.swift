/// The size a picture file declares in its header, read without decoding anything, so a picture
/// that would take gigabytes to decode (a 35-byte GIF announcing 16000x16000 pixels, a PNG of
/// compressed zeros, a truncated JPEG) is refused before any memory is spent on it.
///
/// Every read is bounds-checked: a truncated or hostile header gives nil or a smaller size, never
/// a trap. Formats: JPEG (the first frame header), PNG (IHDR), GIF (the logical screen and the
/// frames within the first bytes), BMP (core and info headers), TIFF (every image of the chain, up
/// to 64), WebP (VP8, VP8L and VP8X). For PNM the header's text fields.
public struct PictureHeader: Sendable, Equatable {
    /// `jpeg`, `png`, `gif`, `bmp`, `tiff`, `webp`, `pnm`.
    public var format: String
    /// The largest width and height of any image the file declares (for GIF: the screen and its
    /// frames; for TIFF: every page), which is what a decoder may allocate.
    public var width: Int
    public var height: Int

    public var pixels: Int { width * height }

    /// Reads the header of `bytes`; nil when the format is not one of those above, or its header is
    /// too damaged to name a size (the decoder then refuses the file itself).
    public static func read(_ bytes: some RandomAccessCollection<UInt8>) -> PictureHeader? {
        let data = ByteView(bytes: Array(bytes.prefix(Self.scannedBytes)))
        if data.starts([0xFF, 0xD8, 0xFF]) { return jpeg(data) }
        if data.starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return png(data) }
        if data.starts(Array("GIF8".utf8)) { return gif(data) }
        if data.starts(Array("RIFF".utf8)) && data.starts(Array("WEBP".utf8), at: 8) { return webp(data) }
        if data.starts([0x49, 0x49, 0x2A, 0x00]) { return tiff(data, bigEndian: false) }
        if data.starts([0x4D, 0x4D, 0x00, 0x2A]) { return tiff(data, bigEndian: true) }
        if data.starts(Array("BM".utf8)) { return bmp(data) }
        if data.count >= 2, data[0] == UInt8(ascii: "P"), (UInt8(ascii: "1")...UInt8(ascii: "7")).contains(data[1]) { return pnm(data) }
        return nil
    }

    /// Bytes of a file the header readers look at: all of any header, and the frames of a GIF or
    /// the pages of a TIFF that start within it.
    public static let scannedBytes = 16 << 20

    // MARK: Formats

    static func jpeg(_ data: ByteView) -> PictureHeader? {
        var at = 2
        while at + 4 <= data.count {
            guard data[at] == 0xFF else { return nil }
            let marker = data[at + 1]
            if marker == 0xFF { at += 1; continue }                       // fill byte
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { at += 2; continue }
            if marker == 0xD9 || marker == 0xDA { return nil }              // end, or scan data before a frame header
            guard let length = data.u16(at + 2, bigEndian: true), length >= 2 else { return nil }
            // SOF0-3, 5-7, 9-11, 13-15: precision, height, width.
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                guard let height = data.u16(at + 5, bigEndian: true), let width = data.u16(at + 7, bigEndian: true) else { return nil }
                return PictureHeader(format: "jpeg", width: width, height: height)
            }
            at += 2 + length
        }
        return nil
    }

    static func png(_ data: ByteView) -> PictureHeader? {
        guard data.starts(Array("IHDR".utf8), at: 12), let width = data.u32(16, bigEndian: true),
              let height = data.u32(20, bigEndian: true) else { return nil }
        return PictureHeader(format: "png", width: width, height: height)
    }

    static func gif(_ data: ByteView) -> PictureHeader? {
        guard var width = data.u16(6, bigEndian: false), var height = data.u16(8, bigEndian: false) else { return nil }
        var at = 13
        if data[safe: 10].map({ $0 & 0x80 != 0 }) == true { at += 3 << (Int(data[10] & 0x07) + 1) }
        // Frames may reach past the logical screen; decoders size their canvas for both.
        var frames = 0
        while at < data.count, frames < 4096 {
            switch data[at] {
            case 0x2C:
                guard let left = data.u16(at + 1, bigEndian: false), let top = data.u16(at + 3, bigEndian: false),
                      let w = data.u16(at + 5, bigEndian: false), let h = data.u16(at + 7, bigEndian: false),
                      let flags = data[safe: at + 9] else { return PictureHeader(format: "gif", width: width, height: height) }
                width = max(width, left + w)
                height = max(height, top + h)
                frames += 1
                at += 10 + (flags & 0x80 != 0 ? 3 << (Int(flags & 0x07) + 1) : 0) + 1    // descriptor, colour table, LZW size
                at = data.skipSubBlocks(at)
            case 0x21:
                at = data.skipSubBlocks(at + 2)
            default:
                return PictureHeader(format: "gif", width: width, height: height)
            }
        }
        return PictureHeader(format: "gif", width: width, height: height)
    }

    static func bmp(_ data: ByteView) -> PictureHeader? {
        guard let headerSize = data.u32(14, bigEndian: false) else { return nil }
        if headerSize == 12 {
            guard let width = data.u16(18, bigEndian: false), let height = data.u16(20, bigEndian: false) else { return nil }
            return PictureHeader(format: "bmp", width: width, height: height)
        }
        guard let width = data.i32(18), let height = data.i32(22) else { return nil }
        // A negative height is a top-down picture.
        return PictureHeader(format: "bmp", width: Int(width.magnitude), height: Int(height.magnitude))
    }

    static func tiff(_ data: ByteView, bigEndian: Bool) -> PictureHeader? {
        guard var offset = data.u32(4, bigEndian: bigEndian) else { return nil }
        var width = 0, height = 0, pages = 0
        var seen = Set<Int>()
        while offset != 0, pages < 64, seen.insert(offset).inserted {
            guard let entries = data.u16(offset, bigEndian: bigEndian) else { break }
            for entry in 0..<min(entries, 4096) {
                let at = offset + 2 + 12 * entry
                guard let tag = data.u16(at, bigEndian: bigEndian), let type = data.u16(at + 2, bigEndian: bigEndian) else { break }
                guard tag == 256 || tag == 257 else { continue }
                // SHORT (3) or LONG (4), stored in the entry itself.
                let value = type == 3 ? data.u16(at + 8, bigEndian: bigEndian) : type == 4 ? data.u32(at + 8, bigEndian: bigEndian) : nil
                if tag == 256 { width = max(width, value ?? 0) } else { height = max(height, value ?? 0) }
            }
            pages += 1
            offset = data.u32(offset + 2 + 12 * entries, bigEndian: bigEndian) ?? 0
        }
        return pages == 0 ? nil : PictureHeader(format: "tiff", width: width, height: height)
    }

    static func webp(_ data: ByteView) -> PictureHeader? {
        var at = 12
        var width = 0, height = 0
        while at + 8 <= data.count {
            guard let size = data.u32(at + 4, bigEndian: false) else { break }
            let body = at + 8
            if data.starts(Array("VP8X".utf8), at: at), let w = data.u24(body + 4), let h = data.u24(body + 7) {
                width = max(width, w + 1)
                height = max(height, h + 1)
            } else if data.starts(Array("VP8 ".utf8), at: at), let w = data.u16(body + 6, bigEndian: false), let h = data.u16(body + 8, bigEndian: false) {
                width = max(width, w & 0x3FFF)
                height = max(height, h & 0x3FFF)
            } else if data.starts(Array("VP8L".utf8), at: at), data[safe: body] == 0x2F, let bits = data.u32(body + 1, bigEndian: false) {
                width = max(width, (bits & 0x3FFF) + 1)
                height = max(height, ((bits >> 14) & 0x3FFF) + 1)
            }
            at = body + size + (size & 1)
        }
        return width == 0 && height == 0 ? nil : PictureHeader(format: "webp", width: width, height: height)
    }

    static func pnm(_ data: ByteView) -> PictureHeader? {
        // "P6 <width> <height> ..." with comments after '#'; PAM (P7) names WIDTH and HEIGHT.
        let text = String(decoding: data.bytes.prefix(512), as: UTF8.self)
        let lines = text.split(separator: "\n").map { $0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }
        let words = lines.joined(separator: " ").split { $0 == " " || $0 == "\t" || $0 == "\r" }
        if data[1] == UInt8(ascii: "7") {
            guard let w = words.firstIndex(of: "WIDTH"), let h = words.firstIndex(of: "HEIGHT"), w + 1 < words.count, h + 1 < words.count,
                  let width = Int(words[w + 1]), let height = Int(words[h + 1]) else { return nil }
            return PictureHeader(format: "pnm", width: width, height: height)
        }
        guard words.count >= 3, let width = Int(words[1]), let height = Int(words[2]) else { return nil }
        return PictureHeader(format: "pnm", width: width, height: height)
    }
}

/// Bounds-checked little- and big-endian reads over a file's first bytes.
struct ByteView {
    let bytes: [UInt8]
    var count: Int { bytes.count }

    subscript(index: Int) -> UInt8 { bytes[index] }
    subscript(safe index: Int) -> UInt8? { index >= 0 && index < bytes.count ? bytes[index] : nil }

    func starts(_ signature: [UInt8], at offset: Int = 0) -> Bool {
        offset >= 0 && offset + signature.count <= bytes.count && bytes[offset..<(offset + signature.count)].elementsEqual(signature)
    }

    private func value(_ offset: Int, _ width: Int, bigEndian: Bool) -> Int? {
        guard offset >= 0, offset <= bytes.count - width else { return nil }
        var result = 0
        for i in 0..<width {
            let byte = Int(bytes[offset + (bigEndian ? i : width - 1 - i)])
            result = result << 8 | byte
        }
        return result
    }

    func u16(_ offset: Int, bigEndian: Bool) -> Int? { value(offset, 2, bigEndian: bigEndian) }
    func u24(_ offset: Int) -> Int? { value(offset, 3, bigEndian: false) }
    func u32(_ offset: Int, bigEndian: Bool) -> Int? { value(offset, 4, bigEndian: bigEndian) }
    func i32(_ offset: Int) -> Int32? { value(offset, 4, bigEndian: false).map { Int32(truncatingIfNeeded: $0) } }

    /// The position after a GIF chain of sub-blocks starting at `offset` (each a length byte and
    /// its data, ended by a zero length).
    func skipSubBlocks(_ offset: Int) -> Int {
        var at = offset
        while let length = self[safe: at], length != 0 { at += 1 + Int(length) }
        return at + 1
    }
}
