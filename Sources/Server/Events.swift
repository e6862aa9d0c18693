import Foundation
import Hummingbird
import ServiceLifecycle

/// The server's event stream: every event is serialized once and handed to each subscriber (the
/// Server-Sent Events responses of `GET /api/v1/events`). A subscriber that reads too slowly loses
/// its oldest undelivered events, never slows the sources.
final class EventHub: @unchecked Sendable {
    /// One event as the SSE stream sends it.
    struct Message: Sendable {
        let type: String
        let source: String?
        /// The event's JSON object.
        let json: Data
        /// The object as one Server-Sent Event.
        let text: String
    }

    /// A subscriber's stream and which events it wants.
    private struct Subscriber {
        let continuation: AsyncStream<Message>.Continuation
        let source: String?
        let types: Set<String>?

        func wants(_ message: Message) -> Bool {
            (source == nil || message.source == nil || message.source == source) && (types?.contains(message.type) ?? true)
        }
    }

    // `subscribers` and `finished` are guarded by `lock`.
    private let lock = NSLock()
    private var subscribers: [UUID: Subscriber] = [:]
    private var finished = false
    /// Events a subscriber may have waiting; past that its oldest are dropped.
    static let backlog = 256

    /// Sends `{"type": type, ...object}` to every subscriber that wants it.
    func publish(_ type: String, source: String? = nil, _ object: [String: Any]) {
        let all = lock.withLock { Array(subscribers.values) }
        guard !all.isEmpty else { return }
        var object = object
        object["type"] = type
        if let source { object["source"] = source }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        let message = Message(type: type, source: source, json: data, text: "event: \(type)\ndata: \(String(decoding: data, as: UTF8.self))\n\n")
        for subscriber in all where subscriber.wants(message) { subscriber.continuation.yield(message) }
    }

    /// A stream of the events from now on that match `source` and `types` (nil: all), ending at
    /// ``finishAll()``; at most ``backlog`` wait for a slow reader.
    func subscribe(source: String? = nil, types: Set<String>? = nil) -> (id: UUID, stream: AsyncStream<Message>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingNewest(Self.backlog))
        let id = UUID()
        let accepted = lock.withLock {
            if finished { return false }
            subscribers[id] = Subscriber(continuation: continuation, source: source, types: types)
            return true
        }
        if !accepted { continuation.finish() }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.subscribers.removeValue(forKey: id) }
        }
        return (id, stream)
    }

    /// Sends a comment to one subscriber (keeps proxies from closing an idle stream).
    func ping(_ id: UUID) {
        let subscriber = lock.withLock { subscribers[id] }
        subscriber?.continuation.yield(Message(type: "ping", source: nil, json: Data(), text: ": keep-alive\n\n"))
    }

    var subscriberCount: Int { lock.withLock { subscribers.count } }

    /// Ends every stream (shutdown).
    func finishAll() {
        let all = lock.withLock {
            finished = true
            return Array(subscribers.values)
        }
        for subscriber in all { subscriber.continuation.finish() }
    }

    /// `GET /api/v1/events?source=ID&types=a,b`: Server-Sent Events, one `event:`/`data:` pair per
    /// event, a comment every 15 s to keep proxies from closing the connection, ending at shutdown.
    func response(source: String?, types: Set<String>?) -> Response {
        let (id, stream) = subscribe(source: source, types: types)
        let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache", .init("X-Accel-Buffering")!: "no"]
        return Response(status: .ok, headers: headers, body: .init { [self] writer in
            let heartbeat = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(15))
                    self?.ping(id)
                }
            }
            defer { heartbeat.cancel() }
            try await writer.write(ByteBuffer(string: ": spotter events\n\n"))
            for await message in stream.cancelOnGracefulShutdown() {
                try await writer.write(ByteBuffer(string: message.text))
            }
            try await writer.finish(nil)
        })
    }
}
