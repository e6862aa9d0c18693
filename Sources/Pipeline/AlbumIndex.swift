import Foundation
import GRDB

/// Where an album's clip rows and zone and line counts are kept: by default the album's own
/// SQLite file (`index.sqlite`, ``SQLiteAlbumIndex``); the nodes of a cluster, which share one
/// album folder, keep them in the database they share (`spotter serve --database`). The files
/// (clips, records, thumbnails) stay in the album folder either way. Calls may block (a busy
/// index, a database away); failures are ``AlbumError/indexFailed(path:reason:)``.
public protocol AlbumIndex: Sendable {
    /// What errors name the index by: its file, or the database.
    var location: String { get }
    /// Adds a row; returns it with its id. An index that knows the sources' leases (a cluster's)
    /// refuses a complete row recorded under a lease (`source_id`, `node`, `generation`) that is
    /// no longer its source's newest, in the same statement that writes it
    /// (``AlbumError/rowRefused(clip:reason:)``); incomplete rows (repairs) are always written.
    func insert(_ entry: ClipEntry) throws -> ClipEntry
    /// Every row, by clip name (oldest first).
    func allClips() throws -> [ClipEntry]
    /// Every row's id and clip (what a repair compares with the folder), without the rest.
    func clipNames() throws -> [(id: Int64, clip: String)]
    /// Rows matching `query`, newest first.
    func clips(matching query: Album.Query) throws -> [ClipEntry]
    func clip(id: Int64) throws -> ClipEntry?
    /// How many rows there are.
    func clipCount() throws -> Int
    func deleteRow(id: Int64) throws
    /// Whether a row names `clip` (the path relative to the album).
    func contains(clip: String) throws -> Bool
    /// Adds each entry's count to its hour's.
    func addCounts(_ entries: [CountEntry]) throws
    /// Hourly counts of `source` (nil: all) from `from` to before `to` (ISO 8601 UTC; nil: unbounded),
    /// by hour, then source, kind, name, direction.
    func counts(source: String?, from: String?, to: String?) throws -> [CountEntry]
}

/// The album's own SQLite index (WAL, busy timeout), shared with other processes recording into
/// the same folder; ``Album`` opens, checks and repairs the file.
struct SQLiteAlbumIndex: AlbumIndex {
    let database: any DatabaseReader & DatabaseWriter
    let location: String

    private func failed(_ error: Error) -> AlbumError { AlbumError.indexFailed(path: location, reason: Album.reason(error)) }

    func insert(_ entry: ClipEntry) throws -> ClipEntry {
        do { return try database.write { db in try entry.inserted(db) } } catch { throw failed(error) }
    }

    func allClips() throws -> [ClipEntry] {
        do { return try database.read { db in try ClipEntry.order(Column("clip")).fetchAll(db) } } catch { throw failed(error) }
    }

    func clipNames() throws -> [(id: Int64, clip: String)] {
        do {
            return try database.read { db in
                try Row.fetchAll(db, sql: "SELECT id, clip FROM clips").map { (id: $0["id"], clip: $0["clip"]) }
            }
        } catch { throw failed(error) }
    }

    func clips(matching query: Album.Query) throws -> [ClipEntry] {
        do {
            return try database.read { db in
                var request = ClipEntry.order(Column("id").desc).limit(max(0, query.limit))
                if let source = query.source { request = request.filter(Column("source") == source) }
                if let label = query.label {
                    // Labels are stored comma-separated and sorted: match a whole label.
                    request = request.filter(sql: "(',' || labels || ',') LIKE ?", arguments: ["%," + label + ",%"])
                }
                if let from = query.createdFrom { request = request.filter(Column("created_at") >= from) }
                if let before = query.createdBefore { request = request.filter(Column("created_at") < before) }
                if let beforeID = query.beforeID { request = request.filter(Column("id") < beforeID) }
                return try request.fetchAll(db)
            }
        } catch { throw failed(error) }
    }

    func clip(id: Int64) throws -> ClipEntry? {
        do { return try database.read { db in try ClipEntry.fetchOne(db, key: id) } } catch { throw failed(error) }
    }

    func clipCount() throws -> Int {
        do { return try database.read { db in try ClipEntry.fetchCount(db) } } catch { throw failed(error) }
    }

    func deleteRow(id: Int64) throws {
        do { _ = try database.write { db in try ClipEntry.deleteOne(db, key: id) } } catch { throw failed(error) }
    }

    func contains(clip: String) throws -> Bool {
        do { return try database.read { db in try ClipEntry.filter(Column("clip") == clip).fetchCount(db) > 0 } } catch { throw failed(error) }
    }

    func addCounts(_ entries: [CountEntry]) throws {
        do {
            try database.write { db in
                for entry in entries {
                    try db.execute(sql: """
                        INSERT INTO counts (source, hour, kind, name, direction, count) VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT(source, hour, kind, name, direction) DO UPDATE SET count = count + excluded.count
                        """, arguments: [entry.source, entry.hour, entry.kind, entry.name, entry.direction, entry.count])
                }
            }
        } catch { throw failed(error) }
    }

    func counts(source: String?, from: String?, to: String?) throws -> [CountEntry] {
        do {
            return try database.read { db in
                var request = CountEntry.all()
                if let source { request = request.filter(Column("source") == source) }
                if let from { request = request.filter(Column("hour") >= from) }
                if let to { request = request.filter(Column("hour") < to) }
                return try request.order(Column("hour"), Column("source"), Column("kind"), Column("name"), Column("direction")).fetchAll(db)
            }
        } catch { throw failed(error) }
    }
}
