import Cluster
import Foundation
import Logging
import Synchronization
import Testing

/// Records what a node was told to run, and notices two nodes running one source at once.
final class RecordingHolder: LeaseHolder {
    let node: String
    let board: Board

    /// What every node of a test runs now, and every overlap seen.
    final class Board: Sendable {
        let running = Mutex<[String: String]>([:])
        let overlaps = Mutex<[String]>([])
        let stops = Mutex<[String: Int]>([:])

        func owner(_ source: String) -> String? { running.withLock { $0[source] } }
        func count(on node: String) -> Int { running.withLock { $0.values.filter { $0 == node }.count } }
        var total: Int { running.withLock { $0.count } }
    }

    init(node: String, board: Board) {
        self.node = node
        self.board = board
    }

    func start(_ lease: Lease) async {
        board.running.withLock { running in
            if let other = running[lease.sourceID], other != node { board.overlaps.withLock { $0.append("\(lease.sourceID) on \(other) and \(node)") } }
            running[lease.sourceID] = node
        }
    }

    func stop(_ lease: Lease) async {
        board.running.withLock { running in
            if running[lease.sourceID] == node { running[lease.sourceID] = nil }
        }
        board.stops.withLock { $0[node, default: 0] += 1 }
    }
}

/// A running store with its pool's task.
struct Connected {
    let store: ClusterStore
    let task: Task<Void, Never>

    init(_ url: String) throws {
        let store = ClusterStore(url: try DatabaseURL(url), logger: quiet)
        self.store = store
        task = Task { await store.run() }
    }
}

/// A throwaway PostgreSQL and `count` stores connected to it, the schema migrated through the first.
struct TestCluster {
    let server: ThrowawayPostgres
    let nodes: [Connected]
    var store: ClusterStore { nodes[0].store }

    init(nodes count: Int = 1) async throws {
        let server = try ThrowawayPostgres()
        var nodes: [Connected] = []
        do {
            for _ in 0..<count { nodes.append(try Connected(server.url)) }
            try await nodes[0].store.migrate()
        } catch {
            nodes.forEach { $0.task.cancel() }
            server.stop()
            throw error
        }
        (self.server, self.nodes) = (server, nodes)
    }

    func stop() {
        nodes.forEach { $0.task.cancel() }
        server.stop()
    }
}

func waitUntil(seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(100))
    }
    return try await condition()
}

func psqlRows(_ server: ThrowawayPostgres, _ sql: String) throws -> [String] {
    try server.run("psql", ["-h", "127.0.0.1", "-p", "\(server.port)", "-U", "spotter", "-d", "spotter", "-At", "-F", "|", "-c", sql])
        .split(separator: "\n").map(String.init)
}

let settings = #"{"input":"video.mp4"}"#
let quiet: Logger = {
    var logger = Logger(label: "spotter.cluster.test")
    logger.logLevel = .error
    return logger
}()

@Suite("Leases on a real PostgreSQL")
struct LeaseTests {
    @Test("the schema is created once when several nodes start at the same moment")
    func migrationWhenNodesStartTogether() async throws {
        let server = try ThrowawayPostgres()
        defer { server.stop() }
        let stores = try (0..<4).map { _ in try Connected(server.url) }
        defer { stores.forEach { $0.task.cancel() } }
        let versions = try await withThrowingTaskGroup(of: Int.self) { group in
            for connected in stores { group.addTask { try await connected.store.migrate() } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(Set(versions).count == 1)
        #expect(try psqlRows(server, "SELECT count(*), max(version) FROM spotter_schema") == ["\(versions[0])|\(versions[0])"])
        #expect(try psqlRows(server, "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('nodes','sources','events')") == ["3"])
    }

    @Test("six sources spread over three nodes; a killed node's sources move to the others and its writes are refused")
    func spreadAndTakeOver() async throws {
        let cluster = try await TestCluster(nodes: 3)
        defer { cluster.stop() }
        let (server, nodes) = (cluster.server, cluster.nodes)
        let board = RecordingHolder.Board()
        var options = LeaseKeeper.Options()
        options.leaseSeconds = 2
        options.cores = 2
        for _ in 0..<6 { _ = try await nodes[0].store.addSource(settings: settings) }
        let keepers = nodes.enumerated().map { index, connected in
            LeaseKeeper(node: "n\(index + 1)", store: connected.store, holder: RecordingHolder(node: "n\(index + 1)", board: board), options: options,
                        logger: quiet)
        }
        let runs = keepers.map { keeper in Task { await keeper.run() } }
        defer { runs.forEach { $0.cancel() } }

        let spread = try await waitUntil(seconds: 30) {
            board.total == 6 && (1...3).allSatisfy { board.count(on: "n\($0)") >= 1 }
        }
        #expect(spread, "running: \(board.running.withLock { $0 })")
        let owners = try psqlRows(server, "SELECT owner, count(*) FROM sources GROUP BY owner ORDER BY owner")
        #expect(owners.count == 3, "owners in the database: \(owners)")

        // kill the node with the most sources: its task ends without releasing anything.
        let victim = (0..<3).max { board.count(on: "n\($0 + 1)") < board.count(on: "n\($1 + 1)") }!
        runs[victim].cancel()
        let lost = await keepers[victim].held
        #expect(!lost.isEmpty)
        let killedAt = ContinuousClock.now
        let moved = try await waitUntil(seconds: 15) {
            let rows = try psqlRows(server, "SELECT count(*) FROM sources WHERE owner <> 'n\(victim + 1)' AND lease_expires > now()")
            return rows == ["6"]
        }
        let owned = try psqlRows(server, "SELECT id, owner FROM sources")
        #expect(moved, "sources still with the killed node after 15 s: \(owned)")
        #expect(ContinuousClock.now - killedAt < .seconds(15))
        for lease in lost {
            let now = try psqlRows(server, "SELECT generation FROM sources WHERE id = '\(lease.sourceID)'")
            #expect(now.first.flatMap { Int64($0) }.map { $0 > lease.generation } == true, "\(lease.sourceID) generation \(now) after \(lease.generation)")
            await #expect(throws: ClusterError.fenced(source: lease.sourceID, generation: lease.generation)) {
                try await nodes[victim].store.append(type: "clip_finished", body: "{}", node: "n\(victim + 1)", lease: lease)
            }
        }
        #expect(try psqlRows(server, "SELECT count(*) FROM events WHERE node = 'n\(victim + 1)'") == ["0"])
        #expect(board.overlaps.withLock { $0 }.filter { !$0.hasSuffix(" n\(victim + 1)") && !$0.contains("on n\(victim + 1) ") }.isEmpty)
    }

    @Test("placement gives each node sources in proportion to its capacity (cores less what other processes use)")
    func placementFollowsCapacity() async throws {
        let cluster = try await TestCluster(nodes: 2)
        defer { cluster.stop() }
        let board = RecordingHolder.Board()
        for _ in 0..<5 { _ = try await cluster.store.addSource(settings: settings) }
        let keepers = zip(["busy", "free"], [0.5, 2.0]).enumerated().map { index, node in
            var options = LeaseKeeper.Options()
            options.leaseSeconds = 2
            options.capacity = node.1
            return LeaseKeeper(node: node.0, store: cluster.nodes[index].store, holder: RecordingHolder(node: node.0, board: board), options: options,
                               logger: quiet)
        }
        let runs = keepers.map { keeper in Task { await keeper.run() } }
        defer { runs.forEach { $0.cancel() } }
        // Shares of 5 by 0.5 : 2.0, rounded up: 1 and 4.
        #expect(try await waitUntil(seconds: 30) { board.count(on: "busy") == 1 && board.count(on: "free") == 4 },
                "busy \(board.count(on: "busy")), free \(board.count(on: "free"))")
        let capacities = try await cluster.store.nodes(within: 10).map { "\($0.name) \($0.capacity)" }
        #expect(capacities == ["busy 0.5", "free 2.0"])
        #expect(board.overlaps.withLock { $0 }.isEmpty)
    }

    @Test("a node that was paused stops what it lost at its first round after waking, and writes nothing under old generations")
    func pausedNodeIsFenced() async throws {
        let cluster = try await TestCluster(nodes: 2)
        defer { cluster.stop() }
        let (server, a, b) = (cluster.server, cluster.nodes[0], cluster.nodes[1])
        let board = RecordingHolder.Board()
        var options = LeaseKeeper.Options()
        options.leaseSeconds = 2
        for _ in 0..<2 { _ = try await a.store.addSource(settings: settings) }
        let keeperA = LeaseKeeper(node: "a", store: a.store, holder: RecordingHolder(node: "a", board: board), options: options, logger: quiet)
        let keeperB = LeaseKeeper(node: "b", store: b.store, holder: RecordingHolder(node: "b", board: board), options: options, logger: quiet)
        // a alone for a lease period and more: it takes both.
        let runA = Task { await keeperA.run() }
        #expect(try await waitUntil(seconds: 30) { board.count(on: "a") == 2 })
        // a "pauses" (its loop stops, as under SIGSTOP); b arrives and takes both once they expire.
        runA.cancel()
        let before = await keeperA.held
        let runB = Task { await keeperB.run() }
        defer { runB.cancel() }
        #expect(try await waitUntil(seconds: 30) { try psqlRows(server, "SELECT count(*) FROM sources WHERE owner = 'b' AND lease_expires > now()") == ["2"] })
        // a wakes: still believes it runs both until its first round.
        #expect(board.overlaps.withLock { $0 }.count == 2)
        for lease in before {
            await #expect(throws: ClusterError.fenced(source: lease.sourceID, generation: lease.generation)) {
                try await a.store.append(type: "clip_started", body: "{}", node: "a", lease: lease)
            }
        }
        let woke = Task { await keeperA.run() }
        defer { woke.cancel() }
        #expect(try await waitUntil(seconds: 3 * options.leaseSeconds) { await keeperA.held.isEmpty })
        #expect(board.count(on: "b") == 2)
        #expect(try psqlRows(server, "SELECT count(*) FROM events WHERE node = 'a'") == ["0"])
    }

    @Test("a graceful shutdown hands the sources over at once, not after the lease expires")
    func shutdownHandsOver() async throws {
        let cluster = try await TestCluster(nodes: 2)
        defer { cluster.stop() }
        let (server, a, b) = (cluster.server, cluster.nodes[0], cluster.nodes[1])
        let board = RecordingHolder.Board()
        var options = LeaseKeeper.Options()
        options.leaseSeconds = 30
        for _ in 0..<3 { _ = try await a.store.addSource(settings: settings) }
        var quick = options
        quick.leaseSeconds = 2
        // a claims with long leases (30 s); b waits its connected period with a short one.
        let keeperA = LeaseKeeper(node: "a", store: a.store, holder: RecordingHolder(node: "a", board: board), options: quick, logger: quiet)
        let runA = Task { await keeperA.run() }
        #expect(try await waitUntil(seconds: 30) { board.count(on: "a") == 3 })
        runA.cancel()
        _ = try await a.store.renew(node: "a", leases: await keeperA.held, seconds: 30)
        let keeperB = LeaseKeeper(node: "b", store: b.store, holder: RecordingHolder(node: "b", board: board), options: quick, logger: quiet)
        let runB = Task { await keeperB.run() }
        defer { runB.cancel() }
        // b has been connected for more than a lease period: it may claim from its next round on.
        try await Task.sleep(for: .seconds(3))
        await keeperA.shutdown()
        let handedAt = ContinuousClock.now
        #expect(try await waitUntil(seconds: 15) { board.count(on: "b") == 3 })
        #expect(ContinuousClock.now - handedAt < .seconds(15), "leases lasted 30 s: b took them because a released them")
        #expect(board.overlaps.withLock { $0 }.isEmpty)
        #expect(try psqlRows(server, "SELECT count(*) FROM nodes WHERE name = 'a'") == ["0"])
    }

    @Test("a database outage shorter than the grace moves nothing")
    func outageMovesNothing() async throws {
        let cluster = try await TestCluster(nodes: 2)
        defer { cluster.stop() }
        let (server, nodes) = (cluster.server, cluster.nodes)
        let board = RecordingHolder.Board()
        var options = LeaseKeeper.Options()
        options.leaseSeconds = 2
        options.outageGrace = 15
        for _ in 0..<4 { _ = try await nodes[0].store.addSource(settings: settings) }
        let keepers = nodes.enumerated().map { index, connected in
            LeaseKeeper(node: "n\(index)", store: connected.store, holder: RecordingHolder(node: "n\(index)", board: board), options: options, logger: quiet)
        }
        let runs = keepers.map { keeper in Task { await keeper.run() } }
        defer { runs.forEach { $0.cancel() } }
        #expect(try await waitUntil(seconds: 30) { board.count(on: "n0") == 2 && board.count(on: "n1") == 2 })
        let before = try psqlRows(server, "SELECT id, owner, generation FROM sources ORDER BY id")
        let stopsBefore = board.stops.withLock { $0 }
        try server.kill()
        try await Task.sleep(for: .seconds(4))
        try server.restart()
        // after reconnecting, each renews first; nobody takes another's expired lease.
        #expect(try await waitUntil(seconds: 20) {
            try psqlRows(server, "SELECT count(*) FROM sources WHERE lease_expires > now()") == ["4"]
        })
        try await Task.sleep(for: .seconds(2 * options.leaseSeconds))
        #expect(try psqlRows(server, "SELECT id, owner, generation FROM sources ORDER BY id") == before)
        #expect(board.stops.withLock { $0 } == stopsBefore)
        #expect(board.overlaps.withLock { $0 }.isEmpty)
    }
}

@Suite("The event outbox")
struct OutboxTests {
    @Test("a reader never skips an event whose transaction commits after a later id's")
    func commitOrder() async throws {
        let cluster = try await TestCluster()
        defer { cluster.stop() }
        let (server, store) = (cluster.server, cluster.store)
        // a slow writer takes id 1 and keeps its transaction open (psql reading its input)...
        let slow = try server.session()
        slow.send("BEGIN;\nINSERT INTO events (node, type, body) VALUES ('slow', 'first', '{}');\n")
        #expect(try await waitUntil(seconds: 30) {
            try psqlRows(server, "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'events' AND l.mode = 'RowExclusiveLock'") != ["0"]
        })
        // ...while a fast one takes id 2 and commits at once.
        try await store.append(type: "second", body: "{}", node: "fast", lease: nil)
        #expect(try psqlRows(server, "SELECT type FROM events ORDER BY id") == ["second"], "the fast write is committed, the slow one not yet")
        let early = try await store.events(after: .start)
        #expect(early.events.isEmpty, "id 2 must wait for the transaction holding id 1: \(early.events)")
        slow.send("COMMIT;\n")
        try slow.finish()
        let late = try await store.events(after: early.cursor)
        #expect(late.events.map(\.type) == ["first", "second"])
        #expect(late.events.map(\.id) == [1, 2])
        let after = try await store.events(after: late.cursor)
        #expect(after.events.isEmpty)
    }

    @Test("events are read in transaction order across a power of ten of transaction ids (ordered as numbers, not text), in small batches")
    func transactionIdsOrderedAsNumbers() async throws {
        let cluster = try await TestCluster()
        defer { cluster.stop() }
        let (server, store) = (cluster.server, cluster.store)
        // Use up transaction ids to just below the next power of ten: "1000" sorts before "998" as text.
        let now = try #require(UInt64(try psqlRows(server, "SELECT pg_current_xact_id()").first ?? ""))
        var boundary: UInt64 = 10
        while boundary <= now + 3 { boundary *= 10 }
        _ = try psqlRows(server, "DO $$ BEGIN FOR i IN 1..\(boundary - now - 3) LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$")
        for n in 1...6 { try await store.append(type: "e\(n)", body: "{}", node: "a", lease: nil) }
        let written = try psqlRows(server, "SELECT tx::text FROM events ORDER BY id").compactMap { UInt64($0) }
        #expect(written.first! < boundary && written.last! >= boundary, "the writes straddle \(boundary): \(written)")
        var cursor = OutboxCursor.start
        var read: [String] = []
        for _ in 0..<10 {
            let batch = try await store.events(after: cursor, limit: 2)
            read += batch.events.map(\.type)
            cursor = batch.cursor
        }
        #expect(read == (1...6).map { "e\($0)" })
        #expect(try await store.outboxEnd() == cursor, "the end is the newest event, by number")
    }
}

@Suite("A node's events through the outbox")
struct EventOutboxTests {
    @Test("events published while the database is down are written in order after it is back, and relayed to the other node; a lost lease's are refused")
    func queuedThroughAnOutageAndRelayed() async throws {
        let cluster = try await TestCluster(nodes: 2)
        defer { cluster.stop() }
        let (server, writer, reader) = (cluster.server, cluster.nodes[0], cluster.nodes[1])
        let id = try await writer.store.addSource(settings: settings)
        let lease = try #require(try await writer.store.claim(node: "a", count: 1, seconds: 30).first?.lease)
        let (found, missing) = (try await writer.store.source(id), try await writer.store.source("s999"))
        #expect(found?.node == "a" && found?.generation == lease.generation && missing == nil)
        let outbox = EventOutbox(store: writer.store, node: "a", logger: quiet)
        let other = EventOutbox(store: reader.store, node: "b", logger: quiet)
        let received = Mutex<[ClusterEvent]>([])
        let start = try await reader.store.outboxEnd()
        let relaying = Task { await other.relay(from: start) { event in received.withLock { $0.append(event) } } }
        let writing = Task { await outbox.writeQueued() }
        defer { relaying.cancel(); writing.cancel() }
        outbox.hold(lease)
        outbox.enqueue(type: "clip_started", source: lease.sourceID, json: Data(#"{"n":1}"#.utf8))
        #expect(try await waitUntil(seconds: 15) { received.withLock { $0.count } == 1 }, "relayed while the database is up")

        try server.kill()
        for n in 2...4 { outbox.enqueue(type: "clip_finished", source: lease.sourceID, json: Data(#"{"n":\#(n)}"#.utf8)) }
        outbox.enqueue(type: "clip_deleted", source: nil, json: Data(#"{"n":5}"#.utf8))
        try await Task.sleep(for: .seconds(2))
        #expect(outbox.pending == 4, "queued while the database is down")
        try server.restart()
        #expect(try await waitUntil(seconds: 20) { received.withLock { $0.count } == 5 })
        #expect(received.withLock { $0.map(\.body) } == (1...5).map { #"{"n":\#($0)}"# }, "in the order published")
        #expect(received.withLock { $0.allSatisfy { $0.node == "a" } })
        #expect(outbox.totals.written == 5 && outbox.pending == 0)

        // Another node takes the source (its lease expired): what "a" still sends under the old
        // generation is refused.
        _ = try psqlRows(server, "UPDATE sources SET lease_expires = now() - interval '1 second'")
        let taken = try #require(try await reader.store.claim(node: "b", count: 1, seconds: 30).first?.lease)
        #expect(taken.generation > lease.generation)
        outbox.enqueue(type: "clip_finished", source: lease.sourceID, json: Data(#"{"n":6}"#.utf8))
        await outbox.flush(within: 10)
        #expect(outbox.totals.fenced == 1)
        // Events of a source this node no longer holds are not even queued.
        outbox.release(lease.sourceID)
        outbox.enqueue(type: "clip_finished", source: lease.sourceID, json: Data(#"{"n":7}"#.utf8))
        #expect(outbox.pending == 0)
        #expect(try psqlRows(server, "SELECT count(*) FROM events") == ["5"])
    }
}

@Suite("Database URLs")
struct DatabaseURLTests {
    @Test func parsesUserHostPortDatabase() throws {
        let url = try DatabaseURL("postgres://spot%40ter:se%3Acret@db.example:6543/cams")
        #expect(url.user == "spot@ter" && url.password == "se:cret" && url.host == "db.example" && url.port == 6543 && url.database == "cams")
        #expect(url.description == "postgres://spot@ter:***@db.example:6543/cams")
        #expect(try DatabaseURL("postgresql://u@h/d").port == 5432)
    }

    @Test func takesThePasswordFromPGPASSWORDWhenTheURLHasNone() throws {
        let environment = ["PGPASSWORD": "from-env"]
        #expect(try DatabaseURL("postgres://u@h/d", environment: environment).password == "from-env")
        #expect(try DatabaseURL("postgres://u:given@h/d", environment: environment).password == "given")
        #expect(try DatabaseURL("postgres://u@h/d", environment: [:]).password == nil)
        #expect(try DatabaseURL("postgres://u@h/d", environment: environment).description == "postgres://u:***@h:5432/d")
    }

    @Test(arguments: [
        ("mysql://u@h/d", "scheme"), ("postgres://h/d", "no user"), ("postgres://u@h", "no database"), ("postgres://u:secret@h:99999/d", "port"),
    ])
    func refusesWithReason(text: String, reason: String) {
        #expect {
            try DatabaseURL(text)
        } throws: { error in
            let message = "\(error)"
            return message.contains(reason) && !message.contains("secret")
        }
    }
}

@Suite("Sources added once")
struct AddOnceTests {
    @Test("nodes adding a configuration file's source at the same moment add one row")
    func configuredSourceAddedOnce() async throws {
        let cluster = try await TestCluster(nodes: 3)
        defer { cluster.stop() }
        let added = try await withThrowingTaskGroup(of: Bool.self) { group in
            for node in cluster.nodes { group.addTask { try await node.store.addSourceOnce(id: "c-0123456789ab", settings: settings) } }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(added.filter { $0 }.count == 1)
        #expect(try await cluster.store.sources().map(\.id) == ["c-0123456789ab"])
        #expect(try await !cluster.store.addSourceOnce(id: "c-0123456789ab", settings: #"{"input":"other.mp4"}"#))
        #expect(try await cluster.store.source("c-0123456789ab")?.settings == settings)
    }
}
