/// Layout of an image's pixels in memory.
public enum PixelFormat: String, Sendable, CaseIterable, Codable {
    /// One luma byte per pixel.
    case gray8
    /// Packed 3 bytes per pixel.
    case rgb24, bgr24
    /// Packed 4 bytes per pixel.
    case rgba, bgra, argb
    /// Y plane, then one plane of interleaved V,U (Android camera default) or U,V at half resolution.
    case nv21, nv12
    /// Y plane, then U and V planes at half resolution.
    case i420

    /// Bytes per pixel of packed formats (the luma plane for planar ones).
    public var bytesPerPixel: Int {
        switch self {
        case .gray8, .nv21, .nv12, .i420: return 1
        case .rgb24, .bgr24: return 3
        case .rgba, .bgra, .argb: return 4
        }
    }

    public var isYUV: Bool { self == .nv21 || self == .nv12 || self == .i420 }
}

/// The YUV range and matrix of planar frames (BT.601, as FFmpeg and Android camera frames use).
public enum YUVRange: String, Sendable, Codable {
    /// Y in 16...235, chroma in 16...240 (FFmpeg's `tv` range, most camera and video frames).
    case video
    /// Y and chroma in 0...255 (JPEG/JFIF, FFmpeg's `pc` range).
    case full
}

/// Errors building or converting images.
public enum ImageError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidSize(width: Int, height: Int)
    case bufferTooSmall(format: PixelFormat, needed: Int, actual: Int)
    case invalidStride(format: PixelFormat, plane: Int, stride: Int, minimum: Int)

    public var description: String {
        switch self {
        case .invalidSize(let width, let height): return "invalid image size \(width)x\(height)"
        case .bufferTooSmall(let format, let needed, let actual):
            return "\(format.rawValue) image needs \(needed) bytes, buffer holds \(actual)"
        case .invalidStride(let format, let plane, let stride, let minimum):
            return "\(format.rawValue) plane \(plane) stride \(stride) is below the row size \(minimum)"
        }
    }
}

/// An image in one of the supported pixel formats, with row strides.
///
/// Planes are stored one after another in `data`; `planeOffsets` and `strides` describe them.
/// ```swift
/// let frame = try Image(width: 640, height: 480, format: .nv21, data: cameraBytes)
/// let rgb = frame.converted(to: .rgb24)
/// ```
public struct Image: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public let format: PixelFormat
    /// Range of YUV formats (ignored by others). Default `.video`.
    public var yuvRange: YUVRange
    public var data: [UInt8]
    public let strides: [Int]
    public let planeOffsets: [Int]

    /// Wraps pixel data. Strides default to tightly packed rows.
    ///
    /// - Throws: ``ImageError`` when the size, strides or buffer length do not fit the format.
    public init(width: Int, height: Int, format: PixelFormat, data: [UInt8], strides: [Int]? = nil, yuvRange: YUVRange = .video) throws {
        guard width > 0, height > 0 else { throw ImageError.invalidSize(width: width, height: height) }
        let layout = Self.planeLayout(width: width, height: height, format: format)
        let strides = strides ?? layout.map(\.rowBytes)
        guard strides.count == layout.count else {
            throw ImageError.invalidStride(format: format, plane: layout.count, stride: 0, minimum: 0)
        }
        var offsets: [Int] = []
        var offset = 0, needed = 0
        for (plane, (rowBytes, rows)) in layout.enumerated() {
            guard strides[plane] >= rowBytes else {
                throw ImageError.invalidStride(format: format, plane: plane, stride: strides[plane], minimum: rowBytes)
            }
            offsets.append(offset)
            // The last row of a plane need not be padded to the stride.
            needed = offset + strides[plane] * (rows - 1) + rowBytes
            offset += strides[plane] * rows
        }
        guard data.count >= needed else { throw ImageError.bufferTooSmall(format: format, needed: needed, actual: data.count) }
        self.width = width
        self.height = height
        self.format = format
        self.data = data
        self.strides = strides
        self.planeOffsets = offsets
        self.yuvRange = yuvRange
    }

    /// A tightly packed image filled with zero bytes.
    public init(width: Int, height: Int, format: PixelFormat) {
        let layout = Self.planeLayout(width: width, height: height, format: format)
        // The size is valid by construction of the layout, so this cannot throw.
        try! self.init(width: width, height: height, format: format,
                       data: [UInt8](repeating: 0, count: layout.reduce(0) { $0 + $1.rowBytes * $1.rows }))
    }

    /// Row bytes and row counts of each plane.
    static func planeLayout(width: Int, height: Int, format: PixelFormat) -> [(rowBytes: Int, rows: Int)] {
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        switch format {
        case .nv12, .nv21: return [(width, height), (2 * cw, ch)]
        case .i420: return [(width, height), (cw, ch), (cw, ch)]
        default: return [(width * format.bytesPerPixel, height)]
        }
    }

    /// Width and height as a size.
    public var size: Size { Size(width: width, height: height) }
}

/// A size in pixels.
public struct Size: Sendable, Equatable, Hashable, Codable {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
}
