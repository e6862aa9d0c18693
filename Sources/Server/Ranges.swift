/// The byte range an HTTP `Range` header asks for, as RFC 9110 reads it.
enum ByteRange: Equatable {
    /// Serve the whole file (no header, a malformed one, or several ranges, which servers may ignore).
    case whole
    /// Serve these bytes (206).
    case part(ClosedRange<Int>)
    /// Nothing of the file is in the range (416, with `Content-Range: bytes */SIZE`).
    case unsatisfiable

    /// Reads `header` for a file of `size` bytes: `bytes=A-B` (B clamped to the end), `bytes=A-`,
    /// and the suffix form `bytes=-N` (the last N bytes).
    init(header: String?, size: Int) {
        guard let header, header.hasPrefix("bytes="), !header.contains(",") else {
            self = .whole
            return
        }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else {
            self = .whole
            return
        }
        if parts[0].isEmpty {
            // Suffix: the last N bytes.
            guard let count = Int(parts[1]), count >= 0 else {
                self = .whole
                return
            }
            self = count == 0 || size == 0 ? .unsatisfiable : .part(max(0, size - count)...(size - 1))
            return
        }
        guard let first = Int(parts[0]), first >= 0 else {
            self = .whole
            return
        }
        let last: Int
        if parts[1].isEmpty {
            last = size - 1
        } else {
            guard let value = Int(parts[1]), value >= first else {
                self = .whole
                return
            }
            last = min(value, size - 1)
        }
        self = first >= size ? .unsatisfiable : .part(first...last)
    }
}
