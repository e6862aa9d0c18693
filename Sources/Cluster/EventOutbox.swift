import Foundation
import Logging
import Synchronization

/// The events of a cluster node: those it publishes go to the database's outbox (fenced by the
/// lease of their source), and those other nodes wrote are handed back to it, so each node can
/// show the events of every source.
///
/// Writes are queued and retried in order while the database is away (up to ``capacity``; past
/// that the newest are dropped and counted). An event whose source this node no longer leases is
/// refused by the database and dropped (counted as fenced). Reads follow the outbox's commit-order
/// rule (``OutboxCursor``), woken by `LISTEN` and every ``pollSeconds`` in case a wake-up was
/// missed while reconnecting.
///
/// ```swift
/// let outbox = EventOutbox(store: store, node: "n1")
/// Task { await outbox.writeQueued() }
/// Task { await outbox.relay { event in show(event) } }
/// outbox.hold(lease)
/// outbox.enqueue(type: "clip_finished", source: lease.sourceID, json: body)
/// ```
public final class EventOutbox: Sendable {
    public struct Counts: Sendable, Equatable {
        public var written = 0
        public var fenced = 0
        public var dropped = 0
        public var relayed = 0
    }

    private struct Pending: Sendable {
        let type: String
        let source: String?
        let body: String
        let lease: Lease?
    }

    public static let capacity = 10_000
    public static let pollSeconds = 2.0

    let store: ClusterStore
    let node: String
    let logger: Logger
    /// The leases this node runs sources under, by source id: an event is written under the lease
    /// its source had when it was published.
    private let leases = Mutex<[String: Lease]>([:])
    private let counts = Mutex(Counts())
    /// Events queued and not yet written or given up.
    private let queued = Atomic<Int>(0)
    private let queue: AsyncStream<Pending>
    private let input: AsyncStream<Pending>.Continuation

    public init(store: ClusterStore, node: String, logger: Logger = Logger(label: "spotter.cluster")) {
        self.store = store
        self.node = node
        self.logger = logger
        (queue, input) = AsyncStream.makeStream(of: Pending.self, bufferingPolicy: .bufferingOldest(Self.capacity))
    }

    public var totals: Counts { counts.withLock { $0 } }
    public var pending: Int { queued.load(ordering: .relaxed) }

    public func hold(_ lease: Lease) { leases.withLock { $0[lease.sourceID] = lease } }
    public func release(_ sourceID: String) { _ = leases.withLock { $0.removeValue(forKey: sourceID) } }

    /// Queues an event this node published. Events of a source it holds no lease on (one it let go)
    /// are not written.
    public func enqueue(type: String, source: String?, json: Data) {
        let lease = source.flatMap { id in leases.withLock { $0[id] } }
        if source != nil && lease == nil { return }
        queued.add(1, ordering: .relaxed)
        if case .dropped = input.yield(Pending(type: type, source: source, body: String(decoding: json, as: UTF8.self), lease: lease)) {
            queued.subtract(1, ordering: .relaxed)
            counts.withLock { $0.dropped += 1 }
        }
    }

    /// Waits until every queued event is written or given up, at most `seconds` (a source's last
    /// events are written before its lease is handed over).
    public func flush(within seconds: Double) async {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while pending > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Writes queued events in order, each retried every second while the database is away,
    /// until the task is cancelled.
    public func writeQueued() async {
        for await event in queue {
            var reported = false
            while !Task.isCancelled {
                do {
                    try await store.append(type: event.type, body: event.body, node: node, lease: event.lease)
                    counts.withLock { $0.written += 1 }
                    break
                } catch ClusterError.fenced {
                    counts.withLock { $0.fenced += 1 }
                    break
                } catch {
                    if !reported { logger.warning("cluster: events wait for the database: \(error)") }
                    reported = true
                    try? await Task.sleep(for: .seconds(1))
                }
            }
            queued.subtract(1, ordering: .relaxed)
            if Task.isCancelled { return }
        }
    }

    /// Hands every event other nodes write after `start` (nil: from when the first read succeeds;
    /// see ``ClusterStore/outboxEnd()``) to `deliver`, in the outbox's commit order, until the task
    /// is cancelled. Wake-ups that come while a read runs or within ``minimumReadInterval`` of
    /// the last one are one, so a node reads at most a few times a second however many events
    /// the cluster writes.
    public func relay(from start: OutboxCursor? = nil, _ deliver: @escaping @Sendable (ClusterEvent) -> Void) async {
        let reader = OutboxReader(store: store, node: node, cursor: start, deliver: deliver)
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let polling = Task {
            while !Task.isCancelled {
                wake.yield()
                try? await Task.sleep(for: .milliseconds(Int64(Self.pollSeconds * 1000)))
            }
        }
        let listening = Task { [store] in
            while !Task.isCancelled {
                do { try await store.listenForEvents { wake.yield() } } catch { try? await Task.sleep(for: .seconds(1)) }
            }
        }
        defer {
            polling.cancel()
            listening.cancel()
            wake.finish()
        }
        for await _ in wakes {
            let relayed = await reader.readAvailable(logger: logger)
            if relayed > 0 { counts.withLock { $0.relayed += relayed } }
            try? await Task.sleep(for: Self.minimumReadInterval)
        }
    }

    public static let minimumReadInterval = Duration.milliseconds(200)
}

/// Reads the outbox on from where it was (so nothing is lost across a reconnect) and relays what
/// other nodes wrote. One task reads at a time (``EventOutbox/relay(from:_:)``'s loop).
private actor OutboxReader {
    let store: ClusterStore
    let node: String
    let deliver: @Sendable (ClusterEvent) -> Void
    /// Where the reading is; nil until the outbox's end at the start is known.
    private var cursor: OutboxCursor?
    private var failing = false

    init(store: ClusterStore, node: String, cursor: OutboxCursor?, deliver: @escaping @Sendable (ClusterEvent) -> Void) {
        self.store = store
        self.node = node
        self.cursor = cursor
        self.deliver = deliver
    }

    /// Relays every event readable now; returns how many.
    func readAvailable(logger: Logger) async -> Int {
        var relayed = 0
        do {
            if cursor == nil { cursor = try await store.outboxEnd() }
            guard var at = cursor else { return 0 }
            let limit = 500
            while true {
                let (batch, next) = try await store.events(after: at, limit: limit)
                for event in batch where event.node != node {
                    deliver(event)
                    relayed += 1
                }
                at = next
                cursor = next
                if batch.count < limit { break }
            }
            failing = false
        } catch {
            if !failing { logger.warning("cluster: cannot read other nodes' events: \(error)") }
            failing = true
        }
        return relayed
    }
}
