import Foundation
import GRDB

/// One recorded clip, as the album's index stores it.
public struct ClipEntry: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "clips"

    public var id: Int64?
    /// The input the clip was cut from.
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

    enum CodingKeys: String, CodingKey {
        case id, source, clip, thumbnail, start, end, duration, frames, labels
        case bestScore = "best_score"
        case createdAt = "created_at"
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// A folder of clips (`clips/`), thumbnails (`thumbnails/`) and an SQLite index (`index.sqlite`).
///
/// Clip names start with the UTC time the recording run began and a sequence number, so they sort
/// by time and never collide, also across runs into the same album. Safe to use from one thread at a
/// time (GRDB serializes database access).
public final class Album {
    public let directory: URL
    private let database: DatabaseQueue
    private let runStamp: String
    private var sequence = 0

    /// Opens (creating if needed) the album at `directory`.
    ///
    /// - Throws: file system and GRDB errors.
    public init(directory: URL) throws {
        self.directory = directory
        let manager = FileManager.default
        for sub in ["clips", "thumbnails"] {
            try manager.createDirectory(at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        database = try DatabaseQueue(path: directory.appendingPathComponent("index.sqlite").path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: ClipEntry.databaseTableName) { t in
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
            }
        }
        try migrator.migrate(database)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss.SSS'Z'"
        runStamp = formatter.string(from: Date())
    }

    /// Paths for the next clip and its thumbnail, relative to the album; never an existing file.
    public func nextClipNames() -> (clip: String, thumbnail: String) {
        while true {
            sequence += 1
            let stem = "\(runStamp)-\(String(format: "%03d", sequence))"
            let clip = "clips/\(stem).mp4"
            if !FileManager.default.fileExists(atPath: directory.appendingPathComponent(clip).path) {
                return (clip, "thumbnails/\(stem).jpg")
            }
        }
    }

    /// Adds a finished clip to the index.
    @discardableResult
    public func add(_ entry: ClipEntry) throws -> ClipEntry {
        var entry = entry
        try database.write { db in try entry.insert(db) }
        return entry
    }

    /// Every clip, oldest first.
    public func clips() throws -> [ClipEntry] {
        try database.read { db in try ClipEntry.order(Column("clip")).fetchAll(db) }
    }

    static func timestamp() -> String {
        ISO8601DateFormatter().string(from: Date())
    }
}
