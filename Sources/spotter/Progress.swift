import Foundation
import Synchronization

/// A one-line progress bar on standard error when it is a terminal; results keep going to
/// standard output, so piping them stays clean.
///
/// Event closures on the pipeline's threads and the command's thread share it.
final class ProgressBar: Sendable {
    private let total: Int
    private let enabled: Bool
    private let start = Date()
    /// Whether a line is on the terminal; each drawing holds it, so lines never interleave.
    private let drawn = Mutex(false)

    init(total: Int, enabled: Bool) {
        self.total = total
        self.enabled = enabled && isatty(STDERR_FILENO) != 0
    }

    deinit { finish() }

    /// Shows `done` of `total` with rate and time left; a counter and rate when the total is unknown.
    func update(_ done: Int, note: String = "") {
        guard enabled else { return }
        let elapsed = Date().timeIntervalSince(start)
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        guard total > 0 else {
            status(String(format: "%d done, %.1f/s %@", done, rate, String(note.prefix(40))))
            return
        }
        let eta = rate > 0 ? Double(total - done) / rate : 0
        let width = 30, filled = total > 0 ? width * done / total : 0
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let line = String(format: "[%@] %d/%d %3.0f%% %.1f/s ETA %.0fs %@", bar, done, total,
                          100 * Double(done) / Double(max(total, 1)), rate, eta, String(note.prefix(30)))
        draw(line)
    }

    /// Shows a free-form status line (live sources have no total).
    func status(_ text: String) {
        guard enabled else { return }
        draw(String(text.prefix(120)))
    }

    /// Prints a result line to standard output without garbling the bar.
    func print(_ text: String) {
        clear()
        Swift.print(text)
        fflush(nil)
    }

    /// Prints a line to standard error without garbling the bar (`error: ` first unless the text
    /// names its own kind, such as `Warning:`).
    func error(_ text: String) {
        clear()
        FileHandle.standardError.write(Data(((text.hasPrefix("Warning:") ? "" : "error: ") + text + "\n").utf8))
    }

    func finish() { clear() }

    private func draw(_ line: String) {
        drawn.withLock { drawn in
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
            drawn = true
        }
    }

    private func clear() {
        drawn.withLock { drawn in
            guard drawn else { return }
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
            drawn = false
        }
    }
}

/// Says yes at most once per interval (progress lines from event closures).
final class Throttle: Sendable {
    /// When it last said yes.
    private let last = Mutex(Date.distantPast)
    private let seconds: Double

    init(seconds: Double) {
        self.seconds = seconds
    }

    func ready() -> Bool {
        last.withLock { last in
            guard Date().timeIntervalSince(last) >= seconds else { return false }
            last = Date()
            return true
        }
    }
}
