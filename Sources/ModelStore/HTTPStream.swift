internal import CCurl
import Foundation

/// Reads a long-lived HTTP(S) response as it arrives (another cluster node's live stream, say):
/// each piece of the body goes to a closure the moment libcurl has it, and nothing is kept.
///
/// ```swift
/// try HTTPStream.get("http://cams-2:8080/api/v1/live?sources=s3", options: .init(headers: ["Authorization: Bearer \(token)"]),
///                    keepGoing: { !stopped.value }) { bytes in parser.feed(bytes) }
/// ```
public enum HTTPStream {
    public struct Options: Sendable {
        /// Seconds to wait for the connection. Default 5.
        public var connectTimeout: Double = 5
        /// Seconds without a byte after which the stream is given up. Default 30.
        public var stallTimeout: Double = 30
        /// Request header lines (`Name: value`).
        public var headers: [String] = []

        public init(connectTimeout: Double = 5, stallTimeout: Double = 30, headers: [String] = []) {
            self.connectTimeout = connectTimeout
            self.stallTimeout = stallTimeout
            self.headers = headers
        }
    }

    /// Sends `GET url` (http or https, no redirects) and hands each piece of a successful (2xx)
    /// response's body to `received`. Returns when the response ends, when `received` returns
    /// false, or when `keepGoing` (asked about once a second, also while nothing arrives) returns false.
    ///
    /// - Throws: ``StoreError/httpStatus(url:status:)`` for any other status (its body unread),
    ///   ``StoreError/stalled(url:seconds:received:)``, ``StoreError/network(url:reason:)``.
    public static func get(_ url: String, options: Options = .init(), keepGoing: @escaping () -> Bool,
                           received: @escaping (UnsafeRawBufferPointer) -> Bool) throws {
        let state = StreamState(keepGoing: keepGoing, received: received, stallTimeout: options.stallTimeout)
        let handle = try CurlHandle()
        let curl = handle.pointer
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            handle.configure(url: url, protocols: "http,https", redirects: 0, connectTimeout: options.connectTimeout,
                             errors: errors.baseAddress)
            handle.setHeaders(options.headers)
            handle.deliver(to: state)
            state.handle = curl
            return curl_easy_perform(curl)
        }
        if state.status == 0 {
            var status = 0
            _ = spotter_curl_get_long(curl, CURLINFO_RESPONSE_CODE, &status)
            state.status = status
        }
        if state.stalled { throw StoreError.stalled(url: url, seconds: options.stallTimeout, received: state.count) }
        if state.status != 0, !(200..<300).contains(state.status) { throw StoreError.httpStatus(url: url, status: state.status) }
        // Stopped by the caller (`received` or `keepGoing`): an ending, not a failure.
        if state.stopped { return }
        guard code == CURLE_OK else {
            throw StoreError.network(url: url, reason: CurlHandle.message(code, errors: errorBuffer))
        }
        guard (200..<300).contains(state.status) else { throw StoreError.httpStatus(url: url, status: state.status) }
    }
}

/// What the libcurl callbacks of one ``HTTPStream/get(_:options:keepGoing:received:)`` share
/// (through an unmanaged pointer, for the duration of one `curl_easy_perform`).
private final class StreamState: CurlTransfer {
    let keepGoing: () -> Bool
    let received: (UnsafeRawBufferPointer) -> Bool
    let stallTimeout: Double
    var handle: UnsafeMutableRawPointer?
    var status = 0
    var count = 0
    var stopped = false
    var stalled = false
    var lastByte = Date()

    init(keepGoing: @escaping () -> Bool, received: @escaping (UnsafeRawBufferPointer) -> Bool, stallTimeout: Double) {
        self.keepGoing = keepGoing
        self.received = received
        self.stallTimeout = stallTimeout
    }

    func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        lastByte = Date()
        if status == 0, let handle {
            var code = 0
            _ = spotter_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &code)
            status = code
        }
        // Another status's body (an error page) is not read.
        guard (200..<300).contains(status) else { return false }
        count += bytes.count
        guard received(bytes) else {
            stopped = true
            return false
        }
        return true
    }

    /// Called by libcurl at least once a second; false aborts.
    func tick() -> Bool {
        guard keepGoing() else {
            stopped = true
            return false
        }
        guard Date().timeIntervalSince(lastByte) < stallTimeout else {
            stalled = true
            return false
        }
        return true
    }
}
