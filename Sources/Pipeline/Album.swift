import Foundation
import GRDB
import Imaging
import Media
#if canImport(Glibc)
import Glibc
import Synchronization
#endif

/// One recorded clip, as the album's index stores it.
public struct ClipEntry: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "clips"

    public var id: Int64?
    /// The input the clip was cut from: an absolute path or a URL.
    public var source: String
    /// Path relative to the album.
    public var clip: String
    public var thumbnail: String?
    /// Source seconds of the first and last frame.
    public var start: Double
    public var end: Double
    public var duration: Double
    public var frames: Int
    /// Comma-separated labels seen in the clip, sorted.
    public var labels: String
    public var bestScore: Double
    /// When the clip was written (ISO 8601, UTC).
    public var createdAt: String
    /// The recording was cut short (killed process, full disk) and the clip was indexed later from
    /// what could be decoded; labels and scores are then unknown.
    public var incomplete: Bool = false
    /// Wall-clock time of the first and last frame (ISO 8601 with the local offset, to the
    /// millisecond); nil for clips recorded before these were kept, or indexed from what could be
    /// decoded.
    public var startedAt: String?
    public var endedAt: String?
    /// The tracked objects that opened or kept the clip (stored as JSON); empty for clips
    /// recorded before tracking, or indexed from what could be decoded.
    public var objects: [ClipObject]
    /// The server's id of the source (`s1`); nil for clips of `spotter record` and older albums.
    public var sourceID: String?
    /// In a cluster: the node that recorded the clip and the lease generation it ran the source under.
    public var node: String?
    public var generation: Int64?

    enum CodingKeys: String, CodingKey {
        case id, source, clip, thumbnail, start, end, duration, frames, labels, incomplete, objects
        case bestScore = "best_score"
        case createdAt = "created_at"
        case startedAt = "started_at"
        case endedAt = "ended_at"
        case sourceID = "source_id"
        case node, generation
    }

    public init(id: Int64?, source: String, clip: String, thumbnail: String?, start: Double, end: Double, duration: Double, frames: Int,
                labels: String, bestScore: Double, createdAt: String, incomplete: Bool = false, startedAt: String? = nil, endedAt: String? = nil,
                objects: [ClipObject] = [], sourceID: String? = nil, node: String? = nil, generation: Int64? = nil) {
        self.objects = objects
        self.sourceID = sourceID
        self.node = node
        self.generation = generation
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.id = id
        self.source = source
        self.clip = clip
        self.thumbnail = thumbnail
        self.start = start
        self.end = end
        self.duration = duration
        self.frames = frames
        self.labels = labels
        self.bestScore = bestScore
        self.createdAt = createdAt
        self.incomplete = incomplete
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decodeIfPresent(Int64.self, forKey: .id)
        source = try container.decode(String.self, forKey: .source)
        clip = try container.decode(String.self, forKey: .clip)
        thumbnail = try container.decodeIfPresent(String.self, forKey: .thumbnail)
        start = try container.decode(Double.self, forKey: .start)
        end = try container.decode(Double.self, forKey: .end)
        duration = try container.decode(Double.self, forKey: .duration)
        frames = try container.decode(Int.self, forKey: .frames)
        labels = try container.decode(String.self, forKey: .labels)
        bestScore = try container.decode(Double.self, forKey: .bestScore)
        createdAt = try container.decode(String.self, forKey: .createdAt)
        incomplete = try container.decodeIfPresent(Bool.self, forKey: .incomplete) ?? false
        startedAt = try container.decodeIfPresent(String.self, forKey: .startedAt)
        endedAt = try container.decodeIfPresent(String.self, forKey: .endedAt)
        // Rows and records written before clips kept their objects have none.
        objects = (try? container.decodeIfPresent([ClipObject].self, forKey: .objects)) ?? []
        sourceID = try container.decodeIfPresent(String.self, forKey: .sourceID)
        node = try container.decodeIfPresent(String.self, forKey: .node)
        generation = try container.decodeIfPresent(Int64.self, forKey: .generation)
    }
}

/// A tracked object in a clip: its id in the source, label, when it was first and last seen in the
/// clip (source seconds), its best score and when.
public struct ClipObject: Codable, Sendable, Equatable {
    public var track: Int
    public var label: String
    public var firstSeen: Double
    public var lastSeen: Double
    public var bestScore: Double
    public var bestTime: Double

    enum CodingKeys: String, CodingKey {
        case track, label
        case firstSeen = "first_t"
        case lastSeen = "last_t"
        case bestScore = "best_score"
        case bestTime = "best_t"
    }

    public init(track: Int, label: String, firstSeen: Double, lastSeen: Double, bestScore: Double, bestTime: Double) {
        self.track = track
        self.label = label
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.bestScore = bestScore
        self.bestTime = bestTime
    }
}

/// How many tracks entered a zone or crossed a line (in one direction) in one hour at one source:
/// a row of the album's `counts` table.
public struct CountEntry: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "counts"

    public var source: String
    /// The hour's start, ISO 8601 in UTC (`2026-11-26T15:00:00Z`).
    public var hour: String
    /// `zone` (entries) or `line` (crossings).
    public var kind: String
    public var name: String
    /// `in` or `out` for a line; empty for a zone.
    public var direction: String
    public var count: Int

    public init(source: String, hour: String, kind: String, name: String, direction: String, count: Int) {
        self.source = source
        self.hour = hour
        self.kind = kind
        self.name = name
        self.direction = direction
        self.count = count
    }
}

/// A source `spotter serve` keeps across restarts: its id, its settings (the server's JSON), and
/// its place in the list.
public struct StoredSource: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "sources"

    public var id: String
    /// The source's settings as the server's API shows them (JSON).
    public var settings: String
    /// Order of the source list.
    public var position: Int
    public var createdAt: String
    /// When a file source read its file to the end (nil: not yet, or a live source). A finished
    /// file is not read again at the next start or when its settings change.
    public var finishedAt: String?

    enum CodingKeys: String, CodingKey {
        case id, settings, position
        case createdAt = "created_at"
        case finishedAt = "finished_at"
    }

    public init(id: String, settings: String, position: Int, createdAt: String = Album.timestamp(), finishedAt: String? = nil) {
        self.id = id
        self.settings = settings
        self.position = position
        self.createdAt = createdAt
        self.finishedAt = finishedAt
    }
}

/// Why an album could not be opened or written.
public enum AlbumError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotCreate(path: String, reason: String)
    case notAnAlbum(path: String, reason: String)
    case indexFailed(path: String, reason: String)
    case cannotReserveClip(path: String, reason: String)
    /// A clip's file could not be removed; its row is kept, so the album still lists it.
    case cannotDelete(path: String, reason: String)
    /// A complete clip's row was refused: the lease it was recorded under (its `source_id`,
    /// `node`, `generation`) is no longer its source's newest (``AlbumIndex/insert(_:)``).
    case rowRefused(clip: String, reason: String)

    public var description: String {
        switch self {
        case .rowRefused(let clip, let reason): return "the row of \(clip) was refused: \(reason)"
        case .cannotDelete(let path, let reason): return "cannot delete \(path): \(reason); the clip stays in the album"
        case .cannotCreate(let path, let reason): return "cannot create the album folder \(path): \(reason)"
        case .notAnAlbum(let path, let reason): return "\(path) is not a usable album: \(reason)"
        case .indexFailed(let path, let reason): return "cannot update the album index \(path): \(reason)"
        case .cannotReserveClip(let path, let reason): return "cannot create the clip file \(path): \(reason)"
        }
    }
}

/// A clip file created for one writer: the name is taken atomically (`O_EXCL`) and the file stays
/// locked (`flock`) until the reservation is released, so no other process writes to it or adopts it
/// as an orphan while it is being recorded.
public final class ClipReservation: Sendable {
    /// Paths relative to the album.
    public let clip: String
    public let thumbnail: String
    /// Absolute path of the clip file.
    public let path: String
    /// The locked file's descriptor, -1 once released (closed once, whichever thread releases it).
    private let descriptor: Mutex<Int32>

    init(clip: String, thumbnail: String, path: String, descriptor: Int32) {
        self.clip = clip
        self.thumbnail = thumbnail
        self.path = path
        self.descriptor = Mutex(descriptor)
    }

    /// Unlocks the file (after its index row is written, or after it was removed).
    public func release() {
        let open = descriptor.withLock { descriptor in
            defer { descriptor = -1 }
            return descriptor
        }
        if open >= 0 { close(open) }
    }

    deinit { release() }
}

/// How long an album keeps its clips; nil keeps them. Oldest clips go first.
public struct Retention: Sendable, Equatable {
    /// Seconds a clip is kept after it was indexed. Default nil (no age limit).
    public var maxAge: Double?
    /// Bytes the clips, thumbnails and snapshots may take together. Default nil (no size limit).
    public var maxBytes: Int?

    public init(maxAge: Double? = nil, maxBytes: Int? = nil) {
        self.maxAge = maxAge
        self.maxBytes = maxBytes
    }

    public var isEmpty: Bool { maxAge == nil && maxBytes == nil }
}

/// What ``Album/repair()`` did.
public struct AlbumRepair: Sendable {
    /// Clips without an index row, now indexed: from the record written beside them when it is
    /// there (complete, with labels), else from what could be decoded (incomplete).
    public var adopted: [ClipEntry] = []
    /// Clip files without a row and without a decodable frame, removed (relative paths).
    public var removed: [String] = []
    /// Rows whose clip file is gone, dropped (relative paths).
    public var forgotten: [String] = []
}

/// How a damaged index was replaced when the album was opened.
public struct IndexRecovery: Sendable, Equatable {
    /// Where the damaged index was moved (never deleted).
    public var keptAs: String
    /// What was wrong with it.
    public var reason: String
    /// Clips indexed again from their own files.
    public var rebuilt: Int
}

/// A folder of clips (`clips/`), thumbnails (`thumbnails/`, 320 px wide, with a full-size
/// `*-full.jpg` snapshot beside each) and an SQLite index (`index.sqlite`, WAL, busy timeout).
///
/// Clip names start with the UTC time the recording run began and a sequence number, so they sort
/// by time; each is reserved with `O_EXCL`, so two runs (threads or processes) never share one.
/// Several processes may record into one album at once. Safe to use from several threads (GRDB
/// serializes database access; a reservation belongs to one writer).
public final class Album: Sendable {
    public let directory: URL
    /// Where the clip rows and counts are: the SQLite index below, or a database nodes share.
    public let index: any AlbumIndex
    /// The album's own SQLite index (GRDB's queue or pool, which serializes access); nil when the
    /// rows are elsewhere (``init(directory:index:)``).
    private let database: (any DatabaseReader & DatabaseWriter)?
    /// Set when the index was damaged and has been rebuilt from the clips on opening.
    public var recovery: IndexRecovery? { recovered.withLock { $0 } }
    private let recovered = Mutex<IndexRecovery?>(nil)
    private let runStamp: String
    /// The last clip number this run reserved.
    private let sequence = Mutex(0)
    /// The file in an album folder whose rows are kept elsewhere that names where (``init(directory:index:)``).
    public static let clusterMarker = ".rows-elsewhere"
    /// Width of thumbnails, in pixels. The full-size best frame is kept beside each.
    public static let thumbnailWidth = 320

    /// Opens (creating if needed) the album at `directory`.
    ///
    /// - Throws: ``AlbumError``.
    public convenience init(directory: URL) throws {
        try self.init(directory: directory, sharedIndex: nil)
    }

    /// Opens (creating if needed) the album folder at `directory` whose rows are kept in `index`
    /// (a cluster's database) instead of the folder's own SQLite file, which is not opened. Such
    /// an album keeps no sources (``storedSources()`` and its kin fail).
    ///
    /// - Throws: ``AlbumError``.
    public convenience init(directory: URL, index: any AlbumIndex) throws {
        try self.init(directory: directory, sharedIndex: index)
    }

    private init(directory: URL, sharedIndex: (any AlbumIndex)?) throws {
        self.directory = directory
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: directory.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw AlbumError.notAnAlbum(path: directory.path, reason: "it is a file, not a folder")
        }
        for sub in ["clips", "thumbnails"] {
            do {
                try manager.createDirectory(at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
            } catch {
                throw AlbumError.cannotCreate(path: directory.appendingPathComponent(sub).path, reason: Self.reason(error))
            }
        }
        guard manager.isWritableFile(atPath: directory.appendingPathComponent("clips").path) else {
            throw AlbumError.cannotCreate(path: directory.appendingPathComponent("clips").path, reason: "the folder is not writable")
        }
        if let sharedIndex {
            // Says where the rows are, for `spotter album` pointed at the folder.
            try? Data((sharedIndex.location + "\n").utf8).write(to: directory.appendingPathComponent(Self.clusterMarker), options: .atomic)
            index = sharedIndex
            database = nil
            runStamp = UTCTime.compact(Date())
            temporaryCopy = nil
            return
        }
        let indexPath = directory.appendingPathComponent("index.sqlite").path
        var configuration = Configuration()
        // Other recorders, `album repair` and readers share the file: wait for their locks.
        configuration.busyMode = .timeout(30)
        // Opening switches a new index to WAL, which SQLite may refuse at once (SQLITE_BUSY, no busy
        // wait) while another process does the same: processes open the index one at a time.
        let openingLock = directory.appendingPathComponent(".index.lock").path
        let lockDescriptor = open(openingLock, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lockDescriptor >= 0 else {
            throw AlbumError.cannotCreate(path: openingLock, reason: String(cString: strerror(errno)))
        }
        defer { close(lockDescriptor) }  // and so unlocked
        while flock(lockDescriptor, LOCK_EX) != 0 && errno == EINTR {}
        var damage: (keptAs: String, reason: String)?
        let opened: DatabasePool
        do {
            opened = try Self.openIndex(indexPath, configuration: configuration)
        } catch where Self.isDamage(error) {
            // A damaged index (garbage, a zeroed page, truncation, a schema of other columns) is
            // kept aside, never deleted, and a new one is built from the clips' own records. A
            // busy or locked index, a full disk or a permission problem is not damage: it is
            // reported, and the index left as it is.
            let reason = Self.reason(error)
            let kept = "\(indexPath).damaged-\(UTCTime.compact(Date()))"
            guard rename(indexPath, kept) == 0 else {
                throw AlbumError.notAnAlbum(path: indexPath, reason: "\(reason), and it cannot be moved aside: \(String(cString: strerror(errno)))")
            }
            for suffix in ["-wal", "-shm"] { _ = rename(indexPath + suffix, kept + suffix) }
            damage = (kept, reason)
            do { opened = try Self.openIndex(indexPath, configuration: configuration) } catch {
                throw AlbumError.notAnAlbum(path: indexPath, reason: Self.reason(error))
            }
        } catch {
            throw AlbumError.notAnAlbum(path: indexPath, reason: Self.reason(error))
        }
        database = opened
        index = SQLiteAlbumIndex(database: opened, location: indexPath)
        runStamp = UTCTime.compact(Date())
        temporaryCopy = nil
        if let damage {
            let report = try repair()
            recovered.withLock { $0 = IndexRecovery(keptAs: damage.keptAs, reason: damage.reason, rebuilt: report.adopted.count) }
        }
    }

    /// Opens a read-only album (a folder on read-only media, or another user's): the index is
    /// copied to a private temporary folder and read there; nothing in the album is written.
    ///
    /// - Throws: ``AlbumError/notAnAlbum(path:reason:)``.
    public init(readingOnly directory: URL) throws {
        self.directory = directory
        let indexPath = directory.appendingPathComponent("index.sqlite").path
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-album-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: indexPath + suffix) {
                try FileManager.default.copyItem(atPath: indexPath + suffix, toPath: copy.appendingPathComponent("index.sqlite" + suffix).path)
            }
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: copy.appendingPathComponent("index.sqlite").path, configuration: configuration)
            _ = try queue.read { db in try ClipEntry.fetchCount(db) }
            database = queue
            index = SQLiteAlbumIndex(database: queue, location: indexPath)
        } catch {
            try? FileManager.default.removeItem(at: copy)
            throw AlbumError.notAnAlbum(path: indexPath, reason: Self.reason(error))
        }
        temporaryCopy = copy
        runStamp = UTCTime.compact(Date())
    }

    /// The private copy of a read-only album's index, removed with the album.
    private let temporaryCopy: URL?

    deinit {
        if let temporaryCopy { try? FileManager.default.removeItem(at: temporaryCopy) }
    }

    /// Opens the index, creating or updating its tables, and checks it (`PRAGMA quick_check`).
    /// Opens the index, checks it (`PRAGMA quick_check`), and creates or updates its tables; an
    /// index already up to date is only read, so opening works while another process writes.
    private static func openIndex(_ path: String, configuration: Configuration) throws -> DatabasePool {
        let pool = try DatabasePool(path: path, configuration: configuration)
        let current = try pool.read { db in
            let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
            guard check == ["ok"] else { throw Damage(reason: "SQLite finds it damaged: \(check.prefix(3).joined(separator: "; "))") }
            return try isCurrent(db)
        }
        if !current {
            try pool.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    try Self.createSchema(db)
                    return .commit
                }
            }
        }
        return pool
    }

    /// What makes an index unusable, as opposed to busy: SQLite's corruption codes, and a schema of
    /// other columns.
    private struct Damage: Error, CustomStringConvertible {
        let description: String
        init(reason: String) { description = reason }
    }

    static func isDamage(_ error: Error) -> Bool {
        if error is Damage { return true }
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode)
    }

    /// Whether the index has every table and column this version writes.
    private static func isCurrent(_ db: Database) throws -> Bool {
        guard try db.tableExists(ClipEntry.databaseTableName), try db.tableExists(StoredSource.databaseTableName) else { return false }
        let columns = Set(try db.columns(in: ClipEntry.databaseTableName).map(\.name))
        return try db.tableExists(CountEntry.databaseTableName) && (["incomplete", "objects"] + optionalColumns).allSatisfy(columns.contains)
            && requiredColumns.isSubset(of: columns)
            && db.columns(in: StoredSource.databaseTableName).contains { $0.name == "finished_at" }
    }

    /// Text or integer columns later versions added, nil where unknown.
    private static let optionalColumns = ["started_at", "ended_at", "source_id", "node", "generation"]

    /// Columns every version of the clips table had.
    private static let requiredColumns: Set = ["id", "source", "clip", "thumbnail", "start", "end", "duration", "frames", "labels", "best_score",
                                                "created_at"]

    /// The clips table, and the columns albums made before them lack (`incomplete`, `started_at`,
    /// `ended_at`, `objects`, `source_id`, `node`, `generation`). A clips table without the columns every version had is not an index
    /// this program can use (an old or foreign schema): it is treated as damaged.
    private static func createSchema(_ db: Database) throws {
        try db.create(table: ClipEntry.databaseTableName, options: .ifNotExists) { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("source", .text).notNull()
            t.column("clip", .text).notNull().unique()
            t.column("thumbnail", .text)
            t.column("start", .double).notNull()
            t.column("end", .double).notNull()
            t.column("duration", .double).notNull()
            t.column("frames", .integer).notNull()
            t.column("labels", .text).notNull()
            t.column("best_score", .double).notNull()
            t.column("created_at", .text).notNull()
            t.column("incomplete", .boolean).notNull().defaults(to: false)
            t.column("started_at", .text)
            t.column("ended_at", .text)
            t.column("objects", .text).notNull().defaults(to: "[]")
            t.column("source_id", .text)
            t.column("node", .text)
            t.column("generation", .integer)
        }
        let columns = Set(try db.columns(in: ClipEntry.databaseTableName).map(\.name))
        let missing = requiredColumns.subtracting(columns)
        guard missing.isEmpty else { throw Damage(reason: "its clips table lacks \(missing.sorted().joined(separator: ", "))") }
        if !columns.contains("incomplete") {
            try db.alter(table: ClipEntry.databaseTableName) { t in t.add(column: "incomplete", .boolean).notNull().defaults(to: false) }
        }
        for column in optionalColumns where !columns.contains(column) {
            try db.alter(table: ClipEntry.databaseTableName) { t in t.add(column: column, column == "generation" ? .integer : .text) }
        }
        if !columns.contains("objects") {
            try db.alter(table: ClipEntry.databaseTableName) { t in t.add(column: "objects", .text).notNull().defaults(to: "[]") }
        }
        try db.create(table: CountEntry.databaseTableName, options: .ifNotExists) { t in
            t.column("source", .text).notNull()
            t.column("hour", .text).notNull()
            t.column("kind", .text).notNull()
            t.column("name", .text).notNull()
            t.column("direction", .text).notNull()
            t.column("count", .integer).notNull()
            t.primaryKey(["source", "hour", "kind", "name", "direction"])
        }
        try db.create(table: StoredSource.databaseTableName, options: .ifNotExists) { t in
            t.primaryKey("id", .text)
            t.column("settings", .text).notNull()
            t.column("position", .integer).notNull()
            t.column("created_at", .text).notNull()
            t.column("finished_at", .text)
        }
        if try !db.columns(in: StoredSource.databaseTableName).contains(where: { $0.name == "finished_at" }) {
            try db.alter(table: StoredSource.databaseTableName) { t in t.add(column: "finished_at", .text) }
        }
    }

    // MARK: Zone and line counts

    /// Adds `entries` (each a count to add) to the hourly counts.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func addCounts(_ entries: [CountEntry]) throws {
        guard !entries.isEmpty else { return }
        try index.addCounts(entries)
    }

    /// Hourly counts of `source` (nil: all) whose hour starts at or after `from` and before `to`
    /// (ISO 8601 UTC strings; nil: unbounded), by hour, then source, kind, name, direction.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func counts(source: String? = nil, from: String? = nil, to: String? = nil) throws -> [CountEntry] {
        try index.counts(source: source, from: from, to: to)
    }

    /// `text` (`2026-11-26T15:00:00Z`, or a day `2026-11-26`) as the counts table's times are
    /// written; nil for anything else.
    public static func countsTime(_ text: String) -> String? {
        let full = text.count == 10 ? text + "T00:00:00Z" : text
        return UTCTime.parseISO8601(full).map(UTCTime.iso8601)
    }

    /// The start of the hour `date` falls in, as ``counts(source:from:to:)`` keys it.
    public static func hour(of date: Date) -> String {
        let seconds = (date.timeIntervalSince1970 / 3600).rounded(.down) * 3600
        return UTCTime.iso8601(Date(timeIntervalSince1970: seconds))
    }

    // MARK: Sources of `spotter serve`

    /// The album's own SQLite index, which keeps its sources.
    private func local() throws -> any DatabaseReader & DatabaseWriter {
        guard let database else { throw AlbumError.indexFailed(path: index.location, reason: "an album whose rows are in \(index.location) keeps no sources") }
        return database
    }

    /// The sources kept for the next start, in list order.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func storedSources() throws -> [StoredSource] {
        do { return try local().read { db in try StoredSource.order(Column("position"), Column("id")).fetchAll(db) } } catch {
            throw AlbumError.indexFailed(path: directory.appendingPathComponent("index.sqlite").path, reason: Self.reason(error))
        }
    }

    /// Keeps `source` (replacing one with its id).
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func store(_ source: StoredSource) throws {
        do { try local().write { db in try source.save(db) } } catch {
            throw AlbumError.indexFailed(path: directory.appendingPathComponent("index.sqlite").path, reason: Self.reason(error))
        }
    }

    /// Notes that the file source `id` was read to the end (nothing when it is not kept).
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func markSourceFinished(id: String, at time: String = Album.timestamp()) throws {
        do {
            try local().write { db in
                try db.execute(sql: "UPDATE \(StoredSource.databaseTableName) SET finished_at = ? WHERE id = ?", arguments: [time, id])
            }
        } catch {
            throw AlbumError.indexFailed(path: directory.appendingPathComponent("index.sqlite").path, reason: Self.reason(error))
        }
    }

    /// Forgets the source with `id`.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func forgetSource(id: String) throws {
        do { _ = try local().write { db in try StoredSource.deleteOne(db, key: id) } } catch {
            throw AlbumError.indexFailed(path: directory.appendingPathComponent("index.sqlite").path, reason: Self.reason(error))
        }
    }

    /// Creates the next clip file (empty, locked) and names its thumbnail; never an existing name,
    /// also when other processes record into this album at the same time.
    ///
    /// - Throws: ``AlbumError/cannotReserveClip(path:reason:)``.
    public func reserveClip() throws -> ClipReservation {
        while true {
            let number = sequence.withLock { sequence in
                sequence += 1
                return sequence
            }
            let stem = "\(runStamp)-\(UTCTime.pad(number, 3))"
            let clip = "clips/\(stem).mp4"
            let path = directory.appendingPathComponent(clip).path
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if descriptor < 0 {
                if errno == EEXIST { continue }
                throw AlbumError.cannotReserveClip(path: path, reason: String(cString: strerror(errno)))
            }
            _ = flock(descriptor, LOCK_EX)
            return ClipReservation(clip: clip, thumbnail: "thumbnails/\(stem).jpg", path: path, descriptor: descriptor)
        }
    }

    /// Adds a finished clip to the index.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    @discardableResult
    public func add(_ entry: ClipEntry) throws -> ClipEntry {
        try index.insert(entry)
    }

    /// Every clip, oldest first.
    public func clips() throws -> [ClipEntry] {
        try index.allClips()
    }

    /// Which clips ``clips(matching:)`` returns.
    public struct Query: Sendable {
        /// Only clips cut from this source (exact). Default: all.
        public var source: String?
        /// Only clips whose labels include this one. Default: all.
        public var label: String?
        /// Only clips created on or after / before these ISO 8601 times (compared as text). Default: all.
        public var createdFrom: String?
        public var createdBefore: String?
        /// Only clips with an id below this one (the next page, newest first). Default: from the newest.
        public var beforeID: Int64?
        /// At most this many. Default 50.
        public var limit = 50

        public init(source: String? = nil, label: String? = nil, createdFrom: String? = nil, createdBefore: String? = nil,
                    beforeID: Int64? = nil, limit: Int = 50) {
            self.source = source
            self.label = label
            self.createdFrom = createdFrom
            self.createdBefore = createdBefore
            self.beforeID = beforeID
            self.limit = limit
        }
    }

    /// Clips matching `query`, newest first.
    public func clips(matching query: Query) throws -> [ClipEntry] {
        try index.clips(matching: query)
    }

    /// How many clips the index holds.
    public func clipCount() throws -> Int {
        try index.clipCount()
    }

    /// The clip with `id`, or nil.
    public func clip(id: Int64) throws -> ClipEntry? {
        try index.clip(id: id)
    }

    /// Removes a clip: its row, its file, its thumbnail and snapshot. Returns false when there is no
    /// such clip.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    ///
    /// The clip's file goes first: when it cannot be removed (no permission), the row stays and the
    /// clip stays listed, so a repair never brings back a clip the user was told is gone.
    @discardableResult
    public func delete(id: Int64) throws -> Bool {
        guard let entry = try index.clip(id: id) else { return false }
        let clipPath = directory.appendingPathComponent(entry.clip).path
        if unlink(clipPath) != 0 && errno != ENOENT { throw AlbumError.cannotDelete(path: clipPath, reason: String(cString: strerror(errno))) }
        var others = [Self.recordPath(of: entry.clip)]
        if let thumbnail = entry.thumbnail {
            others += [thumbnail, (thumbnail as NSString).deletingPathExtension + "-full.jpg"]
        }
        for file in others { try? FileManager.default.removeItem(at: directory.appendingPathComponent(file)) }
        try index.deleteRow(id: id)
        return true
    }

    /// Where a clip's record (its index row as JSON) is kept beside it: `clips/NAME.json`.
    static func recordPath(of clip: String) -> String { (clip as NSString).deletingPathExtension + ".json" }

    /// Writes a finished clip's record beside it (write, then rename), so a clip whose row is lost
    /// or delayed is indexed again with its labels and times.
    ///
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    public func writeRecord(_ entry: ClipEntry) throws {
        let path = directory.appendingPathComponent(Self.recordPath(of: entry.clip))
        var record = entry
        record.id = nil
        do {
            try JSONEncoder().encode(record).write(to: path, options: .atomic)
        } catch {
            throw AlbumError.indexFailed(path: path.path, reason: Self.reason(error))
        }
    }

    /// The record written beside `clip`, if any.
    func record(of clip: String) -> ClipEntry? {
        let path = directory.appendingPathComponent(Self.recordPath(of: clip))
        guard let data = try? Data(contentsOf: path), var entry = try? JSONDecoder().decode(ClipEntry.self, from: data),
              entry.clip == clip else { return nil }
        entry.id = nil
        return entry
    }

    /// Removes the record beside `clip`: a repair then indexes the clip as incomplete, from what
    /// its file holds (a clip whose row its recorder may no longer write).
    public func forgetRecord(of clip: String) {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(Self.recordPath(of: clip)))
    }

    /// Deletes clips (file, thumbnail, snapshot and row together) that `retention` no longer keeps:
    /// those created before `now - maxAge`, then the oldest while the album's clips, thumbnails and
    /// snapshots take more than `maxBytes`. Clips being recorded are not indexed yet, so never touched.
    ///
    /// - Returns: the deleted clips, oldest first.
    /// - Throws: ``AlbumError/indexFailed(path:reason:)``.
    @discardableResult
    public func prune(_ retention: Retention, now: Date = Date()) throws -> [ClipEntry] {
        let all = try clips()
        var deleted: [ClipEntry] = []
        var kept: [(entry: ClipEntry, bytes: Int)] = []
        for entry in all {
            if let maxAge = retention.maxAge, let created = UTCTime.parseISO8601(entry.createdAt), now.timeIntervalSince(created) > maxAge {
                if let id = entry.id, try delete(id: id) { deleted.append(entry) }
            } else {
                kept.append((entry, bytes(of: entry)))
            }
        }
        if let maxBytes = retention.maxBytes {
            var total = kept.reduce(0) { $0 + $1.bytes }
            for (entry, size) in kept where total > maxBytes {
                if let id = entry.id, try delete(id: id) { deleted.append(entry) }
                total -= size
            }
        }
        return deleted
    }

    /// Bytes of a clip's file, thumbnail and snapshot.
    private func bytes(of entry: ClipEntry) -> Int {
        var files = [entry.clip]
        if let thumbnail = entry.thumbnail { files += [thumbnail, (thumbnail as NSString).deletingPathExtension + "-full.jpg"] }
        return files.reduce(0) { sum, file in
            sum + ((try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(file).path)[.size] as? Int) ?? 0)
        }
    }

    /// Writes a clip's thumbnail (``thumbnailWidth`` wide) and a full-size snapshot beside it
    /// (`NAME-full.jpg`); returns the thumbnail's path relative to the album.
    ///
    /// - Throws: ``MediaError``.
    @discardableResult
    public func writeThumbnail(_ frame: Image, named thumbnail: String) throws -> String {
        let full = directory.appendingPathComponent(thumbnail).deletingPathExtension().path + "-full.jpg"
        try ImageFile.write(frame, to: full, format: .jpeg(quality: 85))
        let width = min(Self.thumbnailWidth, frame.width)
        let height = max(1, Int((Double(frame.height) * Double(width) / Double(frame.width)).rounded()))
        let small = frame.resized(to: Size(width: width, height: height), filter: .area)
        try ImageFile.write(small, to: directory.appendingPathComponent(thumbnail).path, format: .jpeg(quality: 85))
        return thumbnail
    }

    /// Indexes `clip` (relative path) from what can be decoded of it, as incomplete, with a
    /// thumbnail of its first frame; removes it when no frame can be decoded. Returns the entry, or
    /// nil when the file was removed.
    ///
    /// - Throws: ``AlbumError`` when the index cannot be written.
    public func adopt(_ clip: String, source: String? = nil, start: Double? = nil) throws -> ClipEntry? {
        let path = directory.appendingPathComponent(clip).path
        var frames = 0, first: Image?, lastTime = 0.0, rate = 25.0
        var recordedSource = source, recordedStart = start
        var written: [String: String] = [:]
        if let reader = try? VideoReader(path: path) {
            written = reader.info.metadata
            rate = reader.info.frameRate ?? rate
            recordedSource = recordedSource ?? reader.info.metadata["spotter_source"]
            recordedStart = recordedStart ?? reader.info.metadata["spotter_start"].flatMap(Double.init)
            while let frame = try? reader.nextFrame() {
                if first == nil { first = frame.image }
                frames += 1
                lastTime = frame.time
            }
        }
        guard frames > 0, let first else {
            try? FileManager.default.removeItem(atPath: path)
            return nil
        }
        let stem = URL(fileURLWithPath: clip).deletingPathExtension().lastPathComponent
        let thumbnail = try? writeThumbnail(first, named: "thumbnails/\(stem).jpg")
        let startTime = recordedStart ?? 0
        // Who recorded it (ClipSession writes these): the source's id, and in a cluster the node and its lease generation.
        return try add(ClipEntry(
            id: nil, source: recordedSource ?? "unknown", clip: clip, thumbnail: thumbnail, start: startTime, end: startTime + lastTime,
            duration: lastTime + 1 / rate, frames: frames, labels: "", bestScore: 0, createdAt: Self.timestamp(), incomplete: true,
            sourceID: written["spotter_source_id"], node: written["spotter_node"], generation: written["spotter_generation"].flatMap { Int64($0) }))
    }

    /// Finds clip files without an index row (left by a killed run, a full disk, an index that was
    /// locked too long or damaged) that no running recorder holds: those with a record beside them
    /// are indexed from it, the other readable ones as incomplete, and the others removed. Rows
    /// whose file is gone are dropped.
    ///
    /// - Throws: ``AlbumError``.
    @discardableResult
    public func repair() throws -> AlbumRepair {
        let rows = try index.clipNames()
        var report = AlbumRepair()
        for (id, clip) in rows where !FileManager.default.fileExists(atPath: directory.appendingPathComponent(clip).path) {
            try index.deleteRow(id: id)
            report.forgotten.append(clip)
        }
        let indexed = Set(rows.map { $0.clip })
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("clips").path)) ?? []
        for name in names.sorted() where name.hasSuffix(".mp4") && !indexed.contains("clips/\(name)") {
            let clip = "clips/\(name)"
            // A recorder holds its clip's lock until the row is written: skip those.
            let descriptor = open(directory.appendingPathComponent(clip).path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { continue }
            // Another process repairing at the same time (nodes taking over at once) may have
            // indexed it between the listing above and this lock: look again under the lock.
            guard try !index.contains(clip: clip) else { continue }
            if let recorded = record(of: clip), let added = try addRecorded(recorded) {
                report.adopted.append(added)
            } else if let entry = try adopt(clip) {
                report.adopted.append(entry)
            } else {
                report.removed.append(clip)
            }
        }
        return report
    }

    /// Adds the row a clip's record holds; nil when the index refuses it (its lease has moved
    /// on), and the record is then removed, so the clip is indexed as incomplete.
    private func addRecorded(_ recorded: ClipEntry) throws -> ClipEntry? {
        do { return try add(recorded) } catch AlbumError.rowRefused {
            forgetRecord(of: recorded.clip)
            return nil
        }
    }

    /// A video input as the album names its source: URLs and devices as given (a password in a
    /// URL as `***`), files as absolute paths, also behind FFmpeg's `file:` and `concat:` (each
    /// part), so a name never depends on the folder the command ran in.
    public static func sourceName(_ input: String) -> String {
        func absolute(_ path: String) -> String {
            path.hasPrefix("/") ? path : URL(fileURLWithPath: path).standardizedFileURL.path
        }
        if input.hasPrefix("/") || FileManager.default.fileExists(atPath: input) { return absolute(input) }
        switch VideoReader.scheme(of: input) {
        case nil: return absolute(input)
        case "file" where !input.hasPrefix("file://"): return absolute(String(input.dropFirst(5)))
        case "concat": return "concat:" + input.dropFirst(7).split(separator: "|", omittingEmptySubsequences: false).map { absolute(String($0)) }.joined(separator: "|")
        default: return redactingPassword(input)
        }
    }

    /// A URL with its password replaced by `***` (`rtsp://user:***@cam/live`): what logs, pages,
    /// events and the album show of a camera's address.
    public static func redactingPassword(_ input: String) -> String { VideoReader.redactingPassword(input) }

    public static func timestamp() -> String {
        UTCTime.iso8601(Date())
    }

    /// One sentence for a Foundation or SQLite error.
    static func reason(_ error: Error) -> String {
        if let error = error as? AlbumError { return "\(error)" }
        if let error = error as? Damage { return error.description }
        if let error = error as? DatabaseError { return error.message ?? "\(error)" }
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return ns.localizedDescription
    }
}
