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
    let store: ClusterStore
    let node: String
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
            let repaired = try await offCooperativeThreads { [hub] in try hub.album.repair() }
            if !repaired.adopted.isEmpty { logger.info("cluster: indexed \(repaired.adopted.count) clips left open by another node") }
        }
        outbox.hold(lease)
        do { try hub.add(spec, origin: .api, id: lease.sourceID, keep: false, lease: sourceLease(lease)) } catch {
            outbox.release(lease.sourceID)
            throw error
        }
        logger.info("cluster: running source \(lease.sourceID) (lease generation \(lease.generation))")
    }

    /// The source's clips carry this node and the lease's generation; each clip's row, and each
    /// batch of counts, is written only if the lease is still the source's newest. While the
    /// database is away the verdict waits (up to ``admitPatience``, then the write is refused: a
    /// clip is indexed as incomplete by a later repair rather than beside a newer owner's).
    private func sourceLease(_ lease: Lease) -> SourceLease {
        let (cluster, node, logger) = (store, self.node, logger)
        return SourceLease(node: node, generation: lease.generation) { what, decided in
            Task {
                let deadline = ContinuousClock.now + .seconds(Self.admitPatience)
                while true {
                    do {
                        decided(try await cluster.holds(lease, node: node))
                        return
                    } catch {
                        guard ContinuousClock.now < deadline else {
                            logger.warning("cluster: no verdict on writing \(what) of \(lease.sourceID): \(error)")
                            decided(false)
                            return
                        }
                        try? await Task.sleep(for: .seconds(1))
                    }
                }
            }
        }
    }

    /// How long a clip's row or counts wait for the database's verdict on its lease, in seconds: longer
    /// than an outage that moves nothing (``LeaseKeeper/Options/outageGrace``).
    static let admitPatience = 20

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
    /// The sources of this node's configuration file, added to the cluster once each (``configSourceID(_:)``).
    let initial: [SourceSpec]
    /// The token this node's API takes, which every node of the cluster shares (for ``LiveRelay``).
    let token: String?
    let logger: Logger

    func run() async throws {
        // Detached: the pool must outlive the graceful shutdown (it would end with it, before the
        // leases are released).
        let pool = Task.detached { await store.run() }
        defer { pool.cancel() }
        try await store.migrate()
        // Clips a killed node left without a row are indexed as incomplete before any source starts here.
        await repairAlbum()
        await addConfiguredSources()
        let writing = Task { await outbox.writeQueued() }
        let relaying = Task { await outbox.relay { event in hub.events.publishRelayed(event.type, source: event.source, json: Data(event.body.utf8)) } }
        let holder = HubHolder(hub: hub, store: store, node: settings.node, outbox: outbox, flushSeconds: min(2, settings.lease.leaseSeconds / 3), logger: logger)
        let keeper = LeaseKeeper(node: settings.node, store: store, holder: holder, options: settings.lease, logger: logger)
        logger.info("cluster: node \(settings.node) on \(store.url)")
        let rounds = Task { await keeper.run() }
        let repairs = Task.detached { await repairEvery(Self.repairSeconds) }
        let live = LiveRelay(hub: hub.events, store: store, node: settings.node, token: token, leaseSeconds: settings.lease.leaseSeconds, logger: logger)
        let relays = Task { await live.run() }
        try? await gracefulShutdown()
        relays.cancel()
        repairs.cancel()
        rounds.cancel()
        await keeper.shutdown()
        relaying.cancel()
        writing.cancel()
    }

    /// How often a node repairs the shared album, in seconds.
    static let repairSeconds = 30.0

    /// Repairs the shared album now and then: a clip whose row was refused (its recorder woke up
    /// after its source had moved on) is indexed as incomplete here, as are clips a node left
    /// without a row for any other reason. Clips being recorded or awaiting their verdict are
    /// locked and skipped; several nodes repairing at once index each clip once.
    private func repairEvery(_ seconds: Double) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            guard !Task.isCancelled else { return }
            await repairAlbum()
        }
    }

    /// Adds the configuration file's sources to the cluster, each once: its id names its settings
    /// (``configSourceID(_:)``), so nodes given the same file, and restarts, add nothing twice. A
    /// source removed through the API comes back when a node with it in its file starts again.
    private func addConfiguredSources() async {
        for spec in initial {
            do {
                try hub.check(spec)
                let settings = try spec.storedSettings()
                let id = Self.configSourceID(settings)
                if try await store.addSourceOnce(id: id, settings: settings, paused: spec.paused ?? false) {
                    logger.info("cluster: added source \(id) from the configuration file: \(Album.redactingPassword(spec.input))")
                }
            } catch {
                logger.error("cluster: source \(Album.redactingPassword(spec.input)) of the configuration file: \(error)")
            }
        }
    }

    /// `c-` and 12 hex digits of the settings' FNV-1a hash: the id of a configuration file's source.
    static func configSourceID(_ settings: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in settings.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return "c-" + (String(repeating: "0", count: 16 - hex.count) + hex).prefix(12)
    }

    private func repairAlbum() async {
        do {
            // Blocking I/O (a folder listing, the index, decoding orphans): off the cooperative threads.
            let repaired = try await offCooperativeThreads { [hub] in try hub.album.repair() }
            if !repaired.adopted.isEmpty || !repaired.removed.isEmpty {
                logger.info("cluster: album repair indexed \(repaired.adopted.count) clips without a row, removed \(repaired.removed.count) unreadable")
            }
        } catch {
            logger.warning("cluster: album repair: \(error)")
        }
    }
}
