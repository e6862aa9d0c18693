import Foundation
import Pipeline
import Testing
import TestSupport

@Suite struct AlbumRetentionTests {
    /// An album of four clips of 1000 bytes each (a thumbnail and snapshot of 100 bytes beside
    /// each), created 40, 30, 20 and 10 days ago.
    static func album() throws -> (Album, URL, [ClipEntry]) {
        let directory = try temporaryDirectory("retention")
        let album = try Album(directory: directory)
        let now = Date()
        var entries: [ClipEntry] = []
        for days in [40.0, 30, 20, 10] {
            let reservation = try album.reserveClip()
            try Data(count: 1000).write(to: URL(fileURLWithPath: reservation.path))
            try Data(count: 100).write(to: directory.appendingPathComponent(reservation.thumbnail))
            try Data(count: 100).write(to: directory.appendingPathComponent((reservation.thumbnail as NSString).deletingPathExtension + "-full.jpg"))
            reservation.release()
            entries.append(try album.add(ClipEntry(
                id: nil, source: "cam", clip: reservation.clip, thumbnail: reservation.thumbnail, start: 0, end: 1, duration: 1, frames: 25,
                labels: "person", bestScore: 0.9, createdAt: ISO8601DateFormatter().string(from: now.addingTimeInterval(-days * 86400)))))
        }
        return (album, directory, entries)
    }

    static func files(_ directory: URL) throws -> Int {
        try ["clips", "thumbnails"].reduce(0) { $0 + (try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent($1).path).count) }
    }

    @Test func clipsOlderThanTheAgeGoWithTheirThumbnailsAndRows() throws {
        let (album, directory, entries) = try Self.album()
        defer { try? FileManager.default.removeItem(at: directory) }
        let deleted = try album.prune(Retention(maxAge: 25 * 86400))
        #expect(deleted.map(\.id) == entries.prefix(2).map(\.id))
        #expect(try album.clips().map(\.id) == entries.suffix(2).map(\.id))
        #expect(try Self.files(directory) == 2 * 3, "two clips, each with a thumbnail and a snapshot, are left")
    }

    @Test func theOldestClipsGoUntilTheAlbumFitsItsSize() throws {
        let (album, directory, entries) = try Self.album()
        defer { try? FileManager.default.removeItem(at: directory) }
        // 1200 bytes per clip: a 2500-byte album keeps the newest two.
        let deleted = try album.prune(Retention(maxBytes: 2500))
        #expect(deleted.map(\.id) == entries.prefix(2).map(\.id))
        #expect(try album.clips().map(\.id) == entries.suffix(2).map(\.id))
        #expect(try album.prune(Retention(maxBytes: 2500)).isEmpty, "a second pass has nothing to do")
        #expect(try album.prune(Retention()).isEmpty)
    }
}
