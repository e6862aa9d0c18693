import Foundation
import Logging

/// What a node does with the sources the cluster gives it: the seam between the leases and
/// whatever runs a source (the server's source hub, or a test's recorder).
public protocol LeaseHolder: Sendable {
    /// Starts running the source under `lease` (its settings may have changed since last time).
    ///
    /// - Throws: why it cannot run here (recorded as the source's state).
    func start(_ lease: Lease) async throws
    /// Stops the source: the lease was lost or released, or the source removed or paused. Returns
    /// when the source has stopped (its open clip finished).
    func stop(_ lease: Lease) async
}

/// Keeps one node's share of the cluster's sources: heartbeats, renews its leases, claims
/// unowned or expired sources up to its share, hands surplus over when other nodes have room,
/// and stops what it has lost.
///
/// ```
///            claim (generation + 1)             renew fails: taken over, removed
///   waiting ───────────────────────▶ held ─────────────────────────────────────▶ stopped here
///      ▲                              │ ▲ renew every period/3                    (new owner's
///      └────── release (surplus, ─────┘ └─┘                                        generation)
///              shutdown, paused)
/// ```
///
/// After the database comes back from an outage the node renews first and claims others'
/// expired leases only once it has been connected for a whole lease period, so an outage shorter
/// than ``Options/outageGrace`` moves nothing. A node that cannot renew for `outageGrace` stops
/// its sources (another node may have them by then).
///
/// An actor: one task runs ``run()``; ``held`` and ``shutdown()`` may be called from others.
public actor LeaseKeeper {
    public struct Options: Sendable {
        /// How long a lease lasts without renewal, in seconds (renewed every third of it).
        public var leaseSeconds: Double = 5
        /// How long the node keeps its sources running without reaching the database.
        public var outageGrace: Double = 15
        /// The node's cores.
        public var cores: Int = ProcessInfo.processInfo.activeProcessorCount
        /// The node's capacity for placement, in cores: its share of sources is proportional to
        /// it. Default nil: its cores less the share of the machine other processes use, measured
        /// every round and smoothed over about 30 s (``MachineLoad``), in steps of a tenth.
        public var capacity: Double?
        /// The address other nodes and pages can reach this node's API at.
        public var address: String = ""

        public init() {}
    }

    public let node: String
    let store: ClusterStore
    let holder: any LeaseHolder
    let options: Options
    let logger: Logger
    private var leases: [String: Lease] = [:]
    /// When the last round that reached the database began; nil before the first.
    private var lastContact: ContinuousClock.Instant?
    /// Since when the database has answered without a break.
    private var connectedSince: ContinuousClock.Instant?
    private var stopping = false
    /// The last reading of the machine's counters, and the smoothed share other processes use.
    private var lastReading = MachineLoad.Reading.now()
    private var othersShare: Double?
    /// The capacity this node reported at its last heartbeat.
    private var capacity: Double = 1

    public init(node: String, store: ClusterStore, holder: any LeaseHolder, options: Options = Options(),
                logger: Logger = Logger(label: "spotter.cluster")) {
        self.node = node
        self.store = store
        self.holder = holder
        self.options = options
        self.logger = logger
    }

    /// The leases this node holds now.
    public var held: [Lease] { leases.values.sorted { $0.sourceID < $1.sourceID } }

    /// Runs rounds every third of a lease period until the task is cancelled or ``shutdown()``.
    public func run() async {
        let period = Duration.milliseconds(Int64(options.leaseSeconds * 1000 / 3))
        while !Task.isCancelled && !stopping {
            let began = ContinuousClock.now
            await round()
            try? await Task.sleep(until: began + period)
        }
    }

    /// One round: heartbeat, renew, then claim or hand over.
    func round() async {
        let began = ContinuousClock.now
        do {
            capacity = measureCapacity()
            let (store, node, options, capacity) = (store, node, options, capacity)
            try await database("recording a heartbeat") {
                try await store.heartbeat(node: node, address: options.address, cores: options.cores, load: Self.loadAverage(), capacity: capacity)
            }
            if connectedSince == nil { connectedSince = began }
            lastContact = began
            try await renew()
            if let since = connectedSince, began - since >= .milliseconds(Int64(options.leaseSeconds * 1000)) {
                try await balance()
            }
        } catch {
            connectedSince = nil
            logger.warning("cluster: \(error)")
            let silent = lastContact.map { began - $0 } ?? .zero
            if silent >= .milliseconds(Int64(options.outageGrace * 1000)) && !leases.isEmpty {
                logger.error("cluster: no database for \(silent); stopping \(leases.count) sources another node may have taken")
                for lease in held { await holder.stop(lease) }
                leases.removeAll()
            }
        }
    }

    private func renew() async throws {
        let mine = held
        let (store, node, seconds) = (store, node, options.leaseSeconds)
        let kept = try await database("renewing leases") { try await store.renew(node: node, leases: mine, seconds: seconds) }
        let keptIDs = Set(kept.map(\.lease.sourceID))
        for lease in mine where !keptIDs.contains(lease.sourceID) {
            logger.info("cluster: lost source \(lease.sourceID) (generation \(lease.generation)): taken over or removed")
            leases[lease.sourceID] = nil
            await holder.stop(lease)
        }
        for (lease, running) in kept {
            let before = leases[lease.sourceID]
            if !running {
                leases[lease.sourceID] = nil
                await holder.stop(lease)
                try await store.release(node: node, lease: lease)
            } else if let before, before.settings != lease.settings {
                leases[lease.sourceID] = lease
                await holder.stop(before)
                await begin(lease)
            }
        }
    }

    /// Starts a source and records its state in the cluster (`running`, or `failed: why`).
    private func begin(_ lease: Lease) async {
        var state = "running"
        do { try await holder.start(lease) } catch {
            logger.error("cluster: source \(lease.sourceID) cannot run here: \(error)")
            state = "failed: \(error)"
        }
        let (store, node, recorded) = (store, node, state)
        do { try await database("recording a state") { try await store.setState(recorded, node: node, lease: lease) } } catch {
            logger.warning("cluster: \(error)")
        }
    }

    /// Claims up to this node's share, or hands surplus over to live nodes below theirs.
    private func balance() async throws {
        let (store, node, seconds) = (store, node, options.leaseSeconds)
        let nodes = try await database("listing nodes") { try await store.nodes(within: seconds).filter(\.live) }
        let wanted = try await database("counting sources") { try await store.runningSourceCount() }
        var capacities = nodes.map { ($0.name, $0.capacity) }
        if !capacities.contains(where: { $0.0 == node }) { capacities.append((node, capacity)) }
        let shares = Self.shares(of: wanted, capacities: capacities)
        func share(_ name: String) -> Int { shares[name] ?? 0 }
        let mine = share(node)
        if leases.count < mine {
            let count = mine - leases.count
            let claimed = try await database("claiming sources") { try await store.claim(node: node, count: count, seconds: seconds) }
            for (lease, previous) in claimed {
                if let previous, previous != node { logger.info("cluster: took over source \(lease.sourceID) from \(previous)") }
                leases[lease.sourceID] = lease
                await begin(lease)
            }
        } else if leases.count > mine {
            // Only what is above the share rounded up goes, so that the small changes measured
            // capacities make from round to round move nothing; and one source to each live node
            // that has none.
            let roundedUp = Int((Self.quotas(of: wanted, capacities: capacities)[node] ?? 0).rounded(.up))
            var surplus = max(0, leases.count - max(mine, roundedUp))
            if surplus == 0 && leases.count > 1 {
                surplus = min(leases.count - mine, nodes.filter { $0.name != node && $0.sources == 0 && share($0.name) > 0 }.count)
            }
            let room = nodes.filter { $0.name != node }.map { max(0, share($0.name) - $0.sources) }.reduce(0, +)
            for lease in held.suffix(min(room, surplus)) {
                logger.info("cluster: handing source \(lease.sourceID) over (this node holds more than its share)")
                leases[lease.sourceID] = nil
                await holder.stop(lease)
                try await store.release(node: node, lease: lease)
            }
        }
    }

    /// Splits `count` sources over nodes in proportion to their capacities (largest remainders,
    /// ties to the first name), so the shares add up to `count` and every node computes the same
    /// split from the same rows; while there are as many sources as nodes, each node gets at least
    /// one (taken from the largest share): a node that looks busy (nodes sharing a machine count
    /// each other's work) still takes part.
    public static func shares(of count: Int, capacities: [(name: String, capacity: Double)]) -> [String: Int] {
        let nodes = capacities.sorted { $0.name < $1.name }
        guard !nodes.isEmpty, count > 0 else { return Dictionary(nodes.map { ($0.name, 0) }, uniquingKeysWith: { a, _ in a }) }
        let exact = quotas(of: count, capacities: nodes)
        let quotas = nodes.map { exact[$0.name] ?? 0 }
        var shares = quotas.map { Int($0.rounded(.down)) }
        let byRemainder = quotas.indices.sorted { (quotas[$0] - Double(shares[$0]), -$0) > (quotas[$1] - Double(shares[$1]), -$1) }
        for index in byRemainder.prefix(count - shares.reduce(0, +)) { shares[index] += 1 }
        if count >= nodes.count {
            for index in shares.indices where shares[index] == 0 {
                let largest = shares.indices.max { (shares[$0], -$0) < (shares[$1], -$1) }!
                shares[largest] -= 1
                shares[index] = 1
            }
        }
        return Dictionary(zip(nodes.map(\.name), shares), uniquingKeysWith: { a, _ in a })
    }

    /// Each node's exact quota of `count` sources, in proportion to its capacity (equal quotas
    /// when no node has any): what ``shares(of:capacities:)`` rounds.
    static func quotas(of count: Int, capacities: [(name: String, capacity: Double)]) -> [String: Double] {
        let total = capacities.map { max(0, $0.capacity) }.reduce(0, +)
        return Dictionary(capacities.map { node in
            (node.name, total > 0 ? Double(count) * max(0, node.capacity) / total : Double(count) / Double(capacities.count))
        }, uniquingKeysWith: { a, _ in a })
    }

    /// Runs one database call of a round with a time limit of half a lease, so a round that waits
    /// on an unreachable database ends in time for the next (after an outage every owner renews
    /// within a round of the database's return).
    private func database<Result: Sendable>(_ doing: String, _ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        try await withTimeLimit(.milliseconds(Int64(options.leaseSeconds * 500)), doing: doing, body)
    }

    /// Stops every source here and releases its lease so other nodes take it at once, then
    /// removes the node from the cluster (SIGTERM's path).
    public func shutdown() async {
        stopping = true
        for lease in held {
            await holder.stop(lease)
            leases[lease.sourceID] = nil
            do { try await store.release(node: node, lease: lease) } catch { logger.warning("cluster: \(error)") }
        }
        do { try await store.leave(node: node) } catch { logger.warning("cluster: \(error)") }
    }

    /// This node's capacity in cores (``Options/capacity``): its cores less the smoothed share of
    /// the machine other processes used since the last round (measured once a round).
    private func measureCapacity() -> Double {
        if let fixed = options.capacity { return fixed }
        if let now = MachineLoad.Reading.now() {
            if let last = lastReading, let share = now.othersShare(since: last) {
                let weight = min(1, options.leaseSeconds / 3 / 30)
                othersShare = othersShare.map { $0 + weight * (share - $0) } ?? share
            }
            lastReading = now
        }
        let others = ((othersShare ?? 0) * 10).rounded() / 10
        return Double(options.cores) * max(0.1, 1 - others)
    }

    /// The one-minute load average divided by the cores (0 where /proc is missing).
    static func loadAverage() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8),
              let first = text.split(separator: " ").first, let load = Double(first) else { return 0 }
        return load / Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
    }
}
