import Foundation
import Logging
import PostgresNIO

/// A source's lease held by one node: while it holds it, the node runs the source and writes for
/// it under `generation`; every claim raises the generation, so writes of an earlier holder are
/// refused (fencing).
public struct Lease: Sendable, Equatable, Hashable {
    public var sourceID: String
    public var generation: Int64
    /// The source's settings as the API stored them (JSON).
    public var settings: String

    public init(sourceID: String, generation: Int64, settings: String) {
        self.sourceID = sourceID
        self.generation = generation
        self.settings = settings
    }
}

/// One node as the cluster sees it.
public struct NodeStatus: Codable, Sendable, Equatable {
    public var name: String
    public var address: String
    public var cores: Int
    public var load: Double
    /// What placement gives it sources by, in cores: its cores less the share of them other
    /// processes on its machine use.
    public var capacity: Double
    /// Seconds since its last heartbeat, by the database's clock.
    public var heartbeatAge: Double
    public var live: Bool
    /// Sources it holds an unexpired lease on.
    public var sources: Int
    /// Leases it has claimed, and how many of them it took over from another node.
    public var claims: Int64
    public var takeovers: Int64
}

/// One source as the cluster sees it.
public struct SourceStatus: Codable, Sendable, Equatable {
    public var id: String
    public var settings: String
    public var desired: String
    /// The node holding an unexpired lease on it, if any.
    public var node: String?
    public var generation: Int64
    public var state: String

    public init(id: String, settings: String, desired: String, node: String?, generation: Int64, state: String) {
        self.id = id
        self.settings = settings
        self.desired = desired
        self.node = node
        self.generation = generation
        self.state = state
    }
}

/// One event of the outbox.
public struct ClusterEvent: Codable, Sendable, Equatable {
    public var id: Int64
    public var source: String?
    public var generation: Int64?
    public var node: String
    public var type: String
    /// The event's JSON body as its writer encoded it.
    public var body: String
    /// Wall-clock time of the write, milliseconds since 1970.
    public var at: Int64
}

/// Where an outbox reader is: the last event it read, by (writing transaction, id).
///
/// The rule that keeps a reader from skipping an event: ids are handed out when a row is inserted,
/// but transactions commit in any order, so a reader that has seen id 12 may later find id 11
/// committed. A reader therefore reads only events written by transactions older than every
/// transaction still running (`tx < pg_snapshot_xmin(pg_current_snapshot())`), in (tx, id) order.
/// No transaction that is still running, or starts later, can add a row before that point.
public struct OutboxCursor: Sendable, Equatable, Codable {
    public var transaction: UInt64
    public var id: Int64

    public static let start = OutboxCursor(transaction: 0, id: 0)

    public init(transaction: UInt64, id: Int64) {
        self.transaction = transaction
        self.id = id
    }
}

/// The cluster's database: schema, nodes, sources and their leases, the event outbox.
///
/// Owns one PostgreSQL connection pool; ``run()`` must be running (in a task or a service group)
/// while other methods are called. Times (heartbeats, lease expiry) are the database's, so the
/// nodes' clocks need not agree. Thread-safe.
///
/// ```swift
/// let store = ClusterStore(url: try DatabaseURL("postgres://spotter@127.0.0.1/spotter"))
/// async let running: Void = store.run()
/// try await store.migrate()
/// ```
public final class ClusterStore: Sendable {
    public let url: DatabaseURL
    let client: PostgresClient
    let logger: Logger
    /// How long one statement may take before the call gives up.
    let timeout: Duration

    public init(url: DatabaseURL, logger: Logger = Logger(label: "spotter.cluster"), timeout: Duration = .seconds(5)) {
        self.url = url
        self.logger = logger
        self.timeout = timeout
        var configuration = PostgresClient.Configuration(host: url.host, port: url.port, username: url.user, password: url.password,
                                                         database: url.database, tls: .disable)
        configuration.options.connectTimeout = .seconds(3)
        configuration.options.maximumConnections = 8
        // The pool's own messages (every failed connection attempt is `info`) only from warnings up.
        var background = logger
        background.logLevel = max(logger.logLevel, .warning)
        client = PostgresClient(configuration: configuration, backgroundLogger: background)
    }

    /// Runs the connection pool until the task is cancelled.
    public func run() async { await client.run() }

    // MARK: Schema

    /// Creates or migrates the schema; safe when several nodes start at once (one advisory lock).
    ///
    /// - Returns: the schema version now in place.
    /// - Throws: ``ClusterError/schemaTooNew(found:known:)``, ``ClusterError/database(doing:reason:)``.
    @discardableResult
    public func migrate() async throws -> Int {
        try await perform("migrating the schema", timeout: .seconds(30)) { [logger] in
            try await self.client.withTransaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Schema.migrationLock))", logger: logger)
                try await connection.query("CREATE TABLE IF NOT EXISTS spotter_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
                                           logger: logger)
                var found = 0
                for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM spotter_schema", logger: logger).decode(Int.self) {
                    found = version
                }
                guard found <= Schema.migrations.count else { throw ClusterError.schemaTooNew(found: found, known: Schema.migrations.count) }
                for version in (found + 1)..<(Schema.migrations.count + 1) {
                    for statement in Schema.migrations[version - 1] {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.query("INSERT INTO spotter_schema (version) VALUES (\(version))", logger: logger)
                    logger.info("cluster schema migrated to version \(version)")
                }
                return Schema.migrations.count
            }
        }
    }

    // MARK: Nodes

    /// Records that `node` is alive, with its capacity.
    public func heartbeat(node: String, address: String, cores: Int, load: Double, capacity: Double) async throws {
        let capacity = max(0.01, capacity)
        try await perform("recording \(node)'s heartbeat") {
            _ = try await self.client.query("""
                INSERT INTO nodes (name, address, cores, load, capacity) VALUES (\(node), \(address), \(max(1, cores)), \(load), \(capacity))
                ON CONFLICT (name) DO UPDATE SET address = excluded.address, cores = excluded.cores, load = excluded.load,
                    capacity = excluded.capacity, heartbeat = now()
                """, logger: self.logger)
        }
    }

    /// Removes `node`'s row (a graceful leave: it no longer counts for placement).
    public func leave(node: String) async throws {
        try await perform("removing node \(node)") {
            _ = try await self.client.query("DELETE FROM nodes WHERE name = \(node)", logger: self.logger)
        }
    }

    /// Every node, with whether its heartbeat is younger than `within` seconds and how many
    /// unexpired leases it holds.
    public func nodes(within: Double) async throws -> [NodeStatus] {
        try await perform("listing nodes") {
            let rows = try await self.client.query("""
                SELECT n.name, n.address, n.cores, n.load, COALESCE(n.capacity, n.cores)::float8, extract(epoch FROM now() - n.heartbeat)::float8,
                       (SELECT count(*) FROM sources s WHERE s.owner = n.name AND s.lease_expires > now()), n.claims, n.takeovers
                FROM nodes n ORDER BY n.name
                """, logger: self.logger)
            var nodes: [NodeStatus] = []
            for try await (name, address, cores, load, capacity, age, sources, claims, takeovers)
                in rows.decode((String, String, Int, Double, Double, Double, Int, Int64, Int64).self) {
                nodes.append(NodeStatus(name: name, address: address, cores: cores, load: load, capacity: capacity, heartbeatAge: age, live: age < within,
                                        sources: sources, claims: claims, takeovers: takeovers))
            }
            return nodes
        }
    }

    // MARK: Sources

    /// Adds a source (settings as JSON) to the cluster; some node will claim it.
    ///
    /// - Returns: its id, `s` and a number unique in the cluster.
    public func addSource(settings: String, paused: Bool = false) async throws -> String {
        try await perform("adding a source") {
            let rows = try await self.client.query("""
                INSERT INTO sources (id, settings, desired) VALUES ('s' || nextval('source_numbers'), \(settings), \(paused ? "paused" : "running"))
                RETURNING id
                """, logger: self.logger)
            for try await id in rows.decode(String.self) { return id }
            throw ClusterError.database(doing: "adding a source", reason: "no id came back")
        }
    }

    /// Adds the source `id` unless the cluster has one with that id (a node's configuration file
    /// names its sources by their settings, so every node given the same file adds each once).
    ///
    /// - Returns: whether it was added now.
    public func addSourceOnce(id: String, settings: String, paused: Bool = false) async throws -> Bool {
        try await perform("adding source \(id)") {
            try await self.count(try await self.client.query("""
                INSERT INTO sources (id, settings, desired) VALUES (\(id), \(settings), \(paused ? "paused" : "running"))
                ON CONFLICT (id) DO NOTHING RETURNING id
                """, logger: self.logger)) > 0
        }
    }

    /// Changes a source's settings or desired state; its owner picks the change up at its next renewal.
    ///
    /// - Throws: ``ClusterError/unknownSource(_:)``.
    public func updateSource(_ id: String, settings: String? = nil, paused: Bool? = nil) async throws {
        let desired = paused.map { $0 ? "paused" : "running" }
        let changed = try await perform("changing source \(id)") {
            try await self.count(try await self.client.query("""
                UPDATE sources SET settings = coalesce(\(settings), settings), desired = coalesce(\(desired), desired)
                WHERE id = \(id) RETURNING id
                """, logger: self.logger))
        }
        if changed == 0 { throw ClusterError.unknownSource(id) }
    }

    /// Removes a source from the cluster; its owner stops it at its next renewal.
    ///
    /// - Returns: whether there was such a source.
    public func removeSource(_ id: String) async throws -> Bool {
        try await perform("removing source \(id)") {
            try await self.count(try await self.client.query("DELETE FROM sources WHERE id = \(id) RETURNING id", logger: self.logger)) > 0
        }
    }

    /// Every source in the order added, with its current lease holder.
    public func sources() async throws -> [SourceStatus] {
        try await sources(where: nil)
    }

    /// One source, nil when the cluster has none with this id.
    public func source(_ id: String) async throws -> SourceStatus? {
        try await sources(where: id).first
    }

    private func sources(where id: String?) async throws -> [SourceStatus] {
        try await perform("listing sources") {
            let rows = try await self.client.query("""
                SELECT id, settings, desired, CASE WHEN lease_expires > now() THEN owner END, generation, state
                FROM sources WHERE \(id)::text IS NULL OR id = \(id) ORDER BY position
                """, logger: self.logger)
            var sources: [SourceStatus] = []
            for try await (id, settings, desired, owner, generation, state) in rows.decode((String, String, String, String?, Int64, String).self) {
                sources.append(SourceStatus(id: id, settings: settings, desired: desired, node: owner, generation: generation, state: state))
            }
            return sources
        }
    }

    /// How many sources are to run (not paused): what placement divides among the nodes.
    public func runningSourceCount() async throws -> Int {
        try await perform("counting sources") {
            let rows = try await self.client.query("SELECT count(*) FROM sources WHERE desired = 'running'", logger: self.logger)
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }

    // MARK: Leases

    /// Extends `node`'s leases by `seconds` from now, for those it still holds under the same
    /// generation (an expired lease no other node has claimed is renewed too).
    ///
    /// - Returns: the leases renewed, with the sources' current settings and whether each should
    ///   run; a lease missing from the answer is lost (taken over, or the source removed).
    public func renew(node: String, leases: [Lease], seconds: Double) async throws -> [(lease: Lease, running: Bool)] {
        guard !leases.isEmpty else { return [] }
        let ids = leases.map(\.sourceID)
        let generations = leases.map(\.generation)
        return try await perform("renewing \(node)'s leases") {
            let rows = try await self.client.query("""
                UPDATE sources s SET lease_expires = now() + make_interval(secs => \(seconds))
                FROM unnest(\(ids)::text[], \(generations)::int8[]) AS held(id, generation)
                WHERE s.id = held.id AND s.generation = held.generation AND s.owner = \(node)
                RETURNING s.id, s.generation, s.settings, s.desired
                """, logger: self.logger)
            var kept: [(Lease, Bool)] = []
            for try await (id, generation, settings, desired) in rows.decode((String, Int64, String, String).self) {
                kept.append((Lease(sourceID: id, generation: generation, settings: settings), desired == "running"))
            }
            return kept
        }
    }

    /// Claims up to `count` sources that should run and have no unexpired lease, for `seconds`,
    /// raising each one's generation. Rows other nodes are claiming at the same moment are skipped
    /// (`FOR UPDATE SKIP LOCKED`), so two nodes never claim one source.
    ///
    /// - Returns: the new leases, each with the node that held it before (nil if none).
    public func claim(node: String, count: Int, seconds: Double) async throws -> [(lease: Lease, previous: String?)] {
        guard count > 0 else { return [] }
        return try await perform("claiming sources for \(node)") {
            let rows = try await self.client.query("""
                WITH picked AS (
                    SELECT id, owner AS previous FROM sources
                    WHERE desired = 'running' AND (owner IS NULL OR lease_expires IS NULL OR lease_expires < now())
                    ORDER BY position LIMIT \(count) FOR UPDATE SKIP LOCKED
                )
                UPDATE sources s SET owner = \(node), generation = s.generation + 1, lease_expires = now() + make_interval(secs => \(seconds)),
                                     state = 'starting'
                FROM picked WHERE s.id = picked.id
                RETURNING s.id, s.generation, s.settings, picked.previous
                """, logger: self.logger)
            var claimed: [(Lease, String?)] = []
            for try await (id, generation, settings, previous) in rows.decode((String, Int64, String, String?).self) {
                claimed.append((Lease(sourceID: id, generation: generation, settings: settings), previous))
            }
            if !claimed.isEmpty {
                let takeovers = claimed.filter { $0.1 != nil && $0.1 != node }.count
                try await self.client.query("UPDATE nodes SET claims = claims + \(claimed.count), takeovers = takeovers + \(takeovers) WHERE name = \(node)",
                                            logger: self.logger)
            }
            return claimed
        }
    }

    /// Gives a lease up at once (the source stopped here), so another node can claim it without
    /// waiting for it to expire. Nothing happens if the lease was already lost.
    public func release(node: String, lease: Lease) async throws {
        try await perform("releasing source \(lease.sourceID)") {
            _ = try await self.client.query("""
                UPDATE sources SET owner = NULL, lease_expires = NULL, state = 'waiting'
                WHERE id = \(lease.sourceID) AND owner = \(node) AND generation = \(lease.generation)
                """, logger: self.logger)
        }
    }

    /// Records a source's state (`running`, `retrying`, `finished`...) under its lease (fenced).
    public func setState(_ state: String, node: String, lease: Lease) async throws {
        let changed = try await perform("recording source \(lease.sourceID)'s state") {
            try await self.count(try await self.client.query("""
                UPDATE sources SET state = \(state)
                WHERE id = \(lease.sourceID) AND owner = \(node) AND generation = \(lease.generation) AND lease_expires > now()
                RETURNING id
                """, logger: self.logger))
        }
        if changed == 0 { throw ClusterError.fenced(source: lease.sourceID, generation: lease.generation) }
    }

    /// Whether `node` may still write rows of its source under `lease`: it is the source's owner
    /// and no newer generation exists (a clip's index row is written only then). Expiry alone does
    /// not refuse: after a database outage the owner's lease may have lapsed with nobody else
    /// having taken it, and its clips are still its own.
    public func holds(_ lease: Lease, node: String) async throws -> Bool {
        try await perform("checking the lease of \(lease.sourceID)") {
            try await self.count(try await self.client.query("""
                SELECT 1 FROM sources WHERE id = \(lease.sourceID) AND generation = \(lease.generation) AND owner = \(node)
                """, logger: self.logger)) > 0
        }
    }

    // MARK: Events

    /// Appends an event to the outbox. With a lease, the write is fenced: it is refused once a
    /// newer generation of the source's lease exists (or `node` released it), as clip rows are
    /// (``holds(_:node:)``); a lapsed lease nobody has taken yet still writes, so events queued
    /// through a database outage are not lost to the renewal that follows it. The row lock taken
    /// here makes a concurrent claim wait, so a write lands either before the takeover or not at all.
    ///
    /// - Throws: ``ClusterError/fenced(source:generation:)``.
    public func append(type: String, body: String, node: String, lease: Lease?) async throws {
        if let lease {
            let written = try await perform("writing a \(type) event") {
                try await self.count(try await self.client.query("""
                    INSERT INTO events (source_id, generation, node, type, body)
                    SELECT id, generation, \(node), \(type), \(body) FROM sources
                    WHERE id = \(lease.sourceID) AND generation = \(lease.generation) AND owner = \(node)
                    FOR SHARE
                    RETURNING id
                    """, logger: self.logger))
            }
            if written == 0 { throw ClusterError.fenced(source: lease.sourceID, generation: lease.generation) }
        } else {
            try await perform("writing a \(type) event") {
                _ = try await self.client.query("INSERT INTO events (node, type, body) VALUES (\(node), \(type), \(body))", logger: self.logger)
            }
        }
    }

    /// Up to `limit` events after `cursor`, in commit-safe order (see ``OutboxCursor``), and the
    /// cursor to read on from.
    public func events(after cursor: OutboxCursor, limit: Int = 500) async throws -> (events: [ClusterEvent], cursor: OutboxCursor) {
        try await perform("reading events") {
            let rows = try await self.client.query("""
                SELECT e.id, e.tx::text AS tx_text, e.source_id, e.generation, e.node, e.type, e.body, (extract(epoch FROM e.at) * 1000)::int8
                FROM events e
                WHERE (e.tx, e.id) > (\(String(cursor.transaction))::xid8, \(cursor.id)) AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY e.tx, e.id LIMIT \(limit)
                """, logger: self.logger)
            var events: [ClusterEvent] = []
            var next = cursor
            for try await (id, tx, source, generation, node, type, body, at)
                in rows.decode((Int64, String, String?, Int64?, String, String, String, Int64).self) {
                events.append(ClusterEvent(id: id, source: source, generation: generation, node: node, type: type, body: body, at: at))
                next = OutboxCursor(transaction: UInt64(tx) ?? next.transaction, id: id)
            }
            return (events, next)
        }
    }

    /// The cursor after the newest event a reader may read now: a reader starting there gets
    /// every event committed from now on, and those of transactions still open.
    public func outboxEnd() async throws -> OutboxCursor {
        try await perform("reading the end of the event outbox") {
            let rows = try await self.client.query("""
                SELECT e.tx::text AS tx_text, e.id FROM events e WHERE e.tx < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY e.tx DESC, e.id DESC LIMIT 1
                """, logger: self.logger)
            for try await (tx, id) in rows.decode((String, Int64).self) {
                return OutboxCursor(transaction: UInt64(tx) ?? 0, id: id)
            }
            return .start
        }
    }

    /// Holds one connection listening for the outbox's wake-up (`NOTIFY`, sent by every insert into
    /// `events`) and calls `wake` once at the start and then for each notification, until the
    /// connection fails (it throws) or the task is cancelled. A wake-up says only that there may be
    /// more to read: read with ``events(after:limit:)``.
    public func listenForEvents(_ wake: @escaping @Sendable () async -> Void) async throws {
        do {
            try await client.withConnection { connection in
                try await connection.listen(on: Schema.eventsChannel) { notifications in
                    await wake()  // whatever was written while this connection was being made
                    for try await _ in notifications { await wake() }
                }
            }
        } catch is CancellationError {
            return
        } catch let error as PSQLError {
            throw Self.clusterError(error, doing: "listening for events")
        }
    }

    // MARK: Helpers

    private func count(_ rows: PostgresRowSequence) async throws -> Int {
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }

    /// PostgreSQL's error as a ``ClusterError``: the server's message, else what broke the connection.
    private static func clusterError(_ error: PSQLError, doing: String) -> ClusterError {
        .database(doing: doing, reason: error.serverInfo?[.message] ?? (error.underlying.map { "\($0)" } ?? "\(error.code)"))
    }

    /// Runs `body` with a time limit, turning PostgreSQL's errors into ``ClusterError``.
    func perform<Result: Sendable>(_ doing: String, timeout: Duration? = nil, _ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        do {
            return try await withTimeLimit(timeout ?? self.timeout, doing: doing, body)
        } catch let error as ClusterError {
            throw error
        } catch let error as PSQLError {
            throw Self.clusterError(error, doing: doing)
        } catch {
            throw ClusterError.database(doing: doing, reason: "\(error)")
        }
    }
}

/// Runs `body`, giving up with ``ClusterError/timedOut(doing:seconds:)`` after `limit` (the body's
/// task is cancelled).
func withTimeLimit<Result: Sendable>(_ limit: Duration, doing: String, _ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else {
            let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
            throw ClusterError.timedOut(doing: doing, seconds: seconds)
        }
        return result
    }
}
