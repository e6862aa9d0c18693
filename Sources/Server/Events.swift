import Detection
import Foundation
import Hummingbird
import NIOCore
import Pipeline
import ServiceLifecycle
import Synchronization

/// The server's event streams: every event is serialized once and handed to each subscriber, as
/// Server-Sent Events (`GET /api/v1/events`) or as the live view's stream (`GET /api/v1/live`),
/// which carries each detection with the JPEG of its frame. A subscriber that reads too slowly
/// loses its oldest undelivered events and skips to the newest frame; it never slows the sources.
final class EventHub: Sendable {
    /// One event as a subscriber's stream sends it.
    struct Message: Sendable {
        let type: String
        let source: String?
        /// The event's JSON object.
        let json: Data
        /// The frame a live-stream message shows, nil for every other message.
        let frame: Int?
        /// The bytes written to the subscriber's response.
        let bytes: ByteBuffer
    }

    /// How a subscriber's response frames its events.
    enum Format {
        /// `event: TYPE` and `data: JSON` lines (`text/event-stream`).
        case serverSentEvents
        /// One line of JSON per event; a detection line has `jpeg_bytes`, and that many bytes of its
        /// frame's JPEG follow the line.
        case live
    }

    /// A subscriber's stream, which events it wants and the newest frame sent to it per source.
    private final class Subscriber: Sendable {
        let continuation: AsyncStream<Message>.Continuation
        let sources: Set<String>?
        let types: Set<String>?
        let format: Format
        /// Whether it wants events relayed from other nodes of a cluster.
        let relayed: Bool
        /// The newest frame sent, per source.
        private let newest = Mutex<[String: Int]>([:])

        init(continuation: AsyncStream<Message>.Continuation, sources: Set<String>?, types: Set<String>?, format: Format, relayed: Bool) {
            self.continuation = continuation
            self.sources = sources
            self.types = types
            self.format = format
            self.relayed = relayed
        }

        func wants(type: String, source: String?, relayed: Bool = false) -> Bool {
            (self.relayed || !relayed) && (sources == nil || source == nil || sources!.contains(source!)) && (types?.contains(type) ?? true)
        }

        func send(_ message: Message) {
            if let frame = message.frame, let source = message.source { newest.withLock { $0[source] = frame } }
            continuation.yield(message)
        }

        /// Whether a newer frame of the same source is already on its way.
        func isStale(_ message: Message) -> Bool {
            guard let frame = message.frame, let source = message.source else { return false }
            return newest.withLock { ($0[source] ?? frame) > frame }
        }
    }

    private let state = Mutex(State())

    private struct State {
        var subscribers: [UUID: Subscriber] = [:]
        var finished = false
    }
    /// Events a subscriber may have waiting; past that its oldest are dropped.
    static let backlog = 256

    /// Events only this node's subscribers see (in a cluster the others are written to the
    /// outbox): frames and progress, many per second.
    static let localOnly: Set<String> = ["detection", "object_updated", "source_stats", "job_progress", "download_progress"]

    /// In cluster mode, called with every event this node publishes whose type is not
    /// ``localOnly`` (events relayed from other nodes excepted).
    private let outbox = Mutex<(@Sendable (_ type: String, _ source: String?, _ json: Data) -> Void)?>(nil)

    func forward(to outbox: @escaping @Sendable (_ type: String, _ source: String?, _ json: Data) -> Void) {
        self.outbox.withLock { $0 = outbox }
    }

    private func forwarded(_ type: String) -> Bool {
        !Self.localOnly.contains(type) && outbox.withLock { $0 != nil }
    }

    /// Sends an event another node published (its JSON object as that node encoded it) to this
    /// node's subscribers.
    func publishRelayed(_ type: String, source: String?, json: Data) {
        publish(type, source: source, json: json, frame: nil, jpeg: nil, relayed: true)
    }

    /// Sends a live-stream event of a source another node runs (``LiveRelay``): its JSON object,
    /// and for a frame the frame's JPEG, to this node's live-stream subscribers only.
    func publishRelayedLive(_ type: String, source: String, json: Data, frame: Int?, jpeg: ByteBuffer?) {
        publish(type, source: source, json: json, frame: frame, jpeg: jpeg.map { picture in { picture } }, relayed: true, liveOnly: true)
    }

    /// Which sources this node's live-stream subscribers (those taking other nodes' events) want.
    enum LiveWanted: Equatable {
        case none
        case all
        case some(Set<String>)
    }

    /// Which sources this node's live-stream subscribers want, for ``LiveRelay``.
    var liveWanted: LiveWanted {
        state.withLock { state in
            var wanted: Set<String> = []
            for subscriber in state.subscribers.values where subscriber.format == .live && subscriber.relayed {
                guard let sources = subscriber.sources else { return .all }
                wanted.formUnion(sources)
            }
            return wanted.isEmpty ? .none : .some(wanted)
        }
    }

    /// Sends `{"type": type, ...object}` to every subscriber that wants it. `frame` names the frame a
    /// detection belongs to; live-stream subscribers get its JPEG from `jpeg`, asked at most once.
    func publish(_ type: String, source: String? = nil, _ object: [String: Any], frame: Int? = nil, jpeg: (() -> ByteBuffer?)? = nil) {
        guard wanted(type: type, source: source) || forwarded(type) else { return }
        var object = object
        object["type"] = type
        if let source { object["source"] = source }
        publish(type, source: source, json: jsonData(object), frame: frame, jpeg: jpeg)
    }

    /// Sends an event of our Codable types: `value` encodes the whole object, `type` and `source` included.
    func publish(_ type: String, source: String?, encoding value: some Encodable, frame: Int? = nil, jpeg: (() -> ByteBuffer?)? = nil) {
        guard wanted(type: type, source: source) || forwarded(type) else { return }
        publish(type, source: source, json: ResultEncoding.encodeData(value), frame: frame, jpeg: jpeg)
    }

    /// Sends an analysis event of `source` (``SourceEvent``: `type`, `source`, `t`, `frame`, fields).
    func publish(_ event: AnalysisEvent, source: String, time: Double?, frame: Int? = nil) {
        publish(event.type, source: source, encoding: SourceEvent(source: source, time: time, frame: frame, event: event))
    }

    private func wanted(type: String, source: String?) -> Bool {
        state.withLock { $0.subscribers.values.contains { $0.wants(type: type, source: source) } }
    }

    /// Sends the JSON object `data` (with its `type` and `source`) to every subscriber that wants it.
    private func publish(_ type: String, source: String?, json data: Data, frame: Int?, jpeg: (() -> ByteBuffer?)?, relayed: Bool = false,
                         liveOnly: Bool = false) {
        if !relayed && !Self.localOnly.contains(type), let outbox = outbox.withLock({ $0 }) { outbox(type, source, data) }
        let all = state.withLock {
            $0.subscribers.values.filter { (!liveOnly || $0.format == .live) && $0.wants(type: type, source: source, relayed: relayed) }
        }
        guard !all.isEmpty else { return }
        var serverSent: Message?
        var live: Message?
        for subscriber in all {
            switch subscriber.format {
            case .serverSentEvents:
                if serverSent == nil {
                    var bytes = ByteBuffer(string: "event: \(type)\ndata: ")
                    bytes.writeBytes(data)
                    bytes.writeString("\n\n")
                    serverSent = Message(type: type, source: source, json: data, frame: nil, bytes: bytes)
                }
                subscriber.send(serverSent!)
            case .live:
                if live == nil { live = liveMessage(type, source: source, json: data, frame: frame, jpeg: jpeg) }
                subscriber.send(live!)
            }
        }
    }

    /// The live stream's form of an event: its JSON line, followed for a frame by the frame's JPEG
    /// (the line then ends with `"jpeg_bytes": N`).
    private func liveMessage(_ type: String, source: String?, json: Data, frame: Int?, jpeg: (() -> ByteBuffer?)?) -> Message {
        guard let frame, let picture = jpeg?(), json.last == UInt8(ascii: "}") else {
            var bytes = ByteBuffer(bytes: json)
            bytes.writeString("\n")
            return Message(type: type, source: source, json: json, frame: nil, bytes: bytes)
        }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(json.count + 32 + picture.readableBytes)
        bytes.writeBytes(json.dropLast())
        bytes.writeString((json.count > 2 ? "," : "") + "\"jpeg_bytes\":\(picture.readableBytes)}\n")
        bytes.writeImmutableBuffer(picture)
        return Message(type: type, source: source, json: json, frame: frame, bytes: bytes)
    }

    /// A stream of the events from now on of `sources` and `types` (nil: all) this node publishes
    /// (not those relayed from other nodes of a cluster), ending at ``finishAll()``; at most
    /// ``backlog`` wait for a slow reader.
    func subscribe(sources: Set<String>? = nil, types: Set<String>? = nil) -> AsyncStream<Message> {
        add(sources: sources, types: types, format: .serverSentEvents, relayed: false).stream
    }

    private func add(sources: Set<String>?, types: Set<String>?, format: Format, relayed: Bool) -> (stream: AsyncStream<Message>, subscriber: Subscriber) {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingNewest(Self.backlog))
        let id = UUID()
        let subscriber = Subscriber(continuation: continuation, sources: sources, types: types, format: format, relayed: relayed)
        let accepted = state.withLock { state in
            if state.finished { return false }
            state.subscribers[id] = subscriber
            return true
        }
        if !accepted { continuation.finish() }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return (stream, subscriber)
    }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Ends every stream (shutdown).
    func finishAll() {
        let all = state.withLock { state in
            state.finished = true
            return Array(state.subscribers.values)
        }
        for subscriber in all { subscriber.continuation.finish() }
    }

    /// `GET /api/v1/events?source=ID&types=a,b` (Server-Sent Events) or `GET /api/v1/live?sources=a,b&types=a,b`
    /// (the live stream): the events as they happen (in a cluster, unless `relayed` is false, also
    /// those of the sources other nodes run, relayed from the outbox and by ``LiveRelay``), a keep-alive every 15 s so that proxies keep the
    /// connection open, ending at shutdown.
    func response(sources: Set<String>?, types: Set<String>?, format: Format, relayed: Bool = true) -> Response {
        let (stream, subscriber) = add(sources: sources, types: types, format: format, relayed: relayed)
        let headers: HTTPFields = [
            .contentType: format == .live ? Self.liveContentType : "text/event-stream", .cacheControl: "no-cache",
            .init("X-Accel-Buffering")!: "no",
        ]
        let (opening, keepAlive) = format == .live
            ? (ByteBuffer(string: "{\"type\":\"hello\"}\n"), ByteBuffer(string: "{\"type\":\"ping\"}\n"))
            : (ByteBuffer(string: ": spotter events\n\n"), ByteBuffer(string: ": keep-alive\n\n"))
        return Response(status: .ok, headers: headers, body: .init { writer in
            let heartbeat = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(15))
                    if Task.isCancelled { break }
                    subscriber.continuation.yield(Message(type: "ping", source: nil, json: Data(), frame: nil, bytes: keepAlive))
                }
            }
            defer { heartbeat.cancel() }
            try await writer.write(opening)
            for await message in stream.cancelOnGracefulShutdown() where !subscriber.isStale(message) {
                try await writer.write(message.bytes)
            }
            try await writer.finish(nil)
        })
    }

    /// Keeps at most about one frame waiting in a live stream's connection (in the server and in
    /// the kernel's unsent bytes): when a reader or its network is slower than the source, the
    /// stream's writes wait and the frames in between are skipped, instead of queueing seconds of
    /// video in socket buffers. (A connection that refuses the options streams with default buffers.)
    static func keepLiveBuffersShort(_ channel: any Channel) async throws {
        try await channel.setOption(ChannelOptions.writeBufferWaterMark, value: .init(low: 8 << 10, high: 16 << 10)).get()
        #if os(Linux)
        try await channel.setOption(ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_NOTSENT_LOWAT)), value: 16 << 10).get()
        #endif
    }

    /// The media type of `GET /api/v1/live`.
    static let liveContentType = "application/vnd.spotter.live"
}
