import Foundation
import GRDB
import Imaging
import Media

/// People by name, each with the embeddings and aligned crops they were enrolled from, in one
/// SQLite file (WAL, busy timeout). Identifying finds the nearest enrolled embedding: within
/// `threshold` it is that person, beyond it `unknown`.
///
/// Everything stays in the file: removing a person deletes their embeddings and crops. Safe to use
/// from several threads (GRDB serializes access).
public final class FaceGallery: Sendable {
    /// Euclidean distance between unit embeddings below which two faces are one person. 1.0 with
    /// MobileFaceNet on aligned crops: on the shared photos one person's faces are 0.25-0.62 apart
    /// (Biden, Obama: portrait against the two-people photo) and different people's at least 1.23.
    public static let defaultThreshold: Float = 1.0

    public struct Person: Sendable, Equatable {
        public var name: String
        /// Embeddings enrolled for this person.
        public var count: Int

        public init(name: String, count: Int) {
            self.name = name
            self.count = count
        }
    }

    /// The nearest enrolled person and how far.
    public struct Match: Sendable, Equatable {
        /// nil when the nearest face is farther than the threshold (or the gallery is empty).
        public var name: String?
        /// Distance to the nearest enrolled embedding; nil when the gallery is empty.
        public var distance: Float?
        /// The nearest person, even beyond the threshold.
        public var nearest: String?

        public init(name: String?, distance: Float?, nearest: String?) {
            self.name = name
            self.distance = distance
            self.nearest = nearest
        }
    }

    public let path: String
    private let database: DatabasePool

    /// Opens (creating if needed) the gallery at `path`; its folder is created too.
    ///
    /// - Throws: ``FaceError/galleryFailed(path:reason:)``.
    public init(path: String) throws {
        self.path = path
        do {
            try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.busyMode = .timeout(30)
            configuration.foreignKeysEnabled = true
            // Deleted embeddings and crops are overwritten, not left in free pages.
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA secure_delete = ON") }
            database = try DatabasePool(path: path, configuration: configuration)
            try database.write { db in
                try db.create(table: "person", options: .ifNotExists) { t in
                    t.autoIncrementedPrimaryKey("id")
                    t.column("name", .text).notNull().unique()
                    t.column("created_at", .text).notNull()
                }
                try db.create(table: "face", options: .ifNotExists) { t in
                    t.autoIncrementedPrimaryKey("id")
                    t.column("person_id", .integer).notNull().indexed().references("person", onDelete: .cascade)
                    t.column("embedding", .blob).notNull()
                    t.column("crop_png", .blob)
                    t.column("source", .text)
                    t.column("created_at", .text).notNull()
                }
            }
        } catch let error as FaceError {
            throw error
        } catch {
            throw FaceError.galleryFailed(path: path, reason: Self.reason(error))
        }
    }

    /// The default gallery: `$XDG_DATA_HOME/spotter/faces.sqlite`, else `~/.local/share/spotter/faces.sqlite`.
    public static var defaultPath: String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share").path
        return URL(fileURLWithPath: base).appendingPathComponent("spotter/faces.sqlite").path
    }

    /// Adds one embedding (and the aligned crop it came from) to `name`, creating the person.
    ///
    /// - Throws: ``FaceError/invalidName(_:)``, ``FaceError/dimensionMismatch(gallery:embedder:)``, ``FaceError/galleryFailed(path:reason:)``.
    public func enroll(name: String, embedding: [Float], crop: Image?, source: String?) throws {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard (1...100).contains(trimmed.count), !trimmed.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }) else {
            throw FaceError.invalidName(name)
        }
        if let dimension = try dimension(), dimension != embedding.count {
            throw FaceError.dimensionMismatch(gallery: dimension, embedder: embedding.count)
        }
        let png = try crop.map { try ImageFile.encode($0, format: .png) }
        try access { db in
            let now = ISO8601DateFormatter().string(from: Date())
            try db.execute(sql: "INSERT INTO person (name, created_at) VALUES (?, ?) ON CONFLICT(name) DO NOTHING", arguments: [trimmed, now])
            let id = try Int64.fetchOne(db, sql: "SELECT id FROM person WHERE name = ?", arguments: [trimmed])!
            try db.execute(sql: "INSERT INTO face (person_id, embedding, crop_png, source, created_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [id, Self.blob(embedding), png.map { Data($0) }, source, now])
        }
    }

    /// Everyone enrolled, by name.
    public func people() throws -> [Person] {
        try access(write: false) { db in
            try Row.fetchAll(db, sql: "SELECT name, (SELECT COUNT(*) FROM face WHERE person_id = person.id) AS n FROM person ORDER BY name")
                .map { Person(name: $0["name"], count: $0["n"]) }
        }
    }

    /// Deletes `name` with every embedding and crop (overwritten in the file, and the write-ahead
    /// log emptied); false when there is no such person.
    @discardableResult
    public func remove(name: String) throws -> Bool {
        let removed = try access { db in
            try db.execute(sql: "DELETE FROM person WHERE name = ?", arguments: [name.trimmingCharacters(in: .whitespaces)])
            return db.changesCount > 0
        }
        if removed {
            do { _ = try database.writeWithoutTransaction { try $0.checkpoint(.truncate) } } catch {
                throw FaceError.galleryFailed(path: path, reason: Self.reason(error))
            }
        }
        return removed
    }

    /// The aligned crops enrolled for `name`, as PNG bytes.
    public func crops(of name: String) throws -> [[UInt8]] {
        try access(write: false) { db in
            try Data.fetchAll(db, sql: "SELECT crop_png FROM face JOIN person ON person.id = face.person_id WHERE name = ? AND crop_png IS NOT NULL",
                              arguments: [name]).map { [UInt8]($0) }
        }
    }

    /// Every enrolled embedding with its person's name; load once to identify many faces.
    public func embeddings() throws -> [(name: String, embedding: [Float])] {
        try access(write: false) { db in
            try Row.fetchAll(db, sql: "SELECT name, embedding FROM face JOIN person ON person.id = face.person_id ORDER BY face.id")
                .map { ($0["name"], Self.floats($0["embedding"])) }
        }
    }

    /// The nearest enrolled person to `embedding`; `name` is nil beyond `threshold`.
    public func identify(_ embedding: [Float], threshold: Float = FaceGallery.defaultThreshold) throws -> Match {
        Self.nearest(embedding, in: try embeddings(), threshold: threshold)
    }

    /// The nearest of `enrolled` to `embedding`; `name` is nil beyond `threshold`.
    public static func nearest(_ embedding: [Float], in enrolled: [(name: String, embedding: [Float])], threshold: Float) -> Match {
        var best: (String, Float)?
        for (name, other) in enrolled where other.count == embedding.count {
            let distance = FaceEmbedder.distance(embedding, other)
            if best == nil || distance < best!.1 { best = (name, distance) }
        }
        guard let best else { return Match(name: nil, distance: nil, nearest: nil) }
        return Match(name: best.1 <= threshold ? best.0 : nil, distance: best.1, nearest: best.0)
    }

    private func dimension() throws -> Int? {
        try access(write: false) { db in try Int.fetchOne(db, sql: "SELECT length(embedding) / 4 FROM face LIMIT 1") }
    }

    private func access<T>(write: Bool = true, _ body: (Database) throws -> T) throws -> T {
        do {
            return write ? try database.write(body) : try database.read(body)
        } catch let error as FaceError {
            throw error
        } catch {
            throw FaceError.galleryFailed(path: path, reason: Self.reason(error))
        }
    }

    /// Little-endian float32s.
    static func blob(_ floats: [Float]) -> Data {
        var data = Data(capacity: floats.count * 4)
        for value in floats { withUnsafeBytes(of: value.bitPattern.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }

    static func floats(_ data: Data) -> [Float] {
        let bytes = [UInt8](data)
        return (0..<bytes.count / 4).map { i in
            Float(bitPattern: UInt32(bytes[4 * i]) | UInt32(bytes[4 * i + 1]) << 8 | UInt32(bytes[4 * i + 2]) << 16 | UInt32(bytes[4 * i + 3]) << 24)
        }
    }

    private static func reason(_ error: Error) -> String {
        (error as? DatabaseError)?.message ?? "\(error)"
    }
}
