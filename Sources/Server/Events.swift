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
        let text: String
    }

    // `subscribers` and `finished` are guarded by `lock`.
    private let lock = NSLock()
    private var subscribers: [UUID: AsyncStream<Message>.Continuation] = [:]
    private var finished = false

    /// Sends `{"type": type, ...object}` to every subscriber.
    func publish(_ type: String, source: String? = nil, _ object: [String: Any]) {
        let targets = lock.withLock { Array(subscribers.values) }
        guard !targets.isEmpty else { return }
        var object = object
        object["type"] = type
        if let source { object["source"] = source }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        let message = Message(type: type, source: source, text: "event: \(type)\ndata: \(String(decoding: data, as: UTF8.self))\n\n")
        for target in targets { target.yield(message) }
    }

    /// A stream of the events from now on, ending at ``finishAll()``.
    func subscribe() -> AsyncStream<Message> {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        let accepted = lock.withLock {
            if finished { return false }
            subscribers[id] = continuation
            return true
        }
        if !accepted { continuation.finish() }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    var subscriberCount: Int { lock.withLock { subscribers.count } }

    /// Ends every stream (shutdown).
    func finishAll() {
        let targets = lock.withLock {
            finished = true
            return Array(subscribers.values)
        }
        for target in targets { target.finish() }
    }

    /// `GET /api/v1/events?source=ID&types=a,b`: Server-Sent Events, one `event:`/`data:` pair per
    /// event, a comment every 15 s to keep proxies from closing the connection, ending at shutdown.
    func response(source: String?, types: Set<String>?) -> Response {
        let stream = subscribe()
        let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache", .init("X-Accel-Buffering")!: "no"]
        return Response(status: .ok, headers: headers, body: .init { writer in
            try await writer.write(ByteBuffer(string: ": spotter events\n\n"))
            let merged = AsyncStream<Message?> { continuation in
                let relay = Task {
                    for await message in stream.cancelOnGracefulShutdown() { continuation.yield(message) }
                    continuation.finish()
                }
                let heartbeat = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(15))
                        continuation.yield(nil)
                    }
                }
                continuation.onTermination = { _ in
                    relay.cancel()
                    heartbeat.cancel()
                }
            }
            for await message in merged {
                guard let message else {
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    continue
                }
                if let source, message.source != nil, message.source != source { continue }
                if let types, !types.contains(message.type) { continue }
                try await writer.write(ByteBuffer(string: message.text))
            }
            try await writer.finish(nil)
        })
    }
}
