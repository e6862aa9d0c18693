import Dispatch
import Foundation
import Pipeline
import PostgresNIO
import Synchronization

/// The album index of a cluster: the clip rows and hourly counts of the album folder every node
/// shares, kept in the cluster's PostgreSQL (tables `clips` and `counts`, schema migration 3)
/// rather than in a SQLite file on a shared filesystem, where SQLite's locks are not safe. Each
/// row keeps its clip's whole ``ClipEntry`` (the same JSON as the record beside the clip) and the
/// columns queries filter on.
///
/// ``Album`` calls block; each call runs its statement on threads of its own (never on Swift's
/// cooperative threads, which the caller may be holding) and waits for it.
///
/// ```swift
/// let album = try Album(directory: folder, index: ClusterAlbumIndex(store: store))
/// ```
public final class ClusterAlbumIndex: AlbumIndex {
    let store: ClusterStore

    public init(store: ClusterStore) {
        self.store = store
    }

    public var location: String { "the cluster's database \(store.url)" }

    public func insert(_ entry: ClipEntry) throws -> ClipEntry {
        var stored = entry
        stored.id = nil
        let body = try encoded(stored)
        let (store, e) = (store, entry)
        // A complete clip recorded under a lease is written only while that lease is the source's
        // newest, checked in the same statement (the row lock makes a concurrent claim wait).
        let fenced = !entry.incomplete && entry.sourceID != nil && entry.node != nil && entry.generation != nil
        let row: (id: Int64, existing: String?)? = try blocking("adding clip \(entry.clip)") {
            // Several nodes repairing at once may index one clip: the first row stays.
            let rows = try await store.client.query("""
                WITH added AS (
                    INSERT INTO clips (clip, source, labels, created_at, incomplete, source_id, node, generation, body)
                    SELECT \(e.clip), \(e.source), \(e.labels), \(e.createdAt), \(e.incomplete), \(e.sourceID), \(e.node), \(e.generation), \(body)
                    WHERE NOT \(fenced) OR EXISTS (
                        SELECT 1 FROM sources WHERE id = \(e.sourceID) AND generation = \(e.generation) AND owner = \(e.node) FOR SHARE)
                    ON CONFLICT (clip) DO NOTHING RETURNING id)
                SELECT id, NULL::text FROM added UNION ALL SELECT id, body FROM clips WHERE clip = \(e.clip) LIMIT 1
                """, logger: store.logger)
            for try await (id, existing) in rows.decode((Int64, String?).self) { return (id, existing) }
            return nil
        }
        guard let (id, existing) = row else {
            throw AlbumError.rowRefused(clip: entry.clip, reason: "source \(entry.sourceID ?? "") has a newer lease than generation "
                                        + "\(entry.generation ?? 0) of node \(entry.node ?? "")")
        }
        if let existing {
            // Indexed already (another node's repair): that row stays and is the answer.
            stored = (try? JSONDecoder().decode(ClipEntry.self, from: Data(existing.utf8))) ?? stored
        }
        stored.id = id
        return stored
    }

    public func allClips() throws -> [ClipEntry] {
        let store = store
        return try blocking("listing clips") {
            try await Self.entries(store.client.query("SELECT id, body FROM clips ORDER BY clip", logger: store.logger))
        }
    }

    public func clipNames() throws -> [(id: Int64, clip: String)] {
        let store = store
        return try blocking("listing clips") {
            var names: [(id: Int64, clip: String)] = []
            for try await (id, clip) in try await store.client.query("SELECT id, clip FROM clips", logger: store.logger).decode((Int64, String).self) {
                names.append((id, clip))
            }
            return names
        }
    }

    public func clips(matching query: Album.Query) throws -> [ClipEntry] {
        let store = store
        let label = query.label.map { "%," + $0 + ",%" }
        return try blocking("listing clips") {
            try await Self.entries(store.client.query("""
                SELECT id, body FROM clips
                WHERE (\(query.source)::text IS NULL OR source = \(query.source))
                  AND (\(label)::text IS NULL OR (',' || labels || ',') LIKE \(label))
                  AND (\(query.createdFrom)::text IS NULL OR created_at >= \(query.createdFrom))
                  AND (\(query.createdBefore)::text IS NULL OR created_at < \(query.createdBefore))
                  AND (\(query.beforeID)::int8 IS NULL OR id < \(query.beforeID))
                ORDER BY id DESC LIMIT \(Int64(max(0, min(query.limit, Int(Int32.max)))))
                """, logger: store.logger))
        }
    }

    public func clip(id: Int64) throws -> ClipEntry? {
        let store = store
        return try blocking("reading clip \(id)") {
            try await Self.entries(store.client.query("SELECT id, body FROM clips WHERE id = \(id)", logger: store.logger)).first
        }
    }

    public func clipCount() throws -> Int {
        let store = store
        return try blocking("counting clips") {
            for try await count in try await store.client.query("SELECT count(*) FROM clips", logger: store.logger).decode(Int64.self) {
                return Int(count)
            }
            return 0
        }
    }

    public func deleteRow(id: Int64) throws {
        let store = store
        try blocking("removing clip \(id)") {
            _ = try await store.client.query("DELETE FROM clips WHERE id = \(id)", logger: store.logger)
        }
    }

    public func contains(clip: String) throws -> Bool {
        let store = store
        return try blocking("looking up clip \(clip)") {
            for try await _ in try await store.client.query("SELECT 1 FROM clips WHERE clip = \(clip)", logger: store.logger) { return true }
            return false
        }
    }

    public func addCounts(_ entries: [CountEntry]) throws {
        let store = store
        try blocking("adding counts") {
            try await store.client.withTransaction(logger: store.logger) { connection in
                for e in entries {
                    try await connection.query("""
                        INSERT INTO counts (source, hour, kind, name, direction, count)
                        VALUES (\(e.source), \(e.hour), \(e.kind), \(e.name), \(e.direction), \(Int64(e.count)))
                        ON CONFLICT (source, hour, kind, name, direction) DO UPDATE SET count = counts.count + excluded.count
                        """, logger: store.logger)
                }
            }
        }
    }

    public func counts(source: String?, from: String?, to: String?) throws -> [CountEntry] {
        let store = store
        return try blocking("reading counts") {
            let rows = try await store.client.query("""
                SELECT source, hour, kind, name, direction, count FROM counts
                WHERE (\(source)::text IS NULL OR source = \(source)) AND (\(from)::text IS NULL OR hour >= \(from))
                  AND (\(to)::text IS NULL OR hour < \(to))
                ORDER BY hour, source, kind, name, direction
                """, logger: store.logger)
            var counts: [CountEntry] = []
            for try await (source, hour, kind, name, direction, count) in rows.decode((String, String, String, String, String, Int64).self) {
                counts.append(CountEntry(source: source, hour: hour, kind: kind, name: name, direction: direction, count: Int(count)))
            }
            return counts
        }
    }

    // MARK: Rows

    private func encoded(_ entry: ClipEntry) throws -> String {
        do { return String(decoding: try JSONEncoder().encode(entry), as: UTF8.self) } catch {
            throw AlbumError.indexFailed(path: location, reason: "clip \(entry.clip) cannot be encoded: \(error)")
        }
    }

    private static func entries(_ rows: PostgresRowSequence) async throws -> [ClipEntry] {
        var entries: [ClipEntry] = []
        for try await (id, body) in rows.decode((Int64, String).self) {
            var entry = try JSONDecoder().decode(ClipEntry.self, from: Data(body.utf8))
            entry.id = id
            entries.append(entry)
        }
        return entries
    }

    /// Runs `body` against the database (through ``ClusterStore``'s time limit and error mapping)
    /// and waits for it; failures are ``AlbumError/indexFailed(path:reason:)``.
    private func blocking<Result: Sendable>(_ doing: String, _ body: @escaping @Sendable () async throws -> Result) throws -> Result {
        let outcome = Mutex<Swift.Result<Result, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let store = store
        Task(executorPreference: Self.executor) {
            let result: Swift.Result<Result, any Error>
            do { result = .success(try await store.perform(doing, body)) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        switch outcome.withLock({ $0 })! {
        case .success(let value): return value
        case .failure(let error): throw AlbumError.indexFailed(path: location, reason: "\(error)")
        }
    }

    private static let executor = QueueExecutor()
}

/// A task executor on a Dispatch queue: the tasks the album's blocking calls wait for run here,
/// so a caller holding one of Swift's few cooperative threads cannot starve them.
private final class QueueExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "spotter.cluster.album", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
