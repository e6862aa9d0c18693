import Cluster
import Foundation
import Logging
import Synchronization

/// The events of a cluster node: those it publishes go to the database's outbox (fenced by the
/// lease of their source), and those other nodes wrote come back to its subscribers, so
/// `/api/v1/events` and the live stream on any node carry the events of every source.
///
/// Writes are queued and retried in order while the database is away (up to ``capacity``; past
/// that the newest are dropped and counted). An event whose source this node no longer leases is
/// refused by the database and dropped (counted as fenced). Reads follow the outbox's commit-order
/// rule (``OutboxCursor``), woken by `LISTEN` and every ``pollSeconds`` in case a wake-up was
/// missed while reconnecting.
final class ClusterOutbox: Sendable {
    struct Counts: Sendable {
        var written = 0
        var fenced = 0
        var dropped = 0
        var relayed = 0
    }

    private struct Pending: Sendable {
        let type: String
        let source: String?
        let body: String
        let lease: Lease?
    }

    static let capacity = 10_000
    static let pollSeconds = 2.0

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

    init(store: ClusterStore, node: String, logger: Logger) {
        self.store = store
        self.node = node
        self.logger = logger
        (queue, input) = AsyncStream.makeStream(of: Pending.self, bufferingPolicy: .bufferingOldest(Self.capacity))
    }

    var totals: Counts { counts.withLock { $0 } }
    var pending: Int { queued.load(ordering: .relaxed) }

    func hold(_ lease: Lease) { leases.withLock { $0[lease.sourceID] = lease } }
    func release(_ sourceID: String) { _ = leases.withLock { $0.removeValue(forKey: sourceID) } }

    /// Queues an event this node published. Events of a source it holds no lease on (one it let go)
    /// are not written.
    func enqueue(type: String, source: String?, json: Data) {
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
    func flush(within seconds: Double) async {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while pending > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Writes queued events in order, each retried every second while the database is away,
    /// until the task is cancelled.
    func writeQueued() async {
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

    /// Sends the events other nodes write from now on to `events`' subscribers, until cancelled.
    func relay(to events: EventHub) async {
        let reader = OutboxReader(store: store, node: node, events: events)
        let drain: @Sendable () async -> Void = { [self] in
            let relayed = await reader.drain(logger: logger)
            if relayed > 0 { counts.withLock { $0.relayed += relayed } }
        }
        let polling = Task {
            while !Task.isCancelled {
                await drain()
                try? await Task.sleep(for: .milliseconds(Int64(Self.pollSeconds * 1000)))
            }
        }
        defer { polling.cancel() }
        while !Task.isCancelled {
            do { try await store.listenForEvents(drain) } catch { try? await Task.sleep(for: .seconds(1)) }
        }
    }
}

/// Reads the outbox on from where it was (so nothing is lost across a reconnect) and relays what
/// other nodes wrote.
private actor OutboxReader {
    let store: ClusterStore
    let node: String
    let events: EventHub
    /// Where the reading is; nil until the outbox's end at the start is known.
    private var cursor: OutboxCursor?
    private var failing = false

    init(store: ClusterStore, node: String, events: EventHub) {
        self.store = store
        self.node = node
        self.events = events
    }

    /// Relays every event readable now; returns how many.
    func drain(logger: Logger) async -> Int {
        var relayed = 0
        do {
            if cursor == nil { cursor = try await store.outboxEnd() }
            guard var at = cursor else { return 0 }
            let limit = 500
            while true {
                let (batch, next) = try await store.events(after: at, limit: limit)
                for event in batch where event.node != node {
                    events.publishRelayed(event.type, source: event.source, json: Data(event.body.utf8))
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
