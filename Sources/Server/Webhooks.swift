import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import ServiceLifecycle
import Synchronization

/// Where and how `spotter serve` posts each finished clip.
public struct WebhookOptions: Sendable, Equatable {
    /// http or https URLs; each gets every `clip_finished` event as a JSON POST. Default none.
    public var urls: [URL] = []
    /// Tries per event and URL before giving up. Default 5.
    public var attempts = 5
    /// Wait before the first retry; doubled before each next one. Default 1 s (1, 2, 4, 8 s).
    public var firstRetryDelay: Duration = .seconds(1)
    /// Time allowed for one POST. Default 10 s.
    public var timeout: TimeInterval = 10
    /// The event types posted. Default all of ``WebhookOptions/eventTypes``.
    public var events: Set<String> = Self.eventTypes

    /// The events a webhook can get (not the once-a-second `object_updated`).
    public static let eventTypes: Set<String> = ["clip_finished", "object_started", "object_ended", "zone_enter", "zone_exit", "line_cross", "loitering"]

    public init(urls: [URL] = []) {
        self.urls = urls
    }

    /// - Throws: a message naming the first URL that is not http(s) with a host.
    public func validate() throws {
        for url in urls where !["http", "https"].contains(url.scheme?.lowercased() ?? "") || (url.host ?? "").isEmpty {
            throw WebhookError.badURL(url.absoluteString)
        }
        if attempts < 1 { throw WebhookError.badAttempts(attempts) }
        if let unknown = events.subtracting(Self.eventTypes).sorted().first { throw WebhookError.badEvent(unknown) }
    }
}

public enum WebhookError: Error, Equatable, Sendable, CustomStringConvertible {
    case badURL(String)
    case badAttempts(Int)
    case badEvent(String)

    public var description: String {
        switch self {
        case .badURL(let url): return "webhook \(url) is not an http(s) URL with a host"
        case .badAttempts(let n): return "webhook attempts must be at least 1 (got \(n))"
        case .badEvent(let name):
            return "\(name) is not an event webhooks get; choose from \(WebhookOptions.eventTypes.sorted().joined(separator: ", "))"
        }
    }
}

/// Posts every `clip_finished` event (the JSON the event stream sends: `type`, `source`, `clip`
/// with its id, times, frames, labels, objects and URLs), and the per-object and zone events
/// (``WebhookOptions/events``, by default `object_started`, `object_ended`, `zone_enter`, `zone_exit`,
/// `line_cross`, `loitering`; not the once-a-second `object_updated`) to each configured URL,
/// `X-Spotter-Event` naming the type. A 2xx answer delivers it;
/// anything else, or no answer, is retried with doubling delays. One URL being down never delays
/// the others or the sources. At shutdown the clips finished by stopping the sources are still
/// posted (without retries past the first failure).
struct WebhookService: Service {
    let options: WebhookOptions
    let logger: Logger
    let counters: WebhookCounters
    /// Taken when the service is made, before any source starts, so that no clip finished while
    /// the service group starts up is missed. Ends when the hub finishes every stream, after the
    /// sources have stopped at shutdown.
    private let clips: AsyncStream<EventHub.Message>

    init(options: WebhookOptions, events: EventHub, logger: Logger, counters: WebhookCounters) {
        self.options = options
        self.logger = logger
        self.counters = counters
        clips = events.subscribe(types: options.events)
    }

    /// Runs until the event hub ends its streams; the application adds it only with URLs (a
    /// service that returns early would stop the whole service group).
    func run() async throws {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        await withTaskGroup(of: Void.self) { group in
            // One queue per URL, so a URL that is down only delays its own deliveries.
            var queues: [AsyncStream<(type: String, body: Data)>.Continuation] = []
            for url in options.urls {
                let (queue, continuation) = AsyncStream.makeStream(of: (type: String, body: Data).self, bufferingPolicy: .bufferingNewest(EventHub.backlog))
                queues.append(continuation)
                group.addTask {
                    for await item in queue { await deliver(item.body, type: item.type, to: url, session: session) }
                }
            }
            for await message in clips {
                for queue in queues { queue.yield((message.type, message.json)) }
            }
            for queue in queues { queue.finish() }
        }
    }

    /// Posts `body` to `url` until a 2xx answer or the attempts run out.
    func deliver(_ body: Data, type: String, to url: URL, session: URLSession) async {
        var request = URLRequest(url: url, timeoutInterval: options.timeout)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("spotter", forHTTPHeaderField: "User-Agent")
        request.setValue(type, forHTTPHeaderField: "X-Spotter-Event")
        var delay = options.firstRetryDelay
        for attempt in 1...options.attempts {
            let outcome: String
            do {
                let (_, response) = try await session.data(for: request)
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                if (200..<300).contains(status) {
                    counters.count(delivered: true)
                    return
                }
                outcome = "answered \(status)"
            } catch {
                outcome = "failed: \(error.localizedDescription)"
            }
            let last = attempt == options.attempts || Task.isShuttingDownGracefully
            logger.warning("webhook \(url.absoluteString) \(outcome) (attempt \(attempt) of \(options.attempts)\(last ? ", giving up" : ""))")
            if last { break }
            try? await Task.sleep(for: delay)
            delay *= 2
        }
        counters.count(delivered: false)
    }
}

/// Deliveries and failures, for `/metrics`.
final class WebhookCounters: Sendable {
    private let counts = Mutex((delivered: 0, failed: 0))

    func count(delivered ok: Bool) {
        counts.withLock { if ok { $0.delivered += 1 } else { $0.failed += 1 } }
    }

    var totals: (delivered: Int, failed: Int) { counts.withLock { $0 } }
}
