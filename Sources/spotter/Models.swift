import ArgumentParser
import Foundation
import ModelStore

/// Flags of every command that may fetch a model or video.
struct StoreFlags: ParsableArguments {
    @Flag(help: "Never download; use files and the cache only (also SPOTTER_OFFLINE=1).")
    var offline = false

    /// The store: built-in catalog plus `$SPOTTER_CATALOG`, cache in `$XDG_CACHE_HOME/spotter`
    /// (else `~/.cache/spotter`).
    func makeStore() throws -> ModelStore {
        var options = ModelStore.Options()
        if offline { options.offline = true }
        var catalog = Catalog.builtIn
        if let file = ProcessInfo.processInfo.environment["SPOTTER_CATALOG"], !file.isEmpty {
            catalog = try catalog.merging(contentsOf: URL(fileURLWithPath: file))
        }
        return ModelStore(catalog: catalog, options: options)
    }

    /// The local file for a path, catalog name or URL, downloading it with a progress display.
    func resolve(_ reference: String) throws -> URL {
        if FileManager.default.fileExists(atPath: reference) { return URL(fileURLWithPath: reference) }
        return try resolve(reference, in: makeStore())
    }

    /// A video input: a sample's name becomes its cached file; anything else (a file, a stream URL,
    /// a camera) is passed through.
    func resolveVideo(_ input: String) throws -> String {
        guard !FileManager.default.fileExists(atPath: input), !input.contains("/") else { return input }
        let store = try makeStore()
        guard store.catalog.entry(named: input)?.kind == .sample else { return input }
        return try resolve(input, in: store).path
    }

    private func resolve(_ reference: String, in store: ModelStore) throws -> URL {
        let display = DownloadDisplay(name: reference)
        defer { display.finish() }
        return try store.resolve(reference, events: display.show)
    }
}

/// Shows what the store does on standard error: a byte progress bar on a terminal, one line per
/// step otherwise.
final class DownloadDisplay {
    private let name: String
    private let bar = ProgressBar(total: 0, enabled: true)
    private let terminal = isatty(STDERR_FILENO) != 0

    init(name: String) { self.name = name }

    func show(_ event: StoreEvent) {
        switch event {
        case .waitingForOtherPull(let name):
            note("waiting for another pull of \(name) to finish")
        case .downloading(let url, let offset):
            note(offset > 0 ? "resuming \(url) at \(formatBytes(offset))" : "downloading \(url)")
        case .retrying(_, let attempt, let reason):
            note("retry \(attempt): \(reason)")
        case .verifying(let name):
            if terminal { bar.status("checking \(name)") }
        case .progress(let progress):
            guard terminal else { return }
            var line = "\(name): \(formatBytes(progress.received))"
            if let total = progress.total, total > 0 {
                let fraction = min(1, Double(progress.received) / Double(total))
                let filled = Int(fraction * 24)
                let left = progress.bytesPerSecond > 0 ? Double(total - progress.received) / progress.bytesPerSecond : 0
                line = "\(name) [\(String(repeating: "#", count: filled))\(String(repeating: "-", count: 24 - filled))] "
                    + "\(formatBytes(progress.received))/\(formatBytes(total)) \(Int(fraction * 100))% "
                    + "\(formatBytes(Int(progress.bytesPerSecond)))/s ETA \(Int(left.rounded()))s"
            } else {
                line += " \(formatBytes(Int(progress.bytesPerSecond)))/s"
            }
            bar.status(line)
        }
    }

    func finish() { bar.finish() }

    private func note(_ text: String) {
        bar.finish()
        FileHandle.standardError.write(Data("spotter: \(text)\n".utf8))
    }
}

func formatBytes(_ count: Int) -> String {
    let value = Double(count)
    if count >= 1 << 30 { return String(format: "%.1f GB", value / Double(1 << 30)) }
    if count >= 1 << 20 { return String(format: "%.1f MB", value / Double(1 << 20)) }
    if count >= 1 << 10 { return String(format: "%.0f kB", value / Double(1 << 10)) }
    return "\(count) B"
}

/// `list` for models or samples: a table, or JSON lines.
private func listCatalog(kind: CatalogEntry.Kind, store: ModelStore, json: Bool) throws {
    func row(_ name: String, _ size: String, _ cached: String, _ license: String, _ summary: String) -> String {
        name.padding(toLength: 40, withPad: " ", startingAt: 0) + size.padding(toLength: 10, withPad: " ", startingAt: 0)
            + cached.padding(toLength: 8, withPad: " ", startingAt: 0) + license.padding(toLength: 12, withPad: " ", startingAt: 0) + summary
    }
    if !json { print(row("NAME", "SIZE", "CACHED", "LICENSE", "ABOUT")) }
    for entry in store.catalog.entries where entry.kind == kind {
        let cached = try store.cached(entry.name)
        if json {
            var object: [String: Any] = ["name": entry.name, "url": entry.url, "license": entry.license,
                                         "summary": entry.summary, "cached": cached != nil]
            if let size = entry.size { object["size"] = size }
            if let sha = entry.sha256 { object["sha256"] = sha }
            if let cached { object["path"] = cached.mainFile.path; object["size"] = cached.size }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else {
            let size = (cached?.size ?? entry.size).map(formatBytes) ?? "?"
            let name = entry.name + (entry.name == Catalog.defaultModel ? " (default)" : "")
            print(row(name, size, cached != nil ? "yes" : "no", entry.license, entry.summary))
        }
    }
}

private func pull(_ reference: String, flags: StoreFlags, force: Bool) throws {
    if FileManager.default.fileExists(atPath: reference) {
        FileHandle.standardError.write(Data("spotter: \(reference) is a local file; commands use it in place (nothing to pull)\n".utf8))
        print(URL(fileURLWithPath: reference).standardizedFileURL.path)
        return
    }
    let store = try flags.makeStore()
    let display = DownloadDisplay(name: reference)
    let already = force ? nil : try store.cached(reference)
    let item = try already ?? store.pull(reference, force: force, events: display.show)
    display.finish()
    if already != nil { FileHandle.standardError.write(Data("spotter: \(reference) is already cached\n".utf8)) }
    print(item.mainFile.path)
}

private func remove(_ reference: String, flags: StoreFlags) throws {
    guard try flags.makeStore().remove(reference) else { throw CommandFailure("\(reference) is not cached; nothing to remove") }
}

struct Models: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "models",
        abstract: "List, download and remove models in the local cache.",
        discussion: """
            A model is found in this order: an existing file path; the cache ($XDG_CACHE_HOME/spotter, \
            else ~/.cache/spotter); a download from the catalog or an http(s) URL, unless --offline \
            or SPOTTER_OFFLINE=1. Downloads resume where they broke off, and are checked (size, \
            SHA-256, contents) before they enter the cache. SPOTTER_CATALOG=FILE.json adds entries.

            Examples:
              spotter models list
              spotter models pull coco-ssd-mobilenet-v1
              spotter models path efficientdet-lite0
              spotter models pull https://example.com/detector.tflite
              spotter models rm efficientdet-lite0
            """,
        subcommands: [List.self, Pull.self, Path.self, Remove.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "Show the catalog's models: name, size, cached or not, license.",
            discussion: "Example:\n  spotter models list --json")
        @Flag(help: "One JSON object per model.") var json = false
        @OptionGroup var store: StoreFlags
        func run() throws { try listCatalog(kind: .model, store: store.makeStore(), json: json) }
    }

    struct Pull: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pull",
            abstract: "Download a model into the cache (a catalog name or an http(s) URL) and print its path.",
            discussion: "Example:\n  spotter models pull coco-ssd-mobilenet-v1")
        @Argument(help: "A catalog name or URL.") var name: String
        @Flag(help: "Download again even if cached.") var force = false
        @OptionGroup var store: StoreFlags
        func run() throws { try pull(name, flags: store, force: force) }
    }

    struct Path: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "path",
            abstract: "Print the local path of a model, downloading it first if needed and allowed.",
            discussion: "Example:\n  spotter detect photo.jpg --model \"$(spotter models path efficientdet-lite0)\"")
        @Argument(help: "A catalog name, URL or file.") var name: String
        @OptionGroup var store: StoreFlags
        func run() throws { print(try store.resolve(name).path) }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Delete a model from the cache.",
            discussion: "Example:\n  spotter models rm efficientdet-lite0")
        @Argument(help: "A catalog name or URL.") var name: String
        @OptionGroup var store: StoreFlags
        func run() throws { try remove(name, flags: store) }
    }
}

struct Samples: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "samples",
        abstract: "List and download sample videos (Intel's IoT sample videos, CC-BY 4.0).",
        discussion: """
            `video` and `record` also accept a sample's name as their input and download it on first use.

            Examples:
              spotter samples list
              spotter samples pull people-detection
              spotter record people-detection --album clips/
            """,
        subcommands: [List.self, Pull.self, Remove.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the sample videos: name, size, cached or not, license.",
                                                        discussion: "Example:\n  spotter samples list")
        @Flag(help: "One JSON object per video.") var json = false
        @OptionGroup var store: StoreFlags
        func run() throws { try listCatalog(kind: .sample, store: store.makeStore(), json: json) }
    }

    struct Pull: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "pull", abstract: "Download a sample video into the cache and print its path.",
                                                        discussion: "Example:\n  spotter samples pull one-by-one-person-detection")
        @Argument(help: "A sample name.") var name: String
        @Flag(help: "Download again even if cached.") var force = false
        @OptionGroup var store: StoreFlags
        func run() throws { try pull(name, flags: store, force: force) }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete a sample video from the cache.",
                                                        discussion: "Example:\n  spotter samples rm people-detection")
        @Argument(help: "A sample name.") var name: String
        @OptionGroup var store: StoreFlags
        func run() throws { try remove(name, flags: store) }
    }
}
