import Crypto
import Foundation

/// A model or video in the cache.
public struct CachedItem: Codable, Sendable, Equatable {
    /// The catalog name, or the URL for items fetched by URL.
    public var name: String
    public var url: String
    /// SHA-256 of the download as it arrived (the zip, for archives).
    public var sha256: String
    /// Bytes downloaded.
    public var size: Int
    /// The files, the main one first, relative to `folder`.
    public var files: [String]
    public var fetched: Date
    /// The item's folder in the cache (not stored in the manifest).
    public var folder: URL { URL(fileURLWithPath: folderPath) }
    var folderPath: String = ""

    enum CodingKeys: String, CodingKey { case name, url, sha256, size, files, fetched }

    /// The model or video file.
    public var mainFile: URL { folder.appendingPathComponent(files[0]) }
}

/// What the store is doing, for progress displays.
public enum StoreEvent: Sendable, Equatable {
    /// Another process or thread is pulling the same item; this one waits for it.
    case waitingForOtherPull(name: String)
    case downloading(url: String, resumingAt: Int)
    case progress(DownloadProgress)
    /// A transfer failed and is tried again (resuming).
    case retrying(url: String, attempt: Int, reason: String)
    case verifying(name: String)
}

/// Downloads, checks and caches models and sample videos.
///
/// Resolution order for a reference (`resolve`): an existing file path; then the cache; then a
/// download (catalog names and http(s) URLs), unless `Options.offline`. Cache layout under
/// `Options.root`:
///
///     models/NAME/      samples/NAME/      urls/KEY/        one folder per item, with .spotter.json
///     downloads/KEY.part (+ .json)         partial downloads, resumed with HTTP Range
///     locks/KEY.lock     staging/          pull locks; folders being filled before their rename
///
/// An item's folder appears by one `rename` after its size, SHA-256 and contents were checked, so a
/// folder in `models/` is always complete. Thread-safe; processes sharing a cache serialize pulls
/// of the same item with a file lock.
public final class ModelStore: Sendable {
    public struct Options: Sendable {
        /// The cache folder. Default: `$XDG_CACHE_HOME/spotter`, else `~/.cache/spotter`.
        public var root: URL
        /// Never download; a missing item is an error. Default: `SPOTTER_OFFLINE=1` in the environment.
        public var offline: Bool
        /// Seconds to wait for a connection. Default 15.
        public var connectTimeout: Double = 15
        /// Seconds without a byte before a transfer is abandoned (and later resumed). Default 30.
        public var stallTimeout: Double = 30
        /// Times a broken or stalled transfer is resumed within one pull. Default 2.
        public var retries: Int = 2
        /// Largest download accepted, in bytes. Default 4 GiB.
        public var maxDownloadBytes: Int = 4 << 30
        /// Largest total an archive may unpack to, in bytes. Default 4 GiB.
        public var maxExtractedBytes: Int = 4 << 30

        public init(root: URL = Options.defaultRoot(), offline: Bool = Options.offlineFromEnvironment()) {
            self.root = root
            self.offline = offline
        }

        public static func defaultRoot(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
            if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
                return URL(fileURLWithPath: xdg).appendingPathComponent("spotter", isDirectory: true)
            }
            let home = environment["HOME"] ?? NSHomeDirectory()
            return URL(fileURLWithPath: home).appendingPathComponent(".cache/spotter", isDirectory: true)
        }

        public static func offlineFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
            ["1", "true", "yes"].contains(environment["SPOTTER_OFFLINE"]?.lowercased() ?? "")
        }
    }

    public let catalog: Catalog
    public let options: Options

    public init(catalog: Catalog = .builtIn, options: Options = Options()) {
        self.catalog = catalog
        self.options = options
    }

    /// The local file for a path, catalog name or URL, downloading it if needed and allowed.
    /// - Throws: `StoreError.noSuchFile`, `.unknownName`, `.offline`, and every download or check failure.
    public func resolve(_ reference: String, events: (StoreEvent) -> Void = { _ in }) throws -> URL {
        if FileManager.default.fileExists(atPath: reference) { return URL(fileURLWithPath: reference) }
        return try pull(reference, events: events).mainFile
    }

    /// The cached item for a catalog name or URL, or nil.
    public func cached(_ reference: String) throws -> CachedItem? {
        try readManifest(in: try item(for: reference).folder)
    }

    /// Fetches a catalog item or URL into the cache unless it is there already (or `force`).
    /// - Throws: `StoreError`; on any failure the cache keeps what it had (a partial download is
    ///   kept for resuming when the transfer broke off, dropped when the bytes were wrong).
    @discardableResult
    public func pull(_ reference: String, force: Bool = false, events: (StoreEvent) -> Void = { _ in }) throws -> CachedItem {
        let item = try item(for: reference)
        if !force, let cached = try readManifest(in: item.folder) { return cached }
        guard !options.offline else { throw StoreError.offline(name: reference, kind: item.kind) }
        try prepareFolders()
        let lock = try lock(item) { events(.waitingForOtherPull(name: reference)) }
        defer { withExtendedLifetime(lock) {} }
        // Whoever held the lock may have just finished this item.
        if !force, let cached = try readManifest(in: item.folder) { return cached }
        sweepStaging()

        let part = folder("downloads").appendingPathComponent(item.key + ".part")
        let transfer = try download(item, into: part, events: events)
        events(.verifying(name: reference))
        let staging = try makeStaging()
        defer { try? FileManager.default.removeItem(at: staging) }
        let content = staging.appendingPathComponent("item", isDirectory: true)
        let manifest: CachedItem
        do {
            try FileManager.default.createDirectory(at: content, withIntermediateDirectories: false)
            manifest = try verify(item, part: part, transfer: transfer, into: content)
        } catch {
            // Wrong bytes are not worth resuming.
            discardPart(part)
            throw error
        }
        try install(content, as: item.folder, trash: staging)
        discardPart(part)
        var installed = manifest
        installed.folderPath = item.folder.path
        return installed
    }

    /// Deletes a cached item; returns whether there was one.
    public func remove(_ reference: String) throws -> Bool {
        let item = try item(for: reference)
        guard FileManager.default.fileExists(atPath: item.folder.path) else { return false }
        try prepareFolders()
        let lock = try lock(item) {}
        defer { withExtendedLifetime(lock) {} }
        let trash = try makeStaging()
        defer { try? FileManager.default.removeItem(at: trash) }
        do {
            try FileManager.default.moveItem(at: item.folder, to: trash.appendingPathComponent("removed"))
        } catch {
            throw StoreError.cache(path: item.folder.path, reason: error.localizedDescription)
        }
        return true
    }

    // MARK: - Items

    /// What to fetch and where it goes.
    struct Item {
        var name: String
        var url: String
        var packaging: CatalogEntry.Packaging
        var files: [String]
        var size: Int?
        var sha256: String?
        var kind: CatalogEntry.Kind
        var folder: URL
        /// File-name-safe key for locks and partial downloads.
        var key: String
    }

    func item(for reference: String) throws -> Item {
        if let entry = catalog.entry(named: reference) {
            try entry.validate(source: "the catalog")
            let folder = folder(entry.kind == .model ? "models" : "samples").appendingPathComponent(entry.name, isDirectory: true)
            return Item(name: entry.name, url: entry.url, packaging: entry.packaging, files: entry.files, size: entry.size,
                        sha256: entry.sha256?.lowercased(), kind: entry.kind, folder: folder, key: "\(entry.kind.rawValue)-\(entry.name)")
        }
        if let url = URL(string: reference), ["http", "https", "file"].contains(url.scheme?.lowercased() ?? "") {
            let key = "url-" + Self.hex(SHA256.hash(data: Data(reference.utf8))).prefix(16)
            var file = url.lastPathComponent
            if file.isEmpty || file == "/" || ArchiveExtractor.safeComponents(file)?.count != 1 { file = "download" }
            let packaging: CatalogEntry.Packaging = file.lowercased().hasSuffix(".zip") ? .zip : .file
            return Item(name: reference, url: reference, packaging: packaging, files: packaging == .zip ? [] : [file], size: nil,
                        sha256: nil, kind: .model, folder: folder("urls").appendingPathComponent(key, isDirectory: true), key: key)
        }
        if reference.contains("/") || reference.contains(".") { throw StoreError.noSuchFile(path: reference) }
        throw StoreError.unknownName(reference, known: catalog.entries.map(\.name))
    }

    // MARK: - Steps of a pull

    private func download(_ item: Item, into part: URL, events: (StoreEvent) -> Void) throws -> TransferResult {
        let limits = TransferLimits(connectTimeout: options.connectTimeout, stallTimeout: options.stallTimeout,
                                    maxBytes: min(options.maxDownloadBytes, item.size ?? .max))
        var attempt = 0
        var restarted = false
        while true {
            let meta = readPartMeta(part, url: item.url)
            let existing = Self.size(of: part)
            events(.downloading(url: item.url, resumingAt: existing))
            do {
                let result = try withoutActuallyEscaping(events) { events in
                    try HTTPDownload.fetch(item.url, into: part, validator: meta, limits: limits,
                                           started: { self.writePartMeta(part, url: item.url, validator: $0) },
                                           progress: { events(.progress($0)) })
                }
                return result
            } catch StoreError.httpStatus(_, 416) where existing > 0 && !restarted {
                // The part is not a prefix of what the server has now: start over once.
                discardPart(part)
                restarted = true
            } catch let error as StoreError {
                switch error {
                case .stalled, .interrupted:
                    attempt += 1
                    guard attempt <= options.retries else { throw error }
                    events(.retrying(url: item.url, attempt: attempt, reason: error.description))
                default:
                    // An empty part (an error status before any byte) is not worth keeping.
                    if Self.size(of: part) == 0 { discardPart(part) }
                    throw error
                }
            }
        }
    }

    /// Checks the downloaded bytes and lays out the item's files in `staging`.
    private func verify(_ item: Item, part: URL, transfer: TransferResult, into staging: URL) throws -> CachedItem {
        // What the bytes are first: "an HTML page titled Sign in" says more than a size mismatch.
        let head = try Self.head(of: part, count: 512)
        if item.packaging == .zip {
            guard head.starts(with: [0x50, 0x4B, 0x03, 0x04]) || head.starts(with: [0x50, 0x4B, 0x05, 0x06]) else {
                throw StoreError.unexpectedContent(url: item.url, expected: "a zip archive", found: Self.describe(head, contentType: transfer.contentType))
            }
        } else {
            try checkContent(head, item: item, contentType: transfer.contentType)
        }
        let size = transfer.size
        if let expected = item.size, expected != size { throw StoreError.sizeMismatch(url: item.url, expected: expected, actual: size) }
        let digest = try Self.sha256(of: part)
        if let expected = item.sha256, expected != digest {
            throw StoreError.checksumMismatch(url: item.url, expected: expected, actual: digest)
        }
        var files = item.files
        switch item.packaging {
        case .zip:
            let archive: Data
            do { archive = try Data(contentsOf: part, options: .alwaysMapped) } catch {
                throw StoreError.cache(path: part.path, reason: error.localizedDescription)
            }
            try ArchiveExtractor.extract(archive, from: item.url, into: staging, limit: options.maxExtractedBytes)
            if files.isEmpty { files = Self.listFiles(in: staging) }
        case .file:
            do {
                try FileManager.default.copyItem(at: part, to: staging.appendingPathComponent(files[0]))
            } catch {
                throw StoreError.cache(path: staging.path, reason: error.localizedDescription)
            }
        }
        for file in files where !FileManager.default.fileExists(atPath: staging.appendingPathComponent(file).path) {
            throw StoreError.missingFile(url: item.url, file: file)
        }
        if files.isEmpty { throw StoreError.invalidArchive(url: item.url, reason: "it holds no files") }
        let manifest = CachedItem(name: item.name, url: item.url, sha256: digest, size: size, files: files, fetched: Date())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        do {
            try encoder.encode(manifest).write(to: staging.appendingPathComponent(Self.manifestName))
        } catch {
            throw StoreError.cache(path: staging.path, reason: error.localizedDescription)
        }
        return manifest
    }

    /// Refuses bytes that are plainly not the promised file: an HTML page for a model or video.
    private func checkContent(_ head: [UInt8], item: Item, contentType: String?) throws {
        let main = item.files[0].lowercased()
        if main.hasSuffix(".tflite") {
            guard head.count >= 8, Array(head[4..<8]) == Array("TFL3".utf8) else {
                throw StoreError.unexpectedContent(url: item.url, expected: "a TensorFlow Lite model", found: Self.describe(head, contentType: contentType))
            }
        } else if Self.looksLikeHTML(head) {
            throw StoreError.unexpectedContent(url: item.url, expected: item.kind == .sample ? "a video" : "a model file",
                                               found: Self.describe(head, contentType: contentType))
        }
    }

    /// Moves a verified folder into place in one rename; an old copy (on `force`) goes to `trash`.
    private func install(_ content: URL, as target: URL, trash: URL) throws {
        do {
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            if FileManager.default.fileExists(atPath: target.path) {
                try FileManager.default.moveItem(at: target, to: trash.appendingPathComponent("replaced"))
            }
        } catch {
            throw StoreError.cache(path: target.path, reason: error.localizedDescription)
        }
        guard rename(content.path, target.path) == 0 else {
            throw StoreError.cache(path: target.path, reason: String(cString: strerror(errno)))
        }
    }

    // MARK: - Cache files

    static let manifestName = ".spotter.json"

    private func folder(_ name: String) -> URL { options.root.appendingPathComponent(name, isDirectory: true) }

    private func prepareFolders() throws {
        for name in ["models", "samples", "urls", "downloads", "locks", "staging"] {
            do {
                try FileManager.default.createDirectory(at: folder(name), withIntermediateDirectories: true)
            } catch {
                throw StoreError.cache(path: folder(name).path, reason: error.localizedDescription)
            }
        }
    }

    /// Removes staging folders a killed pull left behind (a day old: no pull takes that long).
    private func sweepStaging() {
        let staging = folder("staging")
        let old = Date().addingTimeInterval(-86_400)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: staging.path)) ?? [] {
            let url = staging.appendingPathComponent(name)
            if let modified = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date, modified < old {
                try? FileManager.default.removeItem(at: url)
            }
        }
    }

    /// The item's pull lock, shared by threads and processes using this cache.
    private func lock(_ item: Item, waiting: () -> Void) throws -> FileLock {
        try FileLock(path: folder("locks").appendingPathComponent(item.key + ".lock"), waiting: waiting)
    }

    private func makeStaging() throws -> URL {
        let url = folder("staging").appendingPathComponent(UUID().uuidString, isDirectory: true)
        do { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) } catch {
            throw StoreError.cache(path: url.path, reason: error.localizedDescription)
        }
        return url
    }

    private func readManifest(in folder: URL) throws -> CachedItem? {
        guard let data = try? Data(contentsOf: folder.appendingPathComponent(Self.manifestName)) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard var item = try? decoder.decode(CachedItem.self, from: data), !item.files.isEmpty else { return nil }
        item.folderPath = folder.path
        return item
    }

    private struct PartMeta: Codable { var url: String; var validator: String? }

    private func readPartMeta(_ part: URL, url: String) -> String? {
        guard let data = try? Data(contentsOf: part.appendingPathExtension("json")),
              let meta = try? JSONDecoder().decode(PartMeta.self, from: data), meta.url == url else { return nil }
        return meta.validator
    }

    private func writePartMeta(_ part: URL, url: String, validator: String?) {
        try? JSONEncoder().encode(PartMeta(url: url, validator: validator)).write(to: part.appendingPathExtension("json"))
    }

    private func discardPart(_ part: URL) {
        try? FileManager.default.removeItem(at: part)
        try? FileManager.default.removeItem(at: part.appendingPathExtension("json"))
    }

    // MARK: - Helpers

    static func sha256(of file: URL) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: file.path) else {
            throw StoreError.cache(path: file.path, reason: "cannot open")
        }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hex(hasher.finalize())
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        digest.map { String(format: "%02x", $0) }.joined()
    }

    /// Bytes in `file`, 0 when it does not exist.
    static func size(of file: URL) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
    }

    static func head(of file: URL, count: Int) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: file.path) else { throw StoreError.cache(path: file.path, reason: "cannot open") }
        defer { try? handle.close() }
        return [UInt8]((try? handle.read(upToCount: count)) ?? Data())
    }

    static func looksLikeHTML(_ head: [UInt8]) -> Bool {
        let text = String(decoding: head.prefix(256), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        return text.hasPrefix("<!doctype html") || text.hasPrefix("<html") || text.hasPrefix("<?xml") || text.hasPrefix("<head")
    }

    /// A short human description of downloaded bytes: "an HTML page (text/html): <title>...".
    static func describe(_ head: [UInt8], contentType: String?) -> String {
        let type = contentType.map { " (\($0))" } ?? ""
        if looksLikeHTML(head) {
            let text = String(decoding: head, as: UTF8.self)
            if let start = text.range(of: "<title>", options: .caseInsensitive),
               let end = text.range(of: "</title>", options: .caseInsensitive, range: start.upperBound..<text.endIndex) {
                return "an HTML page\(type) titled \"\(text[start.upperBound..<end.lowerBound].prefix(80))\""
            }
            return "an HTML page\(type)"
        }
        if head.isEmpty { return "an empty file" }
        let printable = head.prefix(32).allSatisfy { (0x20..<0x7F).contains($0) || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        if printable { return "text\(type) starting \"\(String(decoding: head.prefix(40), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))\"" }
        return "\(head.count >= 512 ? "binary data" : "\(head.count) bytes")\(type) starting \(head.prefix(8).map { String(format: "%02x", $0) }.joined(separator: " "))"
    }

    static func listFiles(in folder: URL) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        var files: [String] = []
        while let path = enumerator.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent(path).path, isDirectory: &isDirectory), !isDirectory.boolValue,
               path != manifestName {
                files.append(path)
            }
        }
        // A model first, if there is one.
        return files.sorted { ($0.hasSuffix(".tflite") ? 0 : 1, $0) < ($1.hasSuffix(".tflite") ? 0 : 1, $1) }
    }
}
