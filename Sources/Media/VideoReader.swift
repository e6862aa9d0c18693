internal import CFFmpeg
import Foundation
import Imaging

/// A decoded video frame: upright RGB24 pixels and its time in seconds from the stream's start.
public struct VideoFrame: Sendable {
    public var image: Image
    /// Seconds since the stream's first timestamp (its PTS, not the frame index).
    public var time: Double
    /// Position in decoding order, from 0.
    public var index: Int

    public init(image: Image, time: Double, index: Int) {
        self.image = image
        self.time = time
        self.index = index
    }
}

/// Reads frames from a video file, a network stream (rtsp, http(s), udp/rtp, hls) or a V4L2
/// camera (`/dev/videoN`), applying the stream's display rotation so frames are upright.
///
/// Not thread-safe: use one reader from one thread.
public final class VideoReader {
    /// What is known about the stream before decoding.
    public struct Info: Sendable {
        public var width: Int
        public var height: Int
        /// Average frame rate, when the container states one.
        public var frameRate: Double?
        /// Seconds, for files.
        public var duration: Double?
        /// Frames, when the container states it.
        public var frameCount: Int?
        /// Live sources (cameras, network streams without a duration) deliver frames in real time.
        public var isLive: Bool
        /// How stored frames are turned upright (from the stream's display matrix).
        public var orientation: Orientation
        public var codec: String
        /// The container's metadata tags (title, comment, and Spotter's own `spotter_*` tags).
        public var metadata: [String: String] = [:]
    }

    /// How long the reader waits for a source.
    public struct Options: Sendable {
        /// Seconds to open the input (connect, read the header and probe the streams). Default 15.
        public var openTimeout: Double = 15
        /// Seconds without a packet before a read gives up with ``MediaError/timedOut(path:seconds:while:)``.
        /// Default 10.
        public var readTimeout: Double = 10
        /// Threads FFmpeg's decoder may use. Default 1, so the other cores stay free for detection
        /// and encoding.
        public var decoderThreads: Int = 1
        /// FFmpeg protocols the input, and every URL or file it leads to (HLS segments, redirects),
        /// may open, comma-separated. Default nil: ``VideoReader/protocols(for:)`` of the input
        /// (a network source never reaches `file`, `concat` or `pipe`).
        public var allowedProtocols: String?
        /// FFmpeg demuxers that may read the input, comma-separated. Default nil: any.
        public var allowedFormats: String?
        /// Most pixels a frame may have; larger frames are refused by the decoder. Default 50,000,000.
        public var maxPixels = 50_000_000
        /// Options for FFmpeg's demuxer (`rtsp_transport`: `tcp` or `udp`). Default none; an RTSP
        /// input without `rtsp_transport` uses TCP (as Frigate does: no frames lost to dropped
        /// UDP packets or a firewall).
        public var formatOptions: [String: String] = [:]

        public init(openTimeout: Double = 15, readTimeout: Double = 10, decoderThreads: Int = 1) {
            self.openTimeout = openTimeout
            self.readTimeout = readTimeout
            self.decoderThreads = decoderThreads
        }
    }

    /// The FFmpeg protocols an input may use, by its scheme: network streams get their transport
    /// protocols (never `file`), a local file only `file`; nil for a camera (no protocol) and for a
    /// scheme not listed here (FFmpeg's own default applies).
    public static func protocols(for input: String) -> String? {
        if isDevice(input) { return nil }
        guard let scheme = scheme(of: input) else { return "file" }
        switch scheme {
        case "file": return "file"
        case "rtsp", "rtsps": return "rtsp,rtsps,rtp,srtp,udp,udplite,tcp,tls,http,https"
        case "rtmp", "rtmps": return "rtmp,rtmps,tcp,tls"
        case "http", "https": return "http,https,tcp,tls,crypto,httpproxy"
        case "tcp": return "tcp"
        case "udp": return "udp"
        case "rtp": return "rtp,udp"
        case "srt": return "srt"
        default: return nil
        }
    }

    /// The lowercased scheme of a URL (`rtsp` of `rtsp://cam/live`, `concat` of `concat:a|b`), nil
    /// for a plain path.
    public static func scheme(of input: String) -> String? {
        guard let colon = input.firstIndex(of: ":"), colon != input.startIndex else { return nil }
        let name = input[..<colon]
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }), name.first!.isLetter else { return nil }
        return name.lowercased()
    }

    /// `input` with the password of its URL replaced by `***` (`rtsp://user:***@cam/live`): how
    /// errors, logs, pages and the album name a camera.
    public static func redactingPassword(_ input: String) -> String {
        guard let scheme = input.range(of: "://") else { return input }
        let rest = input[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return input }
        return String(input[..<input.index(after: colon)]) + "***" + String(input[at...])
    }

    /// Whether `input` names a V4L2 camera (`/dev/videoN`).
    public static func isDevice(_ input: String) -> Bool {
        input.hasPrefix("/dev/video") && input.dropFirst("/dev/video".count).allSatisfy(\.isNumber) && input.count > "/dev/video".count
    }

    public let path: String
    public let info: Info
    public let options: Options
    /// Packets the demuxer or decoder rejected as damaged and that were skipped.
    public private(set) var damagedPackets = 0
    private let input: InputContext
    private let interrupt: IOInterrupt
    private let decoder: CodecContext
    private let streamIndex: Int32
    private let timeBase: Double
    private var startPTS: Int64?
    private let packet = Packet()
    private let frame = Frame()
    private var scaler: Scaler?
    private var draining = false
    private var finished = false
    private var nextIndex = 0

    /// Opens `path` (a file, URL or `/dev/videoN`).
    ///
    /// - Parameter cancellation: ends the open, and later reads, from another thread (a stop
    ///   request, SIGINT): the open throws ``MediaError/cancelled(path:)``, a read returns nil.
    /// - Throws: ``MediaError``; ``MediaError/timedOut(path:seconds:while:)`` when the source does
    ///   not answer within `options.openTimeout`.
    public init(path: String, options: Options = Options(), cancellation: ReadCancellation? = nil) throws {
        try FFmpeg.load { .cannotOpen(path: path, reason: $0) }
        self.path = path
        self.options = options
        interrupt = IOInterrupt(cancellation: cancellation)
        if cancellation?.isCancelled == true { throw MediaError.cancelled(path: path) }
        let isDevice = Self.isDevice(path)
        if isDevice, spotter_load_avdevice() != 0 {
            throw MediaError.cannotOpen(path: path, reason: "cameras need libavdevice (apt-get install libavdevice59)")
        }
        // A path that names an existing file is opened as a file, whatever characters it holds (a
        // name with a colon is not a protocol); one that is not a regular file is refused before
        // open(2) could wait on it (a named pipe without a writer blocks until one appears).
        var opened = path
        var protocols = options.allowedProtocols ?? Self.protocols(for: path)
        if !isDevice, Self.scheme(of: path) == nil || FileManager.default.fileExists(atPath: path) {
            if let kind = FileBytes.irregularKind(path) { throw MediaError.notAFile(path: path, kind: kind) }
            opened = "file:" + path
            protocols = options.allowedProtocols ?? "file"
        }
        avformat_network_init()
        do {
            var formatOptions = options.formatOptions
        if ["rtsp", "rtsps"].contains(Self.scheme(of: path) ?? ""), formatOptions["rtsp_transport"] == nil { formatOptions["rtsp_transport"] = "tcp" }
        input = try InputContext(path: opened, displayPath: path, format: isDevice ? "video4linux2" : nil, interrupt: interrupt,
                                     timeout: options.openTimeout, allowedProtocols: protocols, allowedFormats: options.allowedFormats,
                                     formatOptions: formatOptions)
        } catch where interrupt.wasInterrupted {
            throw MediaError.cancelled(path: path)
        }
        interrupt.arm(options.openTimeout)
        let probed = avformat_find_stream_info(input.pointer, nil)
        let probeExpired = interrupt.hasExpired
        interrupt.arm(nil)
        if interrupt.wasInterrupted { throw MediaError.cancelled(path: path) }
        if probed < 0, probeExpired { throw MediaError.timedOut(path: path, seconds: options.openTimeout, while: "reading the stream's header") }
        try FFmpeg.check(probed) { .cannotOpen(path: path, reason: $0) }
        let index = av_find_best_stream(input.pointer, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard index >= 0, let stream = input.pointer.pointee.streams[Int(index)] else { throw MediaError.noVideoStream(path: path) }
        streamIndex = index
        let parameters = stream.pointee.codecpar!
        guard let codec = avcodec_find_decoder(parameters.pointee.codec_id) else {
            throw MediaError.unsupportedCodec(path: path, codec: String(cString: avcodec_get_name(parameters.pointee.codec_id)))
        }
        decoder = CodecContext(codec: codec)
        try FFmpeg.check(avcodec_parameters_to_context(decoder.pointer, parameters)) { .cannotOpen(path: path, reason: $0) }
        decoder.pointer.pointee.thread_count = Int32(max(1, options.decoderThreads))
        decoder.pointer.pointee.max_pixels = Int64(options.maxPixels)
        try FFmpeg.check(avcodec_open2(decoder.pointer, codec, nil)) { .cannotOpen(path: path, reason: $0) }
        timeBase = av_q2d(stream.pointee.time_base)

        var rotation = 0
        if let matrix = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, nil) {
            let degrees = av_display_rotation_get(UnsafeRawPointer(matrix).assumingMemoryBound(to: Int32.self))
            if degrees.isFinite { rotation = Int((-degrees).rounded()) }
        }
        let rate = stream.pointee.avg_frame_rate.den > 0 ? av_q2d(stream.pointee.avg_frame_rate) : nil
        let containerDuration = input.pointer.pointee.duration
        let duration = containerDuration > 0 ? Double(containerDuration) / Double(AV_TIME_BASE) : nil
        let scheme = opened == path ? Self.scheme(of: path) ?? "" : "file"
        let live = isDevice || ["rtsp", "rtsps", "rtmp", "rtmps", "udp", "rtp", "srt", "tcp"].contains(scheme)
            || (duration == nil && scheme.hasPrefix("http"))
        info = Info(
            width: Int(parameters.pointee.width), height: Int(parameters.pointee.height),
            frameRate: rate.flatMap { $0 > 0 && $0 < 1000 ? $0 : nil }, duration: duration,
            frameCount: stream.pointee.nb_frames > 0 ? Int(stream.pointee.nb_frames) : nil,
            isLive: live, orientation: Orientation(rotation: rotation),
            codec: String(cString: avcodec_get_name(parameters.pointee.codec_id)),
            metadata: FFmpeg.dictionary(input.pointer.pointee.metadata))
    }

    /// Makes a blocked or later `nextFrame()` return nil at once (end of input); safe from any
    /// thread (used for SIGINT and SIGTERM).
    public func interruptReading() { interrupt.interrupt() }

    /// Whether reading ended because ``interruptReading()`` was called.
    public var wasInterrupted: Bool { interrupt.wasInterrupted }

    /// Damaged data in a row before the reader gives up.
    private static let maxConsecutiveErrors = 500

    /// Decodes the next frame; nil at the end of the stream (or after ``interruptReading()``).
    ///
    /// Damaged packets are skipped, as FFmpeg's own tools do, and decoding resumes at the next
    /// decodable one (counted in ``damagedPackets``).
    ///
    /// - Throws: ``MediaError/timedOut(path:seconds:while:)`` when a source sends nothing for
    ///   `options.readTimeout`; ``MediaError/decodeFailed(path:reason:)`` when reading fails for good
    ///   (a broken connection, or only damaged data); frames before it have been returned.
    public func nextFrame() throws -> VideoFrame? {
        var errors = 0
        while !finished {
            let received = avcodec_receive_frame(decoder.pointer, frame.pointer)
            if received == 0 { return try deliver() }
            if received == FFmpeg.eof {
                finished = true
                break
            }
            if received != FFmpeg.eagain {
                // A frame the decoder could not rebuild: skip it.
                damagedPackets += 1
                errors += 1
                guard errors < Self.maxConsecutiveErrors else { throw MediaError.decodeFailed(path: path, reason: FFmpeg.message(received)) }
                continue
            }
            if draining { finished = true; break }
            interrupt.arm(options.readTimeout)
            let status = av_read_frame(input.pointer, packet.pointer)
            let readExpired = interrupt.hasExpired
            interrupt.arm(nil)
            if interrupt.wasInterrupted {
                if status >= 0 { av_packet_unref(packet.pointer) }
                finished = true
                break
            }
            if status == FFmpeg.eof {
                draining = true
                avcodec_send_packet(decoder.pointer, nil)
                continue
            }
            if status < 0 {
                if readExpired { throw MediaError.timedOut(path: path, seconds: options.readTimeout, while: "reading") }
                // Damaged container data: the demuxer resynchronises on the next read, up to a point.
                damagedPackets += 1
                errors += 1
                // avio_feof may read again: under the same deadline as a read.
                interrupt.arm(options.readTimeout)
                let ended = input.pointer.pointee.pb != nil && avio_feof(input.pointer.pointee.pb) != 0
                let feofExpired = interrupt.hasExpired
                interrupt.arm(nil)
                if feofExpired { throw MediaError.timedOut(path: path, seconds: options.readTimeout, while: "reading") }
                guard errors < Self.maxConsecutiveErrors, !ended else {
                    throw MediaError.decodeFailed(path: path, reason: FFmpeg.message(status))
                }
                continue
            }
            defer { av_packet_unref(packet.pointer) }
            guard packet.pointer.pointee.stream_index == streamIndex else { continue }
            let sent = avcodec_send_packet(decoder.pointer, packet.pointer)
            if sent < 0 && sent != FFmpeg.eagain {
                damagedPackets += 1
                errors += 1
                guard errors < Self.maxConsecutiveErrors else { throw MediaError.decodeFailed(path: path, reason: FFmpeg.message(sent)) }
            }
        }
        return nil
    }

    private func deliver() throws -> VideoFrame {
        defer { av_frame_unref(frame.pointer) }
        let f = frame.pointer.pointee
        let pts = f.best_effort_timestamp != Int64.min ? f.best_effort_timestamp : f.pts
        var time = Double(nextIndex) / (info.frameRate ?? 25)
        if pts != Int64.min {
            if startPTS == nil { startPTS = pts }
            time = Double(pts - startPTS!) * timeBase
        }
        let format = AVPixelFormat(rawValue: f.format)
        if scaler == nil || scaler!.source != (f.width, f.height, format) {
            // Bicubic, as OpenCV's FFmpeg capture converts to BGR, so frames match the peer's.
            guard let made = Scaler(from: (f.width, f.height, format), to: (f.width, f.height, AV_PIX_FMT_RGB24), flags: SWS_BICUBIC) else {
                throw MediaError.decodeFailed(path: path, reason: "no conversion from \(String(cString: av_get_pix_fmt_name(format))) to RGB24")
            }
            scaler = made
        }
        var image = scaler!.convert(frame)
        if info.orientation != .up { image = image.oriented(info.orientation) }
        nextIndex += 1
        return VideoFrame(image: image, time: time, index: nextIndex - 1)
    }
}
