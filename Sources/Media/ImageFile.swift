internal import CFFmpeg
internal import CJPEG
import Foundation
import Imaging

/// Reads and writes still images with FFmpeg's decoders and encoders (JPEG, PNG, BMP, WebP, ...).
public enum ImageFile {
    /// A decoded picture: RGB24 pixels as stored and the EXIF orientation that turns them upright.
    public struct Decoded: Sendable {
        public var stored: Image
        public var orientation: Orientation

        /// The picture as displayed (orientation applied).
        public var upright: Image { stored.oriented(orientation) }
    }

    /// What a picture may cost before it is decoded.
    public struct Limits: Sendable, Equatable {
        /// Most pixels a picture may declare (the largest of its frames or pages). Default
        /// 50,000,000: an 8000x6000 photo passes; a 35-byte GIF announcing 16000x16000 (768 MiB of
        /// RGB) does not. Checked on the file's header before any decoding, and again by the decoder.
        public var maxPixels: Int

        public init(maxPixels: Int = 50_000_000) {
            self.maxPixels = maxPixels
        }
    }

    /// Decodes the first picture of `path` to RGB24, with its EXIF orientation.
    ///
    /// JPEG goes through libjpeg-turbo with OpenCV's `imread` settings (so the pixels equal those
    /// of OpenCV, Pillow, TensorFlow and browsers); other formats (PNG, BMP, WebP, ...) through FFmpeg.
    /// The size the header declares is checked against `limits` first; anything but a regular file
    /// (a named pipe, a socket, a folder) is refused without waiting on it.
    ///
    /// - Throws: ``MediaError``: ``MediaError/tooManyPixels(path:width:height:limit:)`` for a picture
    ///   over the limit, ``MediaError/notAFile(path:kind:)``.
    public static func decode(_ path: String, limits: Limits = Limits()) throws -> Decoded {
        let contents = try FileBytes(path: path)
        if let header = PictureHeader.read(contents.head) {
            try check(header, limits: limits, path: path)
            if header.format == "jpeg" { return try decodeJPEG(try contents.all(), path: path, limits: limits) }
        }
        return try decodeWithFFmpeg(path, limits: limits)
    }

    /// Throws when `header` declares more pixels than `limits` allow.
    static func check(_ header: PictureHeader, limits: Limits, path: String) throws {
        guard header.pixels <= limits.maxPixels else {
            throw MediaError.tooManyPixels(path: path, width: header.width, height: header.height, limit: limits.maxPixels)
        }
    }

    private static func decodeWithFFmpeg(_ path: String, limits: Limits) throws -> Decoded {
        try FFmpeg.load { .decodeFailed(path: path, reason: $0) }
        // Only the file protocol and picture demuxers: a picture never names another file or a URL.
        let input = try InputContext(path: "file:" + path, displayPath: path, allowedProtocols: "file", allowedFormats: pictureDemuxers)
        // Picture demuxers name their stream's codec on opening; probing the stream as well
        // (avformat_find_stream_info) would decode the picture once more (a PNG twice).
        var streamIndex = av_find_best_stream(input.pointer, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        if streamIndex < 0 || input.pointer.pointee.streams[Int(streamIndex)]?.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_NONE {
            try FFmpeg.check(avformat_find_stream_info(input.pointer, nil)) { .decodeFailed(path: path, reason: $0) }
            streamIndex = av_find_best_stream(input.pointer, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        }
        guard streamIndex >= 0, let stream = input.pointer.pointee.streams[Int(streamIndex)] else {
            throw MediaError.noVideoStream(path: path)
        }
        let parameters = stream.pointee.codecpar!
        guard let codec = avcodec_find_decoder(parameters.pointee.codec_id) else {
            throw MediaError.unsupportedCodec(path: path, codec: String(cString: avcodec_get_name(parameters.pointee.codec_id)))
        }
        let decoder = CodecContext(codec: codec)
        try FFmpeg.check(avcodec_parameters_to_context(decoder.pointer, parameters)) { .decodeFailed(path: path, reason: $0) }
        // The decoder refuses frames over the limit too (a size the header reader did not see).
        decoder.pointer.pointee.max_pixels = Int64(limits.maxPixels)
        try FFmpeg.check(avcodec_open2(decoder.pointer, codec, nil)) { .decodeFailed(path: path, reason: $0) }

        let packet = Packet(), frame = Frame()
        var decoded = false
        reading: while !decoded {
            let status = av_read_frame(input.pointer, packet.pointer)
            if status < 0 {
                // End of input: flush the decoder.
                avcodec_send_packet(decoder.pointer, nil)
            } else {
                defer { av_packet_unref(packet.pointer) }
                guard packet.pointer.pointee.stream_index == streamIndex else { continue }
                let sent = avcodec_send_packet(decoder.pointer, packet.pointer)
                if sent < 0 && sent != FFmpeg.eagain { throw MediaError.decodeFailed(path: path, reason: FFmpeg.message(sent)) }
            }
            let received = avcodec_receive_frame(decoder.pointer, frame.pointer)
            if received == 0 {
                decoded = true
            } else if received == FFmpeg.eagain && status >= 0 {
                continue reading
            } else {
                break reading
            }
        }
        guard decoded else { throw MediaError.noFrame(path: path) }
        let image = try rgb(from: frame, path: path)
        var orientation = Orientation.up
        // A video's display rotation (a phone video's first frame), as the video reader applies it.
        if let matrix = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, nil) {
            let degrees = av_display_rotation_get(UnsafeRawPointer(matrix).assumingMemoryBound(to: Int32.self))
            if degrees.isFinite { orientation = Orientation(rotation: Int((-degrees).rounded())) }
        }
        if let entry = av_dict_get(frame.pointer.pointee.metadata, "Orientation", nil, 0),
           let value = Int(String(cString: entry.pointee.value).trimmingCharacters(in: .whitespaces)),
           let parsed = Orientation(rawValue: value) {
            orientation = parsed
        }
        return Decoded(stored: image, orientation: orientation)
    }

    /// The picture format a file's first bytes announce (`jpeg`, `png`, `bmp`, `webp`, `gif`,
    /// `tiff`), nil when they announce none of them.
    public static func sniff(_ bytes: some Collection<UInt8>) -> String? {
        let head = Array(bytes.prefix(12))
        func starts(_ signature: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + signature.count && Array(head[offset..<(offset + signature.count)]) == signature
        }
        if starts([0xFF, 0xD8, 0xFF]) { return "jpeg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "png" }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return "webp" }
        if starts(Array("GIF8".utf8)) { return "gif" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "tiff" }
        if starts(Array("BM".utf8)) { return "bmp" }
        return nil
    }

    /// FFmpeg's demuxers for the picture formats Spotter reads (no playlists, no image sequences).
    static let pictureDemuxers = "png_pipe,bmp_pipe,gif,gif_pipe,webp_pipe,tiff_pipe,ppm_pipe,pgm_pipe,pgmyuv_pipe,pbm_pipe,pam_pipe,jpeg_pipe,"
        // The first frame of a video (`spotter detect clip.mp4`).
        + "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,flv"

    /// The size a picture's header declares, nil when it is not a format Spotter reads.
    public static func header(_ bytes: some RandomAccessCollection<UInt8>) -> PictureHeader? { PictureHeader.read(bytes) }

    /// Decodes a picture held in memory (an upload), as ``decode(_:limits:)`` decodes a file; `name`
    /// is used in errors.
    ///
    /// - Throws: ``MediaError``.
    public static func decode(bytes: [UInt8], name: String, limits: Limits = Limits()) throws -> Decoded {
        guard let format = sniff(bytes) else { throw MediaError.decodeFailed(path: name, reason: "not a JPEG, PNG, BMP, WebP, GIF or TIFF picture") }
        if let header = PictureHeader.read(bytes) { try check(header, limits: limits, path: name) }
        if format == "jpeg" { return try decodeJPEG(bytes, path: name, limits: limits) }
        // FFmpeg reads files: the other formats go through a private temporary file.
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-picture-\(UUID().uuidString).\(format)")
        do { try Data(bytes).write(to: url) } catch { throw MediaError.cannotWrite(path: url.path, reason: error.localizedDescription) }
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            return try decodeWithFFmpeg(url.path, limits: limits)
        } catch let error as MediaError {
            throw MediaError.decodeFailed(path: name, reason: "\(error)".replacingOccurrences(of: url.path, with: name))
        }
    }

    /// Decodes JPEG bytes with libjpeg-turbo; the orientation from the EXIF block, if any.
    static func decodeJPEG(_ bytes: [UInt8], path: String, limits: Limits) throws -> Decoded {
        var decoded = spotter_jpeg_image()
        let status = bytes.withUnsafeBufferPointer { spotter_jpeg_decode($0.baseAddress, $0.count, limits.maxPixels, &decoded) }
        guard status == 0, let pixels = decoded.pixels else {
            let message = withUnsafeBytes(of: decoded.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw MediaError.decodeFailed(path: path, reason: message)
        }
        defer { spotter_jpeg_free(&decoded) }
        let width = Int(decoded.width), height = Int(decoded.height)
        let image = try Image(width: width, height: height, format: .rgb24,
                              data: [UInt8](UnsafeBufferPointer(start: pixels, count: width * height * 3)))
        return Decoded(stored: image, orientation: EXIF.orientation(inJPEG: bytes) ?? .up)
    }

    /// Converts a decoded frame to RGB24 with swscale.
    static func rgb(from frame: Frame, path: String) throws -> Image {
        let f = frame.pointer.pointee
        guard f.width > 0, f.height > 0, let format = AVPixelFormat(rawValue: f.format) as AVPixelFormat? else {
            throw MediaError.noFrame(path: path)
        }
        guard let scaler = Scaler(from: (f.width, f.height, format), to: (f.width, f.height, AV_PIX_FMT_RGB24)) else {
            throw MediaError.decodeFailed(path: path, reason: "no conversion from \(String(cString: av_get_pix_fmt_name(format))) to RGB24")
        }
        return scaler.convert(frame)
    }

    /// Image file formats Spotter writes.
    public enum Format: Sendable, Equatable {
        /// JPEG at `quality` 1...100 (default 90).
        case jpeg(quality: Int)
        case png

        /// The format named by a path's extension (`.png`, else JPEG).
        public init(path: String) {
            self = path.lowercased().hasSuffix(".png") ? .png : .jpeg(quality: 90)
        }
    }

    /// Encodes `image` and writes it to `path`, replacing the file atomically.
    ///
    /// - Throws: ``MediaError``.
    public static func write(_ image: Image, to path: String, format: Format? = nil) throws {
        let bytes = try encode(image, format: format ?? Format(path: path), path: path)
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw MediaError.cannotWrite(path: path, reason: error.localizedDescription)
        }
    }

    /// Encodes `image` in `format`, returning the file's bytes.
    public static func encode(_ image: Image, format: Format, path: String = "image") throws -> [UInt8] {
        try FFmpeg.load { .encodeFailed(path: path, reason: $0) }
        let codecID: AVCodecID, pixelFormat: AVPixelFormat
        switch format {
        case .jpeg: (codecID, pixelFormat) = (AV_CODEC_ID_MJPEG, AV_PIX_FMT_YUVJ420P)
        case .png: (codecID, pixelFormat) = (AV_CODEC_ID_PNG, AV_PIX_FMT_RGB24)
        }
        guard let codec = avcodec_find_encoder(codecID) else {
            throw MediaError.encodeFailed(path: path, reason: "FFmpeg has no \(format) encoder")
        }
        let encoder = CodecContext(codec: codec)
        encoder.pointer.pointee.width = Int32(image.width)
        encoder.pointer.pointee.height = Int32(image.height)
        encoder.pointer.pointee.pix_fmt = pixelFormat
        encoder.pointer.pointee.time_base = AVRational(num: 1, den: 25)
        if case .jpeg(let quality) = format {
            encoder.pointer.pointee.flags |= Int32(AV_CODEC_FLAG_QSCALE)
            // FFmpeg's MJPEG scale runs from 2 (best) to 31; map quality 100...1 onto it.
            let q = 2 + (100 - min(max(quality, 1), 100)) * 29 / 99
            encoder.pointer.pointee.global_quality = Int32(q) * FF_QP2LAMBDA
        }
        try FFmpeg.check(avcodec_open2(encoder.pointer, codec, nil)) { .encodeFailed(path: path, reason: $0) }

        let frame = Frame()
        frame.pointer.pointee.width = Int32(image.width)
        frame.pointer.pointee.height = Int32(image.height)
        frame.pointer.pointee.format = pixelFormat.rawValue
        try FFmpeg.check(av_frame_get_buffer(frame.pointer, 0)) { .encodeFailed(path: path, reason: $0) }
        if case .jpeg = format { frame.pointer.pointee.quality = encoder.pointer.pointee.global_quality }
        let source = image.converted(to: .rgb24)
        guard let scaler = Scaler(from: (Int32(image.width), Int32(image.height), AV_PIX_FMT_RGB24),
                                  to: (Int32(image.width), Int32(image.height), pixelFormat)) else {
            throw MediaError.encodeFailed(path: path, reason: "no conversion to the encoder's pixel format")
        }
        scaler.convert(source, into: frame)
        try FFmpeg.check(avcodec_send_frame(encoder.pointer, frame.pointer)) { .encodeFailed(path: path, reason: $0) }
        try FFmpeg.check(avcodec_send_frame(encoder.pointer, nil)) { .encodeFailed(path: path, reason: $0) }
        var bytes: [UInt8] = []
        let packet = Packet()
        while avcodec_receive_packet(encoder.pointer, packet.pointer) == 0 {
            bytes += UnsafeBufferPointer(start: packet.pointer.pointee.data, count: Int(packet.pointer.pointee.size))
            av_packet_unref(packet.pointer)
        }
        guard !bytes.isEmpty else { throw MediaError.encodeFailed(path: path, reason: "the encoder produced nothing") }
        return bytes
    }
}
