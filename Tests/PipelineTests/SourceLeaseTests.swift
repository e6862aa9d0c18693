import Detection
import Foundation
import Imaging
import Media
import Pipeline
import Synchronization
import Testing
import TestSupport

/// A cluster node records a source's clips under its lease: each clip says who recorded it (in
/// its index row and in its own tags), and its row is written only when the lease is still the
/// source's newest; a refused clip is left to a repair, as incomplete.
@Suite struct SourceLeaseTests {
    /// Records the shared walk (a person in every frame: one clip) into `album` under `lease`.
    static func record(into album: Album, lease: SourceLease?, events: Locked<[RecorderEvent]>) throws {
        let reader = try VideoReader(path: AlbumHealingTests.walk)
        var options = ClipSession.Options(frameRate: 30)
        options.sourceID = "s7"
        options.lease = lease
        let session = try ClipSession(album: album, source: "/videos/walk.mkv", options: options, events: { event in
            events.withLock { $0.append(event) }
        })
        while let frame = try reader.nextFrame() {
            let box = Rect(minX: 100, minY: 50, maxX: 300, maxY: 400)
            try session.consume(DetectedFrame(frame: frame, detections: [Detection(classIndex: 0, label: "person", score: 0.8, box: box, normalizedBox: box)],
                                              inferenceMilliseconds: 0))
        }
        try session.finish()
    }

    /// The container tags ffprobe reads from a clip.
    static func tags(_ path: String) throws -> [String: String] {
        let out = try run("ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", path])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "ffprobe: \(out)")
        return ((json["format"] as? [String: Any])?["tags"] as? [String: String]) ?? [:]
    }

    @Test("a refused clip keeps its file and loses its record; a repair indexes it as incomplete, with the node and generation it was recorded under")
    func refusedClipIsLeftToARepair() throws {
        let directory = try temporaryDirectory("lease-refused")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let events = Locked<[RecorderEvent]>([])
        // The verdict comes later, from another thread, as the database's would.
        let lease = SourceLease(node: "n2", generation: 3) { _, decided in
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { decided(false) }
        }
        try Self.record(into: album, lease: lease, events: events)
        #expect(try album.clips().isEmpty, "no row under a refused lease")
        let refused = events.value.compactMap { event -> ClipEntry? in
            if case .clipRefused(let entry) = event { return entry }
            return nil
        }
        #expect(refused.count == 1)
        #expect(!events.value.contains { if case .clipFinished = $0 { true } else { false } })
        let clip = try #require(refused.first?.clip)
        let path = directory.appendingPathComponent(clip).path
        #expect(FileManager.default.fileExists(atPath: path), "the clip stays on disk")
        #expect(!FileManager.default.fileExists(atPath: (path as NSString).deletingPathExtension + ".json"), "its record is gone")
        // The file says who recorded it (read by ffprobe, not by us).
        let tags = try Self.tags(path)
        #expect(tags["spotter_source_id"] == "s7" && tags["spotter_node"] == "n2" && tags["spotter_generation"] == "3", "\(tags)")

        let repaired = try Album(directory: directory).repair()
        let adopted = try #require(repaired.adopted.first)
        #expect(repaired.adopted.count == 1 && adopted.clip == clip && adopted.incomplete)
        #expect(adopted.sourceID == "s7" && adopted.node == "n2" && adopted.generation == 3)
    }

    @Test("an admitted clip's row carries the source id, node and generation; until the verdict the clip is locked against repairs")
    func admittedClipIsIndexedAfterItsVerdict() throws {
        let directory = try temporaryDirectory("lease-admitted")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let events = Locked<[RecorderEvent]>([])
        let repairedMeanwhile = Mutex<[Int]>([])
        let lease = SourceLease(node: "n1", generation: 12) { _, decided in
            // Another node's repair while the verdict is pending: the clip is locked, so skipped.
            let report = try? Album(directory: directory).repair()
            repairedMeanwhile.withLock { $0.append(report?.adopted.count ?? -1) }
            decided(true)
        }
        try Self.record(into: album, lease: lease, events: events)
        #expect(repairedMeanwhile.withLock { $0 } == [0])
        let rows = try album.clips()
        let row = try #require(rows.first)
        #expect(rows.count == 1 && !row.incomplete && row.labels == "person")
        #expect(row.sourceID == "s7" && row.node == "n1" && row.generation == 12)
        let finished = events.value.compactMap { event -> ClipEntry? in
            if case .clipFinished(let entry) = event { return entry }
            return nil
        }
        #expect(finished.map(\.id) == [row.id])
        // The row, its record and the clip's tags agree; a later repair finds nothing to do.
        let report = try album.repair()
        #expect(report.adopted.isEmpty && report.forgotten.isEmpty)
        let tags = try Self.tags(directory.appendingPathComponent(row.clip).path)
        #expect(tags["spotter_node"] == "n1" && tags["spotter_generation"] == "12")
    }

    @Test("counts are written only under a lease that is still the source's newest; without a lease at once")
    func countsAreFencedByTheLease() throws {
        let directory = try temporaryDirectory("lease-counts")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let hour = Album.hour(of: Date())
        func door(_ source: String) -> CountEntry { CountEntry(source: source, hour: hour, kind: "zone", name: "door", direction: "", count: 1) }
        func gate(_ source: String) -> CountEntry { CountEntry(source: source, hour: hour, kind: "line", name: "gate", direction: "in", count: 1) }
        let verdicts = Locked<[Bool]>([])
        func lease(_ admitted: Bool) -> SourceLease {
            SourceLease(node: "n1", generation: 4) { what, decided in
                #expect(what == "counts")
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) {
                    verdicts.withLock { $0.append(admitted) }
                    decided(admitted)
                }
            }
        }
        let plain = CountBuffer(), held = CountBuffer(lease: lease(true)), lost = CountBuffer(lease: lease(false))
        for (buffer, source) in [(plain, "s1"), (held, "s2"), (lost, "s3")] {
            buffer.add(door(source))
            buffer.add(door(source))
            buffer.add(gate(source))
            // Within the interval nothing is written; then everything, at once or after the verdict.
            buffer.flush(to: album, ifOlderThan: .seconds(60))
        }
        #expect(try album.counts(from: hour).isEmpty)
        for buffer in [plain, held, lost] { buffer.flush(to: album) }
        #expect(try album.counts(source: "s1", from: hour).map(\.count).sorted() == [1, 2], "without a lease, written on return")
        #expect(held.waitForVerdicts(seconds: 10) && lost.waitForVerdicts(seconds: 10))
        #expect(Set(verdicts.value) == [false, true] && verdicts.value.count == 2)
        #expect(try album.counts(source: "s2", from: hour).map { "\($0.kind) \($0.name) \($0.count)" }.sorted() == ["line gate 1", "zone door 2"])
        #expect(try album.counts(source: "s3", from: hour).isEmpty, "refused: the lease moved on")
        #expect(lost.refused == 3 && held.refused == 0)
    }

    @Test("an index made before clips said who recorded them gains the columns and keeps its rows")
    func olderIndexGainsTheColumns() throws {
        let (directory, clips) = try AlbumHealingTests.recordedAlbum("lease-older")
        defer { try? FileManager.default.removeItem(at: directory) }
        let index = directory.appendingPathComponent("index.sqlite").path
        for column in ["source_id", "node", "generation"] { _ = try run("sqlite3", [index, "ALTER TABLE clips DROP COLUMN \(column);"]) }
        #expect(!(try run("sqlite3", [index, "PRAGMA table_info(clips);"])).contains("generation"))
        let album = try Album(directory: directory)
        #expect(try album.clips().map(\.clip) == clips.map(\.clip))
        #expect(try run("sqlite3", [index, "SELECT name FROM pragma_table_info('clips') WHERE name IN ('source_id','node','generation') ORDER BY name;"])
            .split(separator: "\n") == ["generation", "node", "source_id"])
    }
}
