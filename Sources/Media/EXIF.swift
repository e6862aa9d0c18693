import Imaging

/// Reads the orientation tag of a JPEG's EXIF block; every offset is checked against the bytes.
enum EXIF {
    /// The orientation (tag 0x0112 of IFD0) of the first `Exif` APP1 segment before the image data,
    /// nil when there is none or it is malformed.
    static func orientation(inJPEG bytes: [UInt8]) -> Orientation? {
        var position = 2
        while position + 4 <= bytes.count, bytes[position] == 0xFF {
            let marker = bytes[position + 1]
            if marker == 0xFF { position += 1; continue }  // fill byte
            if marker == 0xDA || marker == 0xD9 { return nil }  // image data or end: no EXIF before it
            let length = Int(bytes[position + 2]) << 8 | Int(bytes[position + 3])
            let start = position + 4, end = position + 2 + length
            guard length >= 2, end <= bytes.count else { return nil }
            if marker == 0xE1, end - start >= 6, bytes[start..<(start + 6)].elementsEqual(Array("Exif".utf8) + [0, 0]) {
                return tiffOrientation(bytes[(start + 6)..<end])
            }
            position = end
        }
        return nil
    }

    private static func tiffOrientation(_ tiff: ArraySlice<UInt8>) -> Orientation? {
        let base = tiff.startIndex
        guard tiff.count >= 8 else { return nil }
        let little: Bool
        switch (tiff[base], tiff[base + 1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func read(_ offset: Int, _ size: Int) -> Int? {
            guard offset >= 0, offset + size <= tiff.count else { return nil }
            var value = 0
            for i in 0..<size {
                let byte = Int(tiff[base + offset + (little ? size - 1 - i : i)])
                value = value << 8 | byte
            }
            return value
        }
        guard read(2, 2) == 42, let ifd = read(4, 4), let count = read(ifd, 2) else { return nil }
        for entry in 0..<count {
            let at = ifd + 2 + entry * 12
            guard let tag = read(at, 2) else { return nil }
            if tag == 0x0112 {
                guard read(at + 2, 2) == 3, let value = read(at + 8, 2) else { return nil }
                return Orientation(rawValue: value)
            }
        }
        return nil
    }
}
