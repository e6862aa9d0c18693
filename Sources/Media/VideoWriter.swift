internal import CFFmpeg
import Foundation
import Imaging

/// Writes H.264 (libx264) video in MP4, yuv420p, playable in browsers.
///
/// Timestamps are given in seconds; the first frame written is at 0, so a clip cut from the middle
/// of a source starts at 0. Not thread-safe: use one writer from one thread.
public final class VideoWriter {
    public struct Options: Sendable {
        /// Nominal frame rate, stored in the file. Default 25.
        public var frameRate: Double = 25
        /// libx264 preset (speed against size). Default `veryfast`.
        public var preset: String = "veryfast"
        /// libx264 constant rate factor, 0 (lossless) to 51. Default 23.
        public var crf: Int = 23
        /// Fragmented MP4 (`frag_keyframe+empty_moov`, a keyframe and a fragment every second, every
        /// packet flushed to the file): readable even if the process is killed mid-write, losing at
        /// most the last second. Otherwise the index is moved to the front (`faststart`) when finishing.
        public var fragmented: Bool = false
        /// Encoder threads. Default 1.
        public var threads: Int = 1
        /// Tags stored in the file's header (kept by the MP4 muxer's `use_metadata_tags`), read back
        /// by ``VideoReader/Info/metadata``. Default none.
        public var metadata: [String: String] = [:]

        public init(frameRate: Double = 25, preset: String = "veryfast", crf: Int = 23, fragmented: Bool = false, threads: Int = 1,
                    metadata: [String: String] = [:]) {
            self.frameRate = frameRate
            self.preset = preset
            self.crf = crf
            self.fragmented = fragmented
            self.threads = threads
            self.metadata = metadata
        }
    }

    public let path: String
    public let width: Int
    public let height: Int
    public private(set) var framesWritten = 0
    private let output: OutputContext
    private let encoder: CodecContext
    private let stream: UnsafeMutablePointer<AVStream>
    private let frame = Frame()
    private let packet = Packet()
    /// Replaced when a frame of another size arrives (a stream that changes resolution).
    private var scaler: Scaler
    private var firstTime: Double?
    private var lastPTS: Int64 = -1
    private var finished = false
    /// Encoder time base: milliseconds, so variable frame rates keep their timing.
    private static let timeBase = AVRational(num: 1, den: 1000)

    /// Creates `path` and writes the header.
    ///
    /// - Throws: ``MediaError``.
    public init(path: String, width: Int, height: Int, options: Options = Options()) throws {
        try FFmpeg.load { .cannotWrite(path: path, reason: $0) }
        self.path = path
        // yuv420p needs even dimensions; an odd last row or column is dropped.
        self.width = width & ~1
        self.height = height & ~1
        guard self.width > 0, self.height > 0 else { throw MediaError.encodeFailed(path: path, reason: "frame size \(width)x\(height)") }
        output = try OutputContext(path: path, format: "mp4")
        guard let codec = avcodec_find_encoder_by_name("libx264") else {
            throw MediaError.encodeFailed(path: path, reason: "this FFmpeg has no libx264 encoder")
        }
        encoder = CodecContext(codec: codec)
        let e = encoder.pointer
        e.pointee.width = Int32(self.width)
        e.pointee.height = Int32(self.height)
        e.pointee.pix_fmt = AV_PIX_FMT_YUV420P
        e.pointee.time_base = Self.timeBase
        e.pointee.framerate = av_d2q(options.frameRate, 100_000)
        e.pointee.gop_size = Int32(max(1, (options.frameRate * (options.fragmented ? 1 : 2)).rounded()))
        e.pointee.thread_count = Int32(max(1, options.threads))
        if output.pointer.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0 {
            e.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER
        }
        var codecOptions: OpaquePointer? = nil
        av_dict_set(&codecOptions, "preset", options.preset, 0)
        av_dict_set(&codecOptions, "crf", String(options.crf), 0)
        defer { av_dict_free(&codecOptions) }
        try FFmpeg.check(avcodec_open2(e, codec, &codecOptions)) { .encodeFailed(path: path, reason: $0) }
        guard let stream = avformat_new_stream(output.pointer, nil) else { throw MediaError.encodeFailed(path: path, reason: "no stream") }
        self.stream = stream
        stream.pointee.time_base = Self.timeBase
        stream.pointee.avg_frame_rate = e.pointee.framerate
        try FFmpeg.check(avcodec_parameters_from_context(stream.pointee.codecpar, e)) { .encodeFailed(path: path, reason: $0) }
        try output.open()
        if options.fragmented { output.pointer.pointee.flags |= AVFMT_FLAG_FLUSH_PACKETS }
        var muxOptions: OpaquePointer? = nil
        for (key, value) in options.metadata { av_dict_set(&output.pointer.pointee.metadata, key, value, 0) }
        let movflags = (options.fragmented ? "+frag_keyframe+empty_moov+default_base_moof" : "+faststart") + (options.metadata.isEmpty ? "" : "+use_metadata_tags")
        av_dict_set(&muxOptions, "movflags", movflags, 0)
        defer { av_dict_free(&muxOptions) }
        try FFmpeg.check(avformat_write_header(output.pointer, &muxOptions)) { .cannotWrite(path: path, reason: $0) }
        avio_flush(output.pointer.pointee.pb)

        frame.pointer.pointee.width = Int32(self.width)
        frame.pointer.pointee.height = Int32(self.height)
        frame.pointer.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        try FFmpeg.check(av_frame_get_buffer(frame.pointer, 0)) { .encodeFailed(path: path, reason: $0) }
        guard let scaler = Scaler(from: (Int32(width), Int32(height), AV_PIX_FMT_RGB24), to: (Int32(self.width), Int32(self.height), AV_PIX_FMT_YUV420P),
                                  flags: SWS_BILINEAR) else {
            throw MediaError.encodeFailed(path: path, reason: "no conversion to yuv420p")
        }
        self.scaler = scaler
    }

    deinit {
        if !finished { try? finish() }
    }

    /// Encodes `image` shown at `time` seconds (source time; the first frame becomes 0). Frames
    /// whose time does not advance get the next millisecond; a picture of another size than the
    /// writer's is scaled to it.
    public func write(_ image: Image, time: Double) throws {
        precondition(!finished, "write after finish")
        let rgb = image.converted(to: .rgb24)
        if scaler.source.width != Int32(rgb.width) || scaler.source.height != Int32(rgb.height) {
            guard let resized = Scaler(from: (Int32(rgb.width), Int32(rgb.height), AV_PIX_FMT_RGB24),
                                       to: (Int32(width), Int32(height), AV_PIX_FMT_YUV420P), flags: SWS_BILINEAR) else {
                throw MediaError.encodeFailed(path: path, reason: "no conversion from \(rgb.width)x\(rgb.height) to \(width)x\(height)")
            }
            scaler = resized
        }
        guard av_frame_make_writable(frame.pointer) >= 0 else { throw MediaError.encodeFailed(path: path, reason: "frame not writable") }
        scaler.convert(rgb, into: frame)
        if firstTime == nil { firstTime = time }
        var pts = Int64(((time - firstTime!) * 1000).rounded())
        if pts <= lastPTS { pts = lastPTS + 1 }
        lastPTS = pts
        frame.pointer.pointee.pts = pts
        try FFmpeg.check(avcodec_send_frame(encoder.pointer, frame.pointer)) { .encodeFailed(path: path, reason: $0) }
        try drain()
        framesWritten += 1
    }

    /// Flushes the encoder and writes the trailer; the file is complete afterwards.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        avcodec_send_frame(encoder.pointer, nil)
        try drain()
        try FFmpeg.check(av_write_trailer(output.pointer)) { .cannotWrite(path: path, reason: $0) }
        try output.close()
    }

    private func drain() throws {
        while true {
            let status = avcodec_receive_packet(encoder.pointer, packet.pointer)
            if status == FFmpeg.eagain || status == FFmpeg.eof { return }
            try FFmpeg.check(status) { .encodeFailed(path: path, reason: $0) }
            av_packet_rescale_ts(packet.pointer, Self.timeBase, stream.pointee.time_base)
            packet.pointer.pointee.stream_index = stream.pointee.index
            try FFmpeg.check(av_interleaved_write_frame(output.pointer, packet.pointer)) { .cannotWrite(path: path, reason: $0) }
        }
    }
}

/// Owns an `AVFormatContext` for writing and its `AVIOContext`.
final class OutputContext {
    let pointer: UnsafeMutablePointer<AVFormatContext>
    let path: String
    private var isOpen = false

    init(path: String, format: String) throws {
        self.path = path
        var context: UnsafeMutablePointer<AVFormatContext>?
        try FFmpeg.check(avformat_alloc_output_context2(&context, nil, format, path)) { .cannotWrite(path: path, reason: $0) }
        guard let context else { throw MediaError.cannotWrite(path: path, reason: "no output context") }
        pointer = context
    }

    func open() throws {
        try FFmpeg.check(avio_open(&pointer.pointee.pb, path, AVIO_FLAG_WRITE)) { .cannotWrite(path: path, reason: $0) }
        isOpen = true
    }

    func close() throws {
        guard isOpen else { return }
        isOpen = false
        try FFmpeg.check(avio_closep(&pointer.pointee.pb)) { .cannotWrite(path: path, reason: $0) }
    }

    deinit {
        if isOpen { avio_closep(&pointer.pointee.pb) }
        avformat_free_context(pointer)
    }
}
