import Foundation
import ModelStore
import Testing
import TestSupport

@Suite(.serialized) struct ModelStoreTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    func store(_ entries: [CatalogEntry], root: URL, configure: (inout ModelStore.Options) -> Void = { _ in }) -> ModelStore {
        var options = ModelStore.Options(root: root, offline: false)
        // Generous, so a loaded CI machine never looks like a stalled server; the stall test sets 1 s.
        options.stallTimeout = 10
        options.connectTimeout = 10
        configure(&options)
        return ModelStore(catalog: Catalog(entries: entries), options: options)
    }

    @Test func fullDownloadLandsInTheCacheWithTheRightChecksumAndIsNotFetchedAgain() throws {
        let root = try temporaryCache("full")
        let store = store([server.entry("ssd", file: "model.zip")], root: root)
        var progress: [DownloadProgress] = []
        let model = try store.resolve("ssd") { if case .progress(let p) = $0 { progress.append(p) } }

        #expect(model.lastPathComponent == "detect.tflite")
        #expect(try sha256sum(model) == sha256sum(Fixtures.detectModel))
        #expect(try sha256sum(model.deletingLastPathComponent().appendingPathComponent("labelmap.txt"))
                == sha256sum(Fixtures.shared.appendingPathComponent("models/coco-ssd-mobilenet-v1/labelmap.txt")))
        #expect(progress.last?.received == server.files["model.zip"]?.size && progress.last?.total == server.files["model.zip"]?.size)
        let cached = try #require(try store.cached("ssd"))
        #expect(cached.sha256 == server.files["model.zip"]?.sha256)

        let again = try store.resolve("ssd")
        #expect(again == model)
        #expect(try server.requests().map(\.path) == ["/files/model.zip"])
        // Nothing is left behind but the item and its lock.
        #expect(listing(root.appendingPathComponent("downloads")).isEmpty && listing(root.appendingPathComponent("staging")).isEmpty)
    }

    @Test func aSingleFileModelIsCheckedAndCachedUnderItsName() throws {
        let root = try temporaryCache("file")
        let entry = server.entry("single", file: "detect.tflite", packaging: .file, files: ["model.tflite"])
        let model = try store([entry], root: root).resolve("single")
        #expect(model.lastPathComponent == "model.tflite")
        #expect(try sha256sum(model) == server.files["detect.tflite"]?.sha256)
    }

    @Test func aDroppedConnectionIsResumedWithARangeRequestOnTheNextPull() throws {
        let root = try temporaryCache("drop")
        let store = store([server.entry("ssd", mode: "drop", file: "model.zip")], root: root) { $0.retries = 0 }
        #expect {
            try store.pull("ssd")
        } throws: { error in
            guard case .interrupted(_, let received, _) = error as? StoreError else { return false }
            return received > 0
        }
        #expect(try store.cached("ssd") == nil)
        let kept = listing(root.appendingPathComponent("downloads")).filter { $0.hasSuffix(".part") }
        #expect(kept.count == 1)
        let partSize = try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent("downloads/\(kept[0])").path)[.size] as? Int

        let model = try store.pull("ssd").mainFile
        #expect(try sha256sum(model) == sha256sum(Fixtures.detectModel))
        let requests = try server.requests()
        #expect(requests.count == 2)
        #expect(requests.last?.range == "bytes=\(partSize ?? -1)-", "\(requests)")
        #expect(requests.last?.if_range != nil)
    }

    @Test func withRetriesOnePullRecoversFromADroppedConnection() throws {
        let root = try temporaryCache("retry")
        var events: [StoreEvent] = []
        let model = try store([server.entry("ssd", mode: "drop", file: "model.zip")], root: root).resolve("ssd") { events.append($0) }
        #expect(try sha256sum(model) == sha256sum(Fixtures.detectModel))
        #expect(events.contains { if case .retrying = $0 { return true } else { return false } })
        #expect(try server.requests().compactMap(\.range).count == 1)
    }

    /// A failed pull leaves an already cached item and the rest of the cache exactly as they were.
    func expectFailure(_ entry: CatalogEntry, configure: (inout ModelStore.Options) -> Void = { _ in },
                       sourceLocation: SourceLocation = #_sourceLocation, _ matches: (StoreError) -> Bool) throws {
        let root = try temporaryCache("fail")
        let good = server.entry("good", file: "detect.tflite", packaging: .file, files: ["detect.tflite"])
        let store = store([good, entry], root: root, configure: configure)
        try store.pull("good")
        let before = listing(root).filter { !$0.hasPrefix("locks/") }
        var thrown: StoreError?
        do { try store.pull(entry.name) } catch let error as StoreError { thrown = error }
        let error = try #require(thrown, "pull of \(entry.url) did not fail", sourceLocation: sourceLocation)
        #expect(matches(error), "unexpected error: \(error)", sourceLocation: sourceLocation)
        #expect(error.description.contains(entry.url), "the message names the URL: \(error)", sourceLocation: sourceLocation)
        let after = listing(root).filter { !$0.hasPrefix("locks/") }
        let resumable: Bool
        if case .stalled = error { resumable = true } else { resumable = false }
        // Only a transfer that broke off keeps its bytes (to resume); nothing else is left behind.
        #expect(after.filter { !$0.hasPrefix("downloads/") } == before, "the cache changed", sourceLocation: sourceLocation)
        #expect(after.contains { $0.hasPrefix("downloads/") } == resumable, "downloads: \(after)", sourceLocation: sourceLocation)
        #expect(try store.cached(entry.name) == nil, sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: root.deletingLastPathComponent().appendingPathComponent("escape.txt").path))
    }

    @Test func aWrongChecksumIsRefused() throws {
        try expectFailure(server.entry("ssd", file: "model.zip", sha256: String(repeating: "0", count: 64))) {
            if case .checksumMismatch(_, _, let actual) = $0 { return actual == server.files["model.zip"]?.sha256 } else { return false }
        }
    }

    @Test(arguments: [404, 500]) func anHTTPErrorNamesTheStatus(status: Int) throws {
        try expectFailure(server.entry("ssd", mode: "status", file: String(status), sha256: "", size: nil)) {
            if case .httpStatus(_, let code) = $0 { return code == status } else { return false }
        }
    }

    @Test func aStalledServerTimesOut() throws {
        let started = Date()
        try expectFailure(server.entry("ssd", mode: "stall", file: "model.zip"), configure: { $0.retries = 0; $0.stallTimeout = 1 }) {
            if case .stalled(_, let seconds, let received) = $0 { return seconds == 1 && received == 1000 } else { return false }
        }
        #expect(Date().timeIntervalSince(started) < 15)
    }

    @Test func anHTMLPageInsteadOfAZipIsRefused() throws {
        try expectFailure(server.entry("ssd", mode: "html", file: "model.zip", sha256: "", size: nil)) {
            if case .unexpectedContent(_, let expected, let found) = $0 {
                return expected == "a zip archive" && found.contains("HTML") && found.contains("Sign in")
            }
            return false
        }
    }

    @Test func aZipEntryEscapingItsFolderIsRefused() throws {
        try expectFailure(server.entry("ssd", file: "evil.zip")) {
            if case .unsafeArchiveEntry(_, let entry) = $0 { return entry == "../escape.txt" } else { return false }
        }
    }

    @Test func aDamagedZipIsRefused() throws {
        try expectFailure(server.entry("ssd", file: "corrupt.zip")) {
            if case .invalidArchive(_, let reason) = $0 { return reason.contains("detect.tflite") } else { return false }
        }
    }

    @Test func aZipUnpackingPastTheLimitIsRefused() throws {
        try expectFailure(server.entry("ssd", file: "bomb.zip", files: ["detect.tflite"]), configure: { $0.maxExtractedBytes = 16 << 20 }) {
            if case .archiveTooLarge(_, let limit) = $0 { return limit == 16 << 20 } else { return false }
        }
    }

    @Test func offlineWithAnEmptyCacheSaysHowToPull() throws {
        let root = try temporaryCache("offline")
        let store = store([server.entry("ssd", file: "model.zip")], root: root) { $0.offline = true }
        #expect { try store.resolve("ssd") } throws: { error in
            (error as? StoreError) == .offline(name: "ssd", kind: .model) && "\(error)".contains("spotter models pull ssd")
        }
        #expect(try server.requests().isEmpty)
    }

    @Test func removeDeletesOnlyThatItem() throws {
        let root = try temporaryCache("rm")
        let store = store([server.entry("ssd", file: "model.zip"),
                           server.entry("single", file: "detect.tflite", packaging: .file, files: ["detect.tflite"])], root: root)
        try store.pull("ssd")
        try store.pull("single")
        #expect(try store.remove("ssd"))
        #expect(try store.cached("ssd") == nil && store.cached("single") != nil)
        #expect(try !store.remove("ssd"))
    }

    @Test func catalogEntriesThatWouldWriteOutsideTheCacheAreRefused() throws {
        let root = try temporaryCache("catalog")
        for entry in [server.entry("../outside", file: "model.zip"),
                      server.entry("ssd", file: "detect.tflite", packaging: .file, files: ["../detect.tflite"])] {
            let file = root.appendingPathComponent("catalog.json")
            try JSONEncoder().encode([entry]).write(to: file)
            #expect { try Catalog.builtIn.merging(contentsOf: file) } throws: { error in
                if case .invalidCatalog = error as? StoreError { return true } else { return false }
            }
            #expect { try store([entry], root: root).pull(entry.name) } throws: { error in
                if case .invalidCatalog = error as? StoreError { return true } else { return false }
            }
        }
        #expect(try server.requests().isEmpty)
    }

    @Test func aURLIsCachedByItsAddress() throws {
        let root = try temporaryCache("url")
        let store = store([], root: root)
        let model = try store.resolve(server.url("files", "detect.tflite"))
        #expect(model.lastPathComponent == "detect.tflite")
        #expect(try sha256sum(model) == server.files["detect.tflite"]?.sha256)
        _ = try store.resolve(server.url("files", "detect.tflite"))
        #expect(try server.requests().count == 1)
        #expect { try store.resolve("no-such-model") } throws: { error in
            if case .unknownName("no-such-model", _) = error as? StoreError { return true } else { return false }
        }
    }
}
