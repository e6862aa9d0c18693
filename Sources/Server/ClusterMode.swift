import Cluster
import Foundation
import Logging
import Pipeline
import ServiceLifecycle

/// `spotter serve --database`: this node is one of several sharing a PostgreSQL database. Sources
/// added through any node's API are rows there; each node runs the ones it holds a lease on.
public struct ClusterSettings: Sendable {
    public var database: DatabaseURL
    /// This node's name, unique in the cluster. Default: the machine's name and the port.
    public var node: String
    public var lease = LeaseKeeper.Options()

    public init(database: DatabaseURL, node: String) {
        self.database = database
        self.node = node
    }
}

/// Runs the sources this node holds leases on in the server's ``SourceHub``.
struct HubHolder: LeaseHolder {
    let hub: SourceHub
    /// Where the source's events go: written under its lease, so they hold it while it runs.
    let outbox: EventOutbox
    /// How long a stopped source's last events may take to reach the database before its lease goes.
    let flushSeconds: Double
    let logger: Logger

    func start(_ lease: Lease) async throws {
        let spec = try JSONDecoder().decode(SourceSpec.self, from: Data(lease.settings.utf8))
        if lease.generation > 1 {
            // Taken over (or moved): the clip a killed owner had open has no index row; it is
            // indexed as incomplete now (clips running recorders hold stay locked and are skipped).
            let repaired = try hub.album.repair()
            if !repaired.adopted.isEmpty { logger.info("cluster: indexed \(repaired.adopted.count) clips left open by another node") }
        }
        outbox.hold(lease)
        do { try hub.add(spec, origin: .api, id: lease.sourceID, keep: false) } catch {
            outbox.release(lease.sourceID)
            throw error
        }
        logger.info("cluster: running source \(lease.sourceID) (lease generation \(lease.generation))")
    }

    func stop(_ lease: Lease) async {
        await hub.drop(lease.sourceID)
        // Its last events (the final clip_finished) are written while the lease is still ours.
        await outbox.flush(within: flushSeconds)
        outbox.release(lease.sourceID)
    }
}

/// A source as the cluster's API lists it: its status where this node runs it, else what the
/// database knows (which node runs it, under which lease generation).
struct ClusterSourceAnswer {
    /// The JSON object of one source.
    static func object(_ row: SourceStatus, local: LiveSource?, node: String) -> [String: Any] {
        var object: [String: Any]
        if let local, row.node == node {
            object = local.status()
        } else {
            let spec = try? JSONDecoder().decode(SourceSpec.self, from: Data(row.settings.utf8))
            object = ["id": row.id, "input": spec.map { Album.redactingPassword($0.input) } ?? "", "state": row.desired == "paused" ? "paused" : row.state,
                      "paused": row.desired == "paused", "origin": "api"]
        }
        object["node"] = row.node ?? NSNull()
        object["generation"] = row.generation
        return object
    }
}

/// The cluster side of the sources service: the pool, the schema, and the lease keeper; at
/// shutdown the node stops its sources and hands their leases over at once.
struct ClusterRun {
    let store: ClusterStore
    let outbox: EventOutbox
    let settings: ClusterSettings
    let hub: SourceHub
    let logger: Logger

    func run() async throws {
        // Detached: the pool must outlive the graceful shutdown (it would end with it, before the
        // leases are released).
        let pool = Task.detached { await store.run() }
        defer { pool.cancel() }
        try await store.migrate()
        let writing = Task { await outbox.writeQueued() }
        let relaying = Task { await outbox.relay { event in hub.events.publishRelayed(event.type, source: event.source, json: Data(event.body.utf8)) } }
        let holder = HubHolder(hub: hub, outbox: outbox, flushSeconds: min(2, settings.lease.leaseSeconds / 3), logger: logger)
        let keeper = LeaseKeeper(node: settings.node, store: store, holder: holder, options: settings.lease, logger: logger)
        logger.info("cluster: node \(settings.node) on \(store.url)")
        let rounds = Task { await keeper.run() }
        try? await gracefulShutdown()
        rounds.cancel()
        await keeper.shutdown()
        relaying.cancel()
        writing.cancel()
    }
}
