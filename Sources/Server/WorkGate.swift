import Dispatch
import Hummingbird
import Synchronization

/// Bounds work that requests start: at most `running` at once, `waiting` more in arrival order,
/// and beyond that a request is answered 503 with `Retry-After` at once, before it spends memory.
/// Picture decoding for the detect endpoints goes through one, video uploads through another.
final class WorkGate: Sendable {
    private struct State {
        var running = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    let running: Int
    let waiting: Int
    private let state = Mutex(State())

    init(running: Int, waiting: Int) {
        self.running = max(1, running)
        self.waiting = max(0, waiting)
    }

    /// Runs `work` once a slot is free.
    ///
    /// - Throws: `HTTPError(.serviceUnavailable)` with `busy` when every slot and place in line is
    ///   taken; what `work` throws.
    private enum Admission { case now, queued, refused }

    func run<T: Sendable>(busy: String, _ work: () async throws -> T) async throws -> T {
        var admission = Admission.refused
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let decided: Admission = state.withLock { state in
                if state.running < running {
                    state.running += 1
                    return .now
                }
                if state.waiting.count < waiting {
                    state.waiting.append(continuation)
                    return .queued
                }
                return .refused
            }
            admission = decided
            if decided != .queued { continuation.resume() }
        }
        guard admission != .refused else { throw HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: busy) }
        defer {
            // The slot passes to the first in line, or is given back.
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiting.isEmpty {
                    state.running -= 1
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.resume()
        }
        return try await work()
    }

    /// Work running now and waiting (for /metrics and tests).
    var load: (running: Int, waiting: Int) { state.withLock { ($0.running, $0.waiting.count) } }
}

/// Runs blocking work (decoding a picture, probing a file) on a Dispatch thread, so Swift's
/// cooperative threads, which serve every request, never wait on it.
func offCooperativeThreads<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
