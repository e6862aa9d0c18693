internal import CFFmpeg
import Foundation
import Imaging
import Synchronization

/// Why a media file could not be read or written.
public enum MediaError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotOpen(path: String, reason: String)
    case noVideoStream(path: String)
    case unsupportedCodec(path: String, codec: String)
    case decodeFailed(path: String, reason: String)
    case noFrame(path: String)
    case encodeFailed(path: String, reason: String)
    case cannotWrite(path: String, reason: String)
    case timedOut(path: String, seconds: Double, while: String)
    /// The picture declares more pixels than ``ImageFile/Limits/maxPixels`` allows.
    case tooManyPixels(path: String, width: Int, height: Int, limit: Int)
    /// The path names something that is not a regular file (`kind`: "a named pipe", "a folder").
    case notAFile(path: String, kind: String)
    /// Opening was ended by a ``ReadCancellation`` (a stop request).
    case cancelled(path: String)

    /// The error in words; a password in a URL appears as `***`.
    public var description: String { VideoReader.redactingPassword(unredacted) }

    private var unredacted: String {
        switch self {
        case .cannotOpen(let path, let reason): return "cannot open \(path): \(reason)"
        case .noVideoStream(let path): return "\(path) has no image or video stream"
        case .unsupportedCodec(let path, let codec): return "\(path): no decoder for \(codec)"
        case .decodeFailed(let path, let reason): return "cannot decode \(path): \(reason)"
        case .noFrame(let path): return "\(path) holds no picture (empty or truncated?)"
        case .encodeFailed(let path, let reason): return "cannot encode \(path): \(reason)"
        case .cannotWrite(let path, let reason): return "cannot write \(path): \(reason)"
        case .timedOut(let path, let seconds, let activity):
            return "\(path): no data for \(String(format: "%g", seconds)) s while \(activity) (the source stalled or is unreachable)"
        case .tooManyPixels(let path, let width, let height, let limit):
            let megapixels = { (pixels: Int) in String(format: "%.1f", Double(pixels) / 1e6) }
            return "\(path) declares \(width)x\(height) pixels (\(megapixels(width * height)) megapixels), more than the limit of \(megapixels(limit)) megapixels"
        case .notAFile(let path, let kind):
            return "\(path) is \(kind), not a regular file"
        case .cancelled(let path):
            return "opening \(path) was stopped"
        }
    }
}

/// FFmpeg's status conventions, converted in one place.
enum FFmpeg {
    /// Errors are reported through thrown errors; FFmpeg's own log shows only fatal problems.
    private static let logLevel: Void = av_log_set_level(AV_LOG_FATAL)

    /// Opens FFmpeg's libraries (once) and quiets their log: every media entry point calls this
    /// before any FFmpeg function, so a missing library is an error naming the package to install.
    static func load(_ error: (String) -> MediaError) throws {
        var reason: UnsafePointer<CChar>?
        guard spotter_ffmpeg_load(&reason) == 0 else {
            let loader = reason.map { String(cString: $0) } ?? "unknown reason"
            throw error("FFmpeg's libraries could not be loaded (\(loader)); apt-get install libavformat59 libswscale6")
        }
        _ = logLevel
    }

    static let eagain = spotter_averror_eagain()
    static let eof = spotter_averror_eof()
    static let exit = spotter_averror_exit()

    /// FFmpeg's text for an error code.
    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        av_strerror(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Returns `code` when it is not an error; throws `error(message)` otherwise.
    @discardableResult
    static func check(_ code: Int32, _ error: (String) -> MediaError) throws -> Int32 {
        guard code >= 0 else { throw error(message(code)) }
        return code
    }

    /// The entries of an `AVDictionary`.
    static func dictionary(_ dictionary: OpaquePointer?) -> [String: String] {
        var result: [String: String] = [:]
        var entry: UnsafeMutablePointer<AVDictionaryEntry>? = nil
        while let next = av_dict_get(dictionary, "", entry, AV_DICT_IGNORE_SUFFIX) {
            result[String(cString: next.pointee.key)] = String(cString: next.pointee.value)
            entry = next
        }
        return result
    }

    static func pixelFormat(_ format: PixelFormat) -> AVPixelFormat {
        switch format {
        case .gray8: return AV_PIX_FMT_GRAY8
        case .rgb24: return AV_PIX_FMT_RGB24
        case .bgr24: return AV_PIX_FMT_BGR24
        case .rgba: return AV_PIX_FMT_RGBA
        case .bgra: return AV_PIX_FMT_BGRA
        case .argb: return AV_PIX_FMT_ARGB
        case .nv12: return AV_PIX_FMT_NV12
        case .nv21: return AV_PIX_FMT_NV21
        case .i420: return AV_PIX_FMT_YUV420P
        }
    }
}

/// Owns an `AVFrame`.
final class Frame {
    let pointer: UnsafeMutablePointer<AVFrame>

    init() {
        guard let frame = av_frame_alloc() else { fatalError("av_frame_alloc: out of memory") }
        pointer = frame
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = pointer
        av_frame_free(&frame)
    }
}

/// Owns an `AVPacket`.
final class Packet {
    let pointer: UnsafeMutablePointer<AVPacket>

    init() {
        guard let packet = av_packet_alloc() else { fatalError("av_packet_alloc: out of memory") }
        pointer = packet
    }

    deinit {
        var packet: UnsafeMutablePointer<AVPacket>? = pointer
        av_packet_free(&packet)
    }
}

/// Owns an `AVCodecContext`.
final class CodecContext {
    let pointer: UnsafeMutablePointer<AVCodecContext>

    init(codec: UnsafePointer<AVCodec>?) {
        guard let context = avcodec_alloc_context3(codec) else { fatalError("avcodec_alloc_context3: out of memory") }
        pointer = context
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = pointer
        avcodec_free_context(&context)
    }
}

/// Ends a reader's blocking work from another thread: opening (connecting, reading the stream's
/// header) as well as reading. One cancellation may serve several readers in turn (the
/// connections of one source); once cancelled it stays cancelled.
public final class ReadCancellation: Sendable {
    private let cancelled = Atomic(false)

    public init() {}

    /// Makes every blocking call of the readers that use it return within about 100 ms.
    public func cancel() { cancelled.store(true, ordering: .releasing) }

    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// Lets blocking FFmpeg I/O (connect, read) give up: after a deadline, or when another thread
/// asks (SIGINT). FFmpeg polls `shouldStop` through the format context's interrupt callback about
/// every 100 ms while it waits.
final class IOInterrupt: Sendable {
    /// The reader's thread arms it, any thread interrupts.
    private struct State {
        var deadline: ContinuousClock.Instant?
        var interrupted = false
        var expired = false
    }

    private let state = Mutex(State())
    /// Shared with other readers of the same source.
    private let cancellation: ReadCancellation?

    init(cancellation: ReadCancellation? = nil) {
        self.cancellation = cancellation
    }

    /// Starts a deadline `seconds` from now (nil: none) and clears an earlier expiry.
    func arm(_ seconds: Double?) {
        state.withLock {
            $0.deadline = seconds.map { .now + .milliseconds(Int($0 * 1000)) }
            $0.expired = false
        }
    }

    /// Makes every blocking call return now and from now on.
    func interrupt() {
        state.withLock { $0.interrupted = true }
    }

    var wasInterrupted: Bool { state.withLock { $0.interrupted } || (cancellation?.isCancelled ?? false) }
    var hasExpired: Bool { state.withLock { $0.expired } }

    var shouldStop: Bool {
        let stop = state.withLock { state in
            if let deadline = state.deadline, ContinuousClock.now > deadline { state.expired = true }
            return state.interrupted || state.expired
        }
        return stop || (cancellation?.isCancelled ?? false)
    }

    /// The C callback FFmpeg calls with `Unmanaged.passUnretained(self)` as its argument.
    static let callback: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { opaque in
        guard let opaque else { return 0 }
        return Unmanaged<IOInterrupt>.fromOpaque(opaque).takeUnretainedValue().shouldStop ? 1 : 0
    }
}

/// Owns an `AVFormatContext` opened for reading.
final class InputContext {
    let pointer: UnsafeMutablePointer<AVFormatContext>
    /// Kept alive as long as the context, which calls it.
    let interrupt: IOInterrupt

    /// Opens `path`, with an explicit input format name (`video4linux2`) when given; gives up after
    /// `timeout` seconds without progress, or when `interrupt` is triggered.
    ///
    /// - Parameters:
    ///   - displayPath: how errors name the input (default `path`).
    ///   - allowedProtocols: FFmpeg's `protocol_whitelist`: the only protocols this input, and every
    ///     file or URL it leads to (playlists, redirects, segments), may open. Nil: FFmpeg's default.
    ///   - allowedFormats: FFmpeg's `format_whitelist`: the only demuxers that may read it.
    init(path: String, displayPath: String? = nil, format: String? = nil, interrupt: IOInterrupt = IOInterrupt(), timeout: Double? = nil,
         allowedProtocols: String? = nil, allowedFormats: String? = nil, formatOptions: [String: String] = [:]) throws {
        let shown = displayPath ?? path
        guard let allocated = avformat_alloc_context() else { fatalError("avformat_alloc_context: out of memory") }
        var context: UnsafeMutablePointer<AVFormatContext>? = allocated
        self.interrupt = interrupt
        allocated.pointee.interrupt_callback = AVIOInterruptCB(callback: IOInterrupt.callback, opaque: Unmanaged.passUnretained(interrupt).toOpaque())
        let inputFormat = format.flatMap { av_find_input_format($0) }
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        if let allowedProtocols { av_dict_set(&options, "protocol_whitelist", allowedProtocols, 0) }
        if let allowedFormats { av_dict_set(&options, "format_whitelist", allowedFormats, 0) }
        for (key, value) in formatOptions { av_dict_set(&options, key, value, 0) }
        interrupt.arm(timeout)
        // On failure avformat_open_input frees the context.
        let status = avformat_open_input(&context, path, inputFormat, &options)
        let expired = interrupt.hasExpired
        interrupt.arm(nil)
        if status < 0, expired { throw MediaError.timedOut(path: shown, seconds: timeout ?? 0, while: "connecting") }
        try FFmpeg.check(status) { .cannotOpen(path: shown, reason: $0) }
        guard let context else { throw MediaError.cannotOpen(path: shown, reason: "no context") }
        pointer = context
    }

    deinit {
        var context: UnsafeMutablePointer<AVFormatContext>? = pointer
        avformat_close_input(&context)
    }
}

/// Owns an `SwsContext` converting frames of one size and format to another.
///
/// swscale's SIMD loops read and write whole vectors, past the end of a row and of the last row,
/// and assume row strides aligned to 16 or more bytes; a tightly packed RGB24 row of 600 or 1000
/// pixels is neither. So packed pixels never go to swscale in place: they pass through `staging`,
/// a buffer this scaler owns with aligned strides and padding after the last row.
final class Scaler {
    let pointer: OpaquePointer
    let source: (width: Int32, height: Int32, format: AVPixelFormat)
    let target: (width: Int32, height: Int32, format: AVPixelFormat)
    /// Packed RGB24 rows of `stagingStride` bytes, with `Self.padding` bytes after the last row.
    private var staging: UnsafeMutablePointer<UInt8>
    private let stagingStride: Int
    private let stagingRows: Int
    /// Bytes swscale may touch past a row's end or past the last row (a few AVX-512 vectors).
    static let padding = 256

    init?(from source: (Int32, Int32, AVPixelFormat), to target: (Int32, Int32, AVPixelFormat),
          flags: Int32 = SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT) {
        guard source.0 > 0, source.1 > 0, target.0 > 0, target.1 > 0,
              let context = sws_getContext(source.0, source.1, source.2, target.0, target.1, target.2, flags, nil, nil, nil) else {
            return nil
        }
        pointer = context
        self.source = source
        self.target = target
        // The packed side is whichever of the two is RGB24 (the only packed format Spotter hands over).
        let packed = target.2 == AV_PIX_FMT_RGB24 ? target : source
        stagingStride = (Int(packed.0) * 3 + 63) & ~63
        stagingRows = Int(packed.1)
        let bytes = stagingStride * stagingRows + Self.padding
        guard let memory = av_malloc(bytes) else { fatalError("av_malloc: out of memory") }
        staging = memory.bindMemory(to: UInt8.self, capacity: bytes)
        staging.initialize(repeating: 0, count: bytes)
    }

    deinit {
        sws_freeContext(pointer)
        av_free(staging)
    }

    /// Converts `frame` (this scaler's source size and format, as FFmpeg allocated it) into a packed
    /// RGB24 image of this scaler's target size.
    func convert(_ frame: Frame) -> Image {
        precondition(target.format == AV_PIX_FMT_RGB24 && frame.pointer.pointee.width == source.width
                     && frame.pointer.pointee.height == source.height, "frame does not fit the scaler")
        var planes: [UnsafeMutablePointer<UInt8>?] = [staging, nil, nil, nil]
        var strides: [Int32] = [Int32(stagingStride), 0, 0, 0]
        withUnsafePointer(to: frame.pointer.pointee.data) { data in
            withUnsafePointer(to: frame.pointer.pointee.linesize) { linesize in
                data.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { sources in
                    linesize.withMemoryRebound(to: Int32.self, capacity: 8) { sourceStrides in
                        _ = sws_scale(pointer, sources, sourceStrides, 0, source.height, &planes, &strides)
                    }
                }
            }
        }
        let width = Int(target.width), height = Int(target.height), rowBytes = width * 3
        var image = Image(width: width, height: height, format: .rgb24)
        image.data.withUnsafeMutableBufferPointer { buffer in
            for y in 0..<height {
                (buffer.baseAddress! + y * rowBytes).update(from: staging + y * stagingStride, count: rowBytes)
            }
        }
        return image
    }

    /// Converts `image` (RGB24 of this scaler's source size, any row stride) into `frame`'s planes,
    /// which FFmpeg allocated for this scaler's target size and format.
    func convert(_ image: Image, into frame: Frame) {
        precondition(source.format == AV_PIX_FMT_RGB24 && image.format == .rgb24 && image.width == Int(source.width)
                     && image.height == Int(source.height) && frame.pointer.pointee.width == target.width
                     && frame.pointer.pointee.height == target.height, "image or frame does not fit the scaler")
        let rowBytes = image.width * 3
        image.data.withUnsafeBufferPointer { buffer in
            for y in 0..<image.height {
                (staging + y * stagingStride).update(from: buffer.baseAddress! + y * image.strides[0], count: rowBytes)
            }
        }
        var planes: [UnsafePointer<UInt8>?] = [UnsafePointer(staging), nil, nil, nil]
        var strides: [Int32] = [Int32(stagingStride), 0, 0, 0]
        withUnsafeMutablePointer(to: &frame.pointer.pointee.data) { data in
            withUnsafeMutablePointer(to: &frame.pointer.pointee.linesize) { linesize in
                data.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { targets in
                    linesize.withMemoryRebound(to: Int32.self, capacity: 8) { targetStrides in
                        _ = sws_scale(pointer, &planes, &strides, 0, source.height, targets, targetStrides)
                    }
                }
            }
        }
    }
}
