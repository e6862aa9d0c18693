import Foundation

/// A source's zone entries and line crossings not yet in the album's hourly counts: added as they
/// happen, written in batches (``flush(to:ifOlderThan:)``), and kept for the next try when the
/// index is busy. Under a cluster lease each batch is written only when the lease is still the
/// source's newest (``SourceLease``); a refused batch is dropped and counted.
///
/// ```swift
/// let counts = CountBuffer()
/// counts.add(CountEntry(source: "s1", hour: hour, kind: "zone", name: "door", direction: "", count: 1))
/// counts.flush(to: album, ifOlderThan: .seconds(10))
/// ```
public final class CountBuffer: Sendable {
    private struct State: Sendable {
        var pending: [String: CountEntry] = [:]
        var flushed = ContinuousClock.now
        var refused = 0
    }

    public let lease: SourceLease?
    private let state = Locked(State())
    /// Batches waiting for the lease's verdict.
    private let verdicts = DispatchGroup()

    public init(lease: SourceLease? = nil) {
        self.lease = lease
    }

    /// Counts refused because the lease had moved on.
    public var refused: Int { state.value.refused }

    /// Adds `entry` to what waits to be written (entries of one hour, kind, name and direction add up).
    public func add(_ entry: CountEntry) {
        state.withLock { s in s.pending[Self.key(entry), default: CountEntry(
            source: entry.source, hour: entry.hour, kind: entry.kind, name: entry.name, direction: entry.direction, count: 0)].count += entry.count }
    }

    /// Writes what waits, if the last write is at least `interval` ago. Without a lease the write
    /// is done on return; with one, once the lease's verdict is in (``waitForVerdicts(seconds:)``).
    public func flush(to album: Album, ifOlderThan interval: Duration = .zero) {
        let pending = state.withLock { s -> [CountEntry] in
            guard !s.pending.isEmpty, s.flushed.duration(to: .now) >= interval else { return [] }
            s.flushed = .now
            defer { s.pending.removeAll() }
            return Array(s.pending.values)
        }
        guard !pending.isEmpty else { return }
        guard let lease else { return write(pending, to: album) }
        verdicts.enter()
        lease.admit("counts") { [self] admitted in
            defer { verdicts.leave() }
            if admitted {
                write(pending, to: album)
            } else {
                let refused = pending.map(\.count).reduce(0, +)
                state.withLock { s in s.refused += refused }
            }
        }
    }

    /// Waits until every batch has its verdict, at most `seconds`; false when some still wait.
    @discardableResult
    public func waitForVerdicts(seconds: Double) -> Bool {
        verdicts.wait(timeout: .now() + seconds) == .success
    }

    private func write(_ batch: [CountEntry], to album: Album) {
        do { try album.addCounts(batch) } catch {
            // The index is busy or damaged: the batch waits for the next write.
            for entry in batch { add(entry) }
        }
    }

    private static func key(_ entry: CountEntry) -> String { "\(entry.hour) \(entry.kind) \(entry.name) \(entry.direction)" }
}
