import Cluster
import Foundation
import Pipeline
import Testing

/// The shared album's index in PostgreSQL (``ClusterAlbumIndex``) answers every question as an
/// album's own SQLite index does, for the same rows.
@Suite("The album index on a real PostgreSQL")
struct AlbumIndexTests {
    static func entry(_ n: Int, source: String, labels: String, incomplete: Bool = false) -> ClipEntry {
        ClipEntry(id: nil, source: source, clip: "clips/2026112\(n % 10)T000000.000Z-\(String(format: "%03d", n)).mp4", thumbnail: "thumbnails/\(n).jpg",
                  start: Double(n), end: Double(n) + 2.5, duration: 2.6, frames: 26, labels: labels, bestScore: 0.5 + Double(n) / 100,
                  createdAt: "2026-11-2\(n % 10)T10:00:0\(n % 10)Z", incomplete: incomplete, startedAt: "2026-11-26T10:00:00.000+00:00",
                  endedAt: "2026-11-26T10:00:02.500+00:00",
                  objects: [ClipObject(track: n, label: "person", firstSeen: 1, lastSeen: 2, bestScore: 0.75, bestTime: 1.5)],
                  sourceID: "s\(n % 3)", node: incomplete ? "n2" : nil, generation: incomplete ? Int64(n) : nil)
    }

    @Test("rows, queries, deletes and counts answer as the SQLite index does; a clip indexed twice keeps its first row")
    func answersAsSQLiteDoes() async throws {
        let cluster = try await TestCluster()
        defer { cluster.stop() }
        let folders = (0..<2).map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("spotter-index-\(UUID().uuidString.prefix(8))") }
        defer { folders.forEach { try? FileManager.default.removeItem(at: $0) } }
        let local = try Album(directory: folders[0])
        let shared = try Album(directory: folders[1], index: ClusterAlbumIndex(store: cluster.store))
        #expect(!FileManager.default.fileExists(atPath: folders[1].appendingPathComponent("index.sqlite").path))
        #expect(throws: AlbumError.self) { try shared.storedSources() }

        let labels = ["person", "car,person", "dog", "", "bicycle,person"]
        for n in 0..<15 {
            let entry = Self.entry(n, source: n % 2 == 0 ? "/videos/a.mp4" : "rtsp://cam/live", labels: labels[n % labels.count], incomplete: n % 4 == 3)
            let (a, b) = (try local.add(entry), try shared.add(entry))
            #expect(a == b, "row \(n)")
        }
        let again = try shared.add(Self.entry(2, source: "elsewhere", labels: "cat"))
        #expect(again.id == 3 && again.source == "/videos/a.mp4", "\(again)")

        let queries: [Album.Query] = [
            .init(), .init(limit: 4), .init(source: "rtsp://cam/live"), .init(label: "person"), .init(label: "car"),
            .init(createdFrom: "2026-11-23", createdBefore: "2026-11-27"), .init(beforeID: 9, limit: 3), .init(label: "per"), .init(limit: 0),
        ]
        for query in queries { #expect(try local.clips(matching: query) == shared.clips(matching: query), "\(query)") }
        #expect(try local.clips() == shared.clips())
        #expect(try local.clip(id: 5) == shared.clip(id: 5) && shared.clip(id: 5) != nil)
        #expect(try shared.clip(id: 999) == nil)
        #expect(try shared.clipCount() == 15)

        #expect(try local.delete(id: 4) && shared.delete(id: 4))
        #expect(try !shared.delete(id: 4))
        #expect(try local.clips() == shared.clips() && shared.clipCount() == 14)

        let hour = "2026-11-26T10:00:00Z"
        let counts = [
            CountEntry(source: "s1", hour: hour, kind: "zone", name: "door", direction: "", count: 2),
            CountEntry(source: "s1", hour: hour, kind: "line", name: "gate", direction: "in", count: 1),
            CountEntry(source: "s2", hour: "2026-11-26T11:00:00Z", kind: "zone", name: "door", direction: "", count: 5),
        ]
        for album in [local, shared] {
            try album.addCounts(counts)
            try album.addCounts([counts[0]])
        }
        #expect(try local.counts() == shared.counts())
        #expect(try shared.counts(source: "s1").map(\.count) == [1, 4])
        #expect(try local.counts(from: "2026-11-26T11:00:00Z") == shared.counts(from: "2026-11-26T11:00:00Z"))
        #expect(try local.counts(source: "s2", to: hour) == shared.counts(source: "s2", to: hour))
    }

    @Test("a complete clip's row is written only under its source's newest lease, in one statement; incomplete rows always")
    func completeRowsAreFenced() async throws {
        let cluster = try await TestCluster()
        defer { cluster.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-index-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: folder) }
        let shared = try Album(directory: folder, index: ClusterAlbumIndex(store: cluster.store))
        let id = try await cluster.store.addSource(settings: settings)
        let lease = try #require(try await cluster.store.claim(node: "n1", count: 1, seconds: 30).first?.lease)
        func entry(_ n: Int, node: String, generation: Int64, incomplete: Bool = false) -> ClipEntry {
            var entry = Self.entry(n, source: "cam", labels: "person", incomplete: incomplete)
            (entry.sourceID, entry.node, entry.generation) = (id, node, generation)
            return entry
        }
        #expect(try shared.add(entry(1, node: "n1", generation: lease.generation)).id != nil)
        for refused in [entry(2, node: "n1", generation: lease.generation - 1), entry(3, node: "n2", generation: lease.generation)] {
            #expect(throws: AlbumError.rowRefused(clip: refused.clip, reason: "source \(id) has a newer lease than generation "
                                                  + "\(refused.generation!) of node \(refused.node!)")) { try shared.add(refused) }
        }
        #expect(try shared.add(entry(4, node: "n2", generation: 1, incomplete: true)).incomplete)
        #expect(try shared.clips().map(\.clip) == [entry(1, node: "", generation: 0).clip, entry(4, node: "", generation: 0).clip])
    }

    @Test("a database that is away is an index error naming it, not a hang or a crash")
    func anAbsentDatabaseIsAnIndexError() async throws {
        let cluster = try await TestCluster()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-index-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: folder) }
        let shared = try Album(directory: folder, index: ClusterAlbumIndex(store: cluster.store))
        cluster.stop()
        let started = ContinuousClock.now
        #expect {
            try shared.clips(matching: .init())
        } throws: { error in
            guard case AlbumError.indexFailed(let path, _) = error else { return false }
            return path.contains("the cluster's database") && !path.contains("secret")
        }
        #expect(started.duration(to: .now) < .seconds(12))
    }
}
