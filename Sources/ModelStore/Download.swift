internal import CCurl
import Foundation

/// What a running download reports, about ten times a second.
public struct DownloadProgress: Sendable, Equatable {
    public var url: String
    /// Bytes on disk so far, including a part resumed from an earlier attempt.
    public var received: Int
    /// The whole size, when the server said it.
    public var total: Int?
    /// Bytes per second in this attempt.
    public var bytesPerSecond: Double
}

/// How one HTTP(S) transfer behaves; see `ModelStore.Options`, which documents the defaults.
struct TransferLimits {
    var connectTimeout: Double
    var stallTimeout: Double
    var maxBytes: Int
}

/// The outcome of a completed transfer into a part file.
struct TransferResult {
    var contentType: String?
    /// Bytes in the part file.
    var size: Int
}

private let curlInitialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

/// Owns one libcurl easy handle and the header list it reads. Not thread-safe: one transfer at a
/// time.
final class CurlHandle {
    let pointer: UnsafeMutableRawPointer
    private var headers: UnsafeMutablePointer<curl_slist>?

    init() throws {
        guard curlInitialized, let handle = curl_easy_init() else {
            throw StoreError.network(url: "", reason: "libcurl could not be initialized")
        }
        pointer = handle
    }

    deinit {
        curl_slist_free_all(headers)
        curl_easy_cleanup(pointer)
    }

    /// Sets what every transfer sets: the URL, the protocols it may use (and follow redirects to,
    /// when `redirects` is above 0), no signals, the connection timeout, the user agent and the
    /// buffer libcurl writes its error text into (which must outlive `perform`).
    func configure(url: String, protocols: String, redirects: Int, connectTimeout: Double, errors: UnsafeMutablePointer<CChar>?) {
        _ = spotter_curl_set_string(pointer, CURLOPT_URL, url)
        _ = spotter_curl_set_string(pointer, CURLOPT_PROTOCOLS_STR, protocols)
        if redirects > 0 {
            _ = spotter_curl_set_string(pointer, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            _ = spotter_curl_set_long(pointer, CURLOPT_MAXREDIRS, redirects)
        }
        _ = spotter_curl_set_long(pointer, CURLOPT_FOLLOWLOCATION, redirects > 0 ? 1 : 0)
        _ = spotter_curl_set_long(pointer, CURLOPT_NOSIGNAL, 1)
        _ = spotter_curl_set_long(pointer, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(connectTimeout * 1000)))
        _ = spotter_curl_set_string(pointer, CURLOPT_USERAGENT, "spotter/0.1 (+libcurl)")
        _ = spotter_curl_set_pointer(pointer, CURLOPT_ERRORBUFFER, errors)
    }

    /// The text for a failed `perform`: libcurl's error buffer, or the code's own text when empty.
    static func message(_ code: CURLcode, errors: [CChar]) -> String {
        let detail = String(decoding: errors.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }

    /// Sets the request headers; libcurl reads the list during `perform`, so this object keeps it.
    func setHeaders(_ lines: [String]) {
        curl_slist_free_all(headers)
        headers = nil
        for line in lines { headers = curl_slist_append(headers, line) }
        _ = spotter_curl_set_pointer(pointer, CURLOPT_HTTPHEADER, headers.map { UnsafeMutableRawPointer($0) })
    }
}

/// What a transfer's libcurl callbacks call: `body` with each piece of the response body, `tick`
/// at least once a second (also while nothing arrives); false from either aborts the transfer.
protocol CurlTransfer: AnyObject {
    func body(_ bytes: UnsafeRawBufferPointer) -> Bool
    func tick() -> Bool
}

extension CurlHandle {
    /// Hands the body and the ticks of the next `perform` to `transfer`, which must outlive it
    /// (libcurl holds it as an unretained pointer).
    func deliver(to transfer: any CurlTransfer) {
        let context = Unmanaged.passUnretained(transfer as AnyObject).toOpaque()
        _ = spotter_curl_set_pointer(pointer, CURLOPT_WRITEDATA, context)
        _ = spotter_curl_set_data_callback(pointer, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<AnyObject>.fromOpaque(context!).takeUnretainedValue() as! any CurlTransfer
            return transfer.body(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
        }
        _ = spotter_curl_set_long(pointer, CURLOPT_NOPROGRESS, 0)
        _ = spotter_curl_set_pointer(pointer, CURLOPT_XFERINFODATA, context)
        _ = spotter_curl_set_progress_callback(pointer) { context, _, _, _, _ in
            (Unmanaged<AnyObject>.fromOpaque(context!).takeUnretainedValue() as! any CurlTransfer).tick() ? 0 : 1
        }
    }
}

/// Mutable state the libcurl callbacks share with `HTTPDownload.fetch` (through an unmanaged
/// pointer, for the duration of one `curl_easy_perform`).
private final class TransferState: CurlTransfer {
    let url: String
    let file: Int32
    let path: String
    let requestedStart: Int
    let limits: TransferLimits
    let progress: (DownloadProgress) -> Void
    let started: (String?) -> Void

    var status = 0
    var contentType: String?
    var validator: String?
    var contentLength: Int?
    var rangeStart: Int?
    var rangeTotal: Int?
    var bodyStarted = false
    var offset = 0
    var total: Int?
    var failure: StoreError?
    let startTime = Date()
    var lastReport = Date.distantPast
    /// When the last byte (header or body) arrived, for the stall timeout.
    var lastByte = Date()

    init(url: String, file: Int32, path: String, requestedStart: Int, limits: TransferLimits, progress: @escaping (DownloadProgress) -> Void,
         started: @escaping (String?) -> Void) {
        self.started = started
        self.url = url
        self.file = file
        self.path = path
        self.requestedStart = requestedStart
        self.limits = limits
        self.progress = progress
        offset = requestedStart
    }

    var isSuccess: Bool { status == 200 || status == 206 || status == 0 }

    func header(_ line: String) {
        lastByte = Date()
        if line.hasPrefix("HTTP/") {
            // A new response (after a redirect, say): forget the previous one's headers.
            status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            contentType = nil; validator = nil; contentLength = nil; rangeStart = nil; rangeTotal = nil
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        switch name {
        case "content-type": contentType = value
        case "content-length": contentLength = Int(value)
        case "etag": validator = value
        case "last-modified": if validator == nil { validator = value }
        case "content-range":
            // bytes START-END/TOTAL
            let spec = value.split(separator: " ").last ?? ""
            let parts = spec.split(separator: "/")
            rangeStart = parts.first.flatMap { $0.split(separator: "-").first }.flatMap { Int($0) }
            rangeTotal = parts.count == 2 ? Int(parts[1]) : nil
        default: break
        }
    }

    /// Decides, at the first body byte, whether the part file continues or starts again.
    func beginBody() -> Bool {
        bodyStarted = true
        guard isSuccess else { return true }
        if status == 206 {
            guard rangeStart == requestedStart else {
                failure = .unexpectedContent(url: url, expected: "bytes from \(requestedStart)",
                                             found: "a range starting at \(rangeStart.map(String.init) ?? "?")")
                return false
            }
            total = rangeTotal
        } else {
            // A full answer: the server ignored the range, or the file changed (If-Range).
            offset = 0
            total = contentLength
            guard ftruncate(file, 0) == 0 else { failure = .cache(path: path, reason: String(cString: strerror(errno))); return false }
        }
        if let total, total > limits.maxBytes {
            failure = .tooLarge(url: url, limit: limits.maxBytes)
            return false
        }
        started(validator)
        return lseek(file, off_t(offset), SEEK_SET) >= 0
    }

    func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        lastByte = Date()
        if !bodyStarted, !beginBody() { return false }
        // An error status's page is not kept.
        guard isSuccess else { return true }
        guard offset + bytes.count <= limits.maxBytes else {
            failure = .tooLarge(url: url, limit: limits.maxBytes)
            return false
        }
        var done = 0
        while done < bytes.count {
            let written = write(file, bytes.baseAddress! + done, bytes.count - done)
            if written < 0 {
                if errno == EINTR { continue }
                failure = .cache(path: path, reason: "writing \(url): \(String(cString: strerror(errno)))")
                return false
            }
            done += written
        }
        offset += bytes.count
        report(force: false)
        return true
    }

    /// Called by libcurl at least once a second, also while nothing arrives; false aborts.
    func tick() -> Bool {
        guard Date().timeIntervalSince(lastByte) < limits.stallTimeout else {
            failure = .stalled(url: url, seconds: limits.stallTimeout, received: offset)
            return false
        }
        return true
    }

    func report(force: Bool) {
        let now = Date()
        guard force || now.timeIntervalSince(lastReport) >= 0.1 else { return }
        lastReport = now
        let elapsed = now.timeIntervalSince(startTime)
        let rate = elapsed > 0 ? Double(offset - (status == 206 ? requestedStart : 0)) / elapsed : 0
        progress(DownloadProgress(url: url, received: offset, total: total, bytesPerSecond: rate))
    }
}

enum HTTPDownload {
    /// Downloads `url` into `part`, continuing it with an HTTP range request when it already holds
    /// bytes (`If-Range: validator`, so a changed file starts over). `started` gets the response's
    /// validator (ETag or Last-Modified) before the first byte is written.
    /// - Throws: `StoreError.httpStatus`, `.stalled`, `.interrupted`, `.network`, `.tooLarge`,
    ///   `.cache`. The part file keeps what arrived, for the next attempt.
    static func fetch(_ url: String, into part: URL, validator: String?, limits: TransferLimits,
                      started: @escaping (String?) -> Void, progress: @escaping (DownloadProgress) -> Void) throws -> TransferResult {
        let file = open(part.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw StoreError.cache(path: part.path, reason: String(cString: strerror(errno))) }
        defer { close(file) }
        var existing = Int(lseek(file, 0, SEEK_END))
        if url.hasPrefix("file:") {
            // Local files are copied whole.
            existing = 0
        }
        let state = TransferState(url: url, file: file, path: part.path, requestedStart: existing, limits: limits, progress: progress, started: started)

        let handle = try CurlHandle()
        let curl = handle.pointer
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            handle.configure(url: url, protocols: "http,https,file", redirects: 10, connectTimeout: limits.connectTimeout,
                             errors: errors.baseAddress)
            var headers: [String] = []
            if existing > 0 {
                _ = spotter_curl_set_string(curl, CURLOPT_RANGE, "\(existing)-")
                if let validator { headers.append("If-Range: \(validator)") }
            }
            handle.setHeaders(headers)

            let context = Unmanaged.passUnretained(state).toOpaque()
            _ = spotter_curl_set_pointer(curl, CURLOPT_HEADERDATA, context)
            _ = spotter_curl_set_data_callback(curl, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                let state = Unmanaged<TransferState>.fromOpaque(context!).takeUnretainedValue()
                let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
                state.header(String(decoding: bytes, as: UTF8.self))
                return size * count
            }
            // The ticks measure stalls (libcurl's low-speed limit averages over seconds, so a
            // burst before a stall would hide it).
            handle.deliver(to: state)
            return curl_easy_perform(curl)
        }
        state.report(force: true)

        if let failure = state.failure { throw failure }
        let message = CurlHandle.message(code, errors: errorBuffer)
        switch code {
        case CURLE_OK: break
        case CURLE_OPERATION_TIMEDOUT:
            throw StoreError.stalled(url: url, seconds: limits.stallTimeout, received: state.offset)
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2_STREAM, CURLE_SEND_ERROR:
            throw StoreError.interrupted(url: url, received: state.offset, reason: message)
        default:
            throw StoreError.network(url: url, reason: message)
        }
        guard state.isSuccess else { throw StoreError.httpStatus(url: url, status: state.status) }
        if !state.bodyStarted, !state.beginBody() {
            // An empty body: the file is whatever the status says (nothing, or an unchanged part).
            if let failure = state.failure { throw failure }
        }
        return TransferResult(contentType: state.contentType, size: state.offset)
    }
}
