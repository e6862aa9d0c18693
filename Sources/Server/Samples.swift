import Foundation
import Synchronization

/// The sample videos the server offers on its demo page: the model store seen from the server
/// (`spotter serve` adapts its `ModelStore`; tests may use a double).
public protocol SampleLibrary: Sendable {
    /// The catalog's sample videos and whether each is cached.
    func samples() -> [SampleVideo]
    /// Fetches a sample into the cache (blocking), reporting progress; returns its file.
    func pull(_ name: String, progress: @escaping (SampleProgress) -> Void) throws -> String
}

/// A sample video of the catalog.
public struct SampleVideo: Sendable {
    public var name: String
    public var summary: String
    public var license: String
    /// Download size in bytes, when the catalog says.
    public var size: Int?
    /// The cached file, when downloaded.
    public var cachedPath: String?

    public init(name: String, summary: String, license: String, size: Int?, cachedPath: String?) {
        self.name = name
        self.summary = summary
        self.license = license
        self.size = size
        self.cachedPath = cachedPath
    }
}

/// How far a download is.
public struct SampleProgress: Sendable {
    public var received: Int
    public var total: Int?
    public var bytesPerSecond: Double

    public init(received: Int, total: Int?, bytesPerSecond: Double) {
        self.received = received
        self.total = total
        self.bytesPerSecond = bytesPerSecond
    }
}

/// Downloads started from the demo page: one thread per sample being pulled, progress published
/// as `download_progress` events (at most ten a second), then `download_finished` or
/// `download_failed`.
final class SampleDownloads: Sendable {
    let library: any SampleLibrary
    let events: EventHub
    private let state = Mutex(State())

    private struct State {
        var active: [String: SampleProgress] = [:]
        /// The last failed download of each sample, until it is tried again: the page keeps saying why.
        var failures: [String: String] = [:]
    }

    init(library: any SampleLibrary, events: EventHub) {
        self.library = library
        self.events = events
    }

    /// The catalog's samples with their cache state and any download under way.
    func list() -> [[String: Any]] {
        let (pulling, failed) = state.withLock { ($0.active, $0.failures) }
        return library.samples().map { sample in
            var object: [String: Any] = ["name": sample.name, "summary": sample.summary, "license": sample.license,
                                         "cached": sample.cachedPath != nil, "downloading": pulling[sample.name] != nil]
            if sample.cachedPath == nil, pulling[sample.name] == nil, let message = failed[sample.name] { object["error"] = message }
            if let size = sample.size { object["size"] = size }
            if let progress = pulling[sample.name] { object["progress"] = Self.object(sample.name, progress) }
            return object
        }
    }

    /// Starts pulling `name` unless it is cached or already being pulled.
    ///
    /// - Returns: false when `name` is not a sample of the catalog.
    func start(_ name: String) -> (known: Bool, cached: Bool) {
        guard let sample = library.samples().first(where: { $0.name == name }) else { return (false, false) }
        if sample.cachedPath != nil { return (true, true) }
        let fresh = state.withLock { state in
            guard state.active[name] == nil else { return false }
            state.active[name] = SampleProgress(received: 0, total: sample.size, bytesPerSecond: 0)
            state.failures[name] = nil
            return true
        }
        guard fresh else { return (true, false) }
        let thread = Thread { [self] in
            var lastEvent = Date.distantPast
            do {
                let path = try library.pull(name) { [self] progress in
                    state.withLock { $0.active[name] = progress }
                    guard Date().timeIntervalSince(lastEvent) >= 0.1 || progress.received == progress.total else { return }
                    lastEvent = Date()
                    events.publish("download_progress", Self.object(name, progress))
                }
                _ = state.withLock { $0.active.removeValue(forKey: name) }
                events.publish("download_finished", ["name": name, "path": path])
            } catch {
                state.withLock {
                    $0.active[name] = nil
                    $0.failures[name] = "\(error)"
                }
                events.publish("download_failed", ["name": name, "message": "\(error)"])
            }
        }
        thread.name = "spotter.pull.\(name)"
        thread.start()
        return (true, false)
    }

    static func object(_ name: String, _ progress: SampleProgress) -> [String: Any] {
        var object: [String: Any] = ["name": name, "received": progress.received, "bytes_per_second": progress.bytesPerSecond.rounded()]
        if let total = progress.total, total > 0 {
            object["total"] = total
            object["percent"] = round1(100 * Double(progress.received) / Double(total))
            if progress.bytesPerSecond > 0 { object["eta_s"] = round1(Double(total - progress.received) / progress.bytesPerSecond) }
        }
        return object
    }
}
