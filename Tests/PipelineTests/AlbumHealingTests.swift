import Detection
import Foundation
import Imaging
import Media
import Pipeline
import Synchronization
import Testing
import TestSupport

/// An album whose index is damaged, locked or out of step with its files heals without losing a
/// clip: each clip's record beside it, and its own tags, rebuild what the index lost.
@Suite struct AlbumHealingTests {
    static let walk = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path

    /// Two clips recorded by the clip session (so files, records and rows are what `record` writes).
    static func recordedAlbum(_ name: String) throws -> (URL, [ClipEntry]) {
        let directory = try temporaryDirectory(name)
        let album = try Album(directory: directory)
        for clip in 0..<2 {
            let reader = try VideoReader(path: walk)
            let session = try ClipSession(album: album, source: "/videos/walk-\(clip).mkv", options: .init(frameRate: 30), events: { _ in })
            while let frame = try reader.nextFrame() {
                let box = Rect(minX: 100, minY: 50, maxX: 300, maxY: 400)
                let label = clip == 0 ? "person" : "dog"
                try session.consume(DetectedFrame(frame: frame, detections: [Detection(classIndex: 0, label: label, score: 0.8, box: box,
                                                                                       normalizedBox: box)], inferenceMilliseconds: 0))
            }
            try session.finish()
        }
        return (directory, try album.clips())
    }

    /// Garbage over the header, a zeroed page, a truncated file and a table of other columns: the
    /// damaged index is kept aside and a new one lists every clip with its labels and times.
    @Test(arguments: ["garbage", "zeroed page", "truncated", "old schema"])
    func aDamagedIndexIsKeptAsideAndRebuiltFromTheClips(damage: String) throws {
        let (directory, before) = try Self.recordedAlbum("heal-\(damage.replacingOccurrences(of: " ", with: "-"))")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(before.count == 2 && before.allSatisfy { $0.startedAt != nil && $0.endedAt != nil })
        let index = directory.appendingPathComponent("index.sqlite").path
        let handle = try #require(FileHandle(forUpdatingAtPath: index))
        switch damage {
        case "garbage": try handle.write(contentsOf: Data(repeating: 0x47, count: 100))
        case "zeroed page":
            try handle.seek(toOffset: 4096)
            try handle.write(contentsOf: Data(count: 4096))
        case "truncated": try handle.truncate(atOffset: 3000)
        default:
            try handle.close()
            _ = try run("sqlite3", [index, "DROP TABLE clips; CREATE TABLE clips (id INTEGER PRIMARY KEY, path TEXT);"])
        }
        try? handle.close()
        let healed = try Album(directory: directory)
        let recovery = try #require(healed.recovery)
        #expect(recovery.rebuilt == 2 && FileManager.default.fileExists(atPath: recovery.keptAs), "\(recovery)")
        let after = try healed.clips()
        let strip = { (entries: [ClipEntry]) in entries.map { entry -> ClipEntry in var copy = entry; copy.id = nil; copy.createdAt = ""; return copy } }
        #expect(strip(after).sorted { $0.clip < $1.clip } == strip(before).sorted { $0.clip < $1.clip })
    }

    /// A clip whose file cannot be removed stays listed (and is not brought back by a repair later,
    /// since it never left); a clip deleted normally is gone for good, also after a repair.
    @Test func deletionRemovesTheFileFirstAndNeverResurrects() throws {
        let (directory, clips) = try Self.recordedAlbum("heal-delete")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let stuck = clips[0], gone = clips[1]
        // A folder where the clip's file was: unlink(2) fails, as for a file the server may not remove.
        let stuckPath = directory.appendingPathComponent(stuck.clip).path
        try FileManager.default.removeItem(atPath: stuckPath)
        try FileManager.default.createDirectory(atPath: stuckPath + "/x", withIntermediateDirectories: true)
        #expect(throws: AlbumError.self) { try album.delete(id: stuck.id!) }
        #expect(try album.clip(id: stuck.id!) != nil)
        #expect(try album.delete(id: gone.id!))
        let report = try album.repair()
        #expect(report.adopted.isEmpty, "\(report.adopted)")
        #expect(try album.clips().map(\.clip) == [stuck.clip])
    }

    /// A clip whose row was never written (the index locked past its busy timeout, or the process
    /// killed after the clip ended) is indexed by a repair from its record: labels and times kept.
    @Test func aClipWithoutItsRowIsIndexedFromItsRecord() throws {
        let (directory, clips) = try Self.recordedAlbum("heal-record")
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try run("sqlite3", [directory.appendingPathComponent("index.sqlite").path, "DELETE FROM clips WHERE labels = 'dog';"])
        let album = try Album(directory: directory)
        let report = try album.repair()
        let adopted = try #require(report.adopted.first)
        #expect(report.adopted.count == 1 && adopted.labels == "dog" && !adopted.incomplete && adopted.startedAt != nil)
        #expect(adopted.frames == clips.first { $0.labels == "dog" }?.frames)
    }

    /// An album this process may not write (a read-only copy here: a folder without write
    /// permission is no obstacle to root) is listed from a private copy of its index.
    @Test func aReadOnlyAlbumIsListed() throws {
        let (directory, clips) = try Self.recordedAlbum("heal-readonly")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(readingOnly: directory)
        #expect(try album.clips().map(\.clip) == clips.map(\.clip))
    }

    /// Two processes repairing one album at once (cluster nodes taking over a dead node's sources
    /// together) index each orphaned clip exactly once: the second looks again under the clip's lock.
    @Test func concurrentRepairsIndexEachOrphanOnce() throws {
        let (directory, clips) = try Self.recordedAlbum("heal-concurrent")
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent(try #require(clips.first).clip)
        let orphans = (1...6).map { String(format: "clips/20990101T000000.000Z-%03d.mp4", $0) }
        for orphan in orphans { try FileManager.default.copyItem(at: source, to: directory.appendingPathComponent(orphan)) }
        let first = try Album(directory: directory), second = try Album(directory: directory)
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            do {
                // The second starts while the first is decoding its first orphan.
                if index == 1 { Thread.sleep(forTimeInterval: 0.02) }
                _ = try (index == 0 ? first : second).repair()
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        let rows = try Album(directory: directory).clips().map(\.clip)
        #expect(rows.sorted() == (clips.map(\.clip) + orphans).sorted(), "\(rows)")
    }
}
