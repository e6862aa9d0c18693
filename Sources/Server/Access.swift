import Foundation
import Hummingbird
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Who may ask the server what, checked before any route runs:
///
/// 1. **Host**: the `Host` header must name this server (``HostNames``), else 421: a web page on
///    another site cannot reach the server through a DNS name it controls (DNS rebinding).
/// 2. **Token** (with `--token`): `Authorization: Bearer TOKEN`, or the session cookie the login
///    page sets (a random id the server keeps, not the token). Wrong bearer tokens count as failed
///    logins. `/health` and `/login` stay open.
/// 3. **Same origin for changes**: a POST, PUT, PATCH or DELETE that carries `Origin` (or, without
///    it, `Referer`) must come from this server's own origin, else 403; one that carries neither
///    (curl, Frigate, scripts: not a browser) is allowed without a token, and with a token only when
///    it authenticated with the bearer token (a cookie alone is what a forged form would ride on).
///
/// No CORS headers are ever sent, so other sites' scripts cannot read any answer.
struct AccessMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let hosts: HostNames
    let token: String?
    let sessions: Sessions
    let limiter: LoginLimiter
    /// The largest picture body (with its multipart envelope) the detect endpoints take.
    let pictureBodyLimit: Int

    /// Paths open without the token.
    static func isOpen(_ path: String) -> Bool { path == "/health" || path == "/api/v1/health" || path == "/login" }

    /// The `api_key` form field of a multipart DeepStack request (the body is collected, within the
    /// picture limit, and stays readable by the route).
    func deepStackKey(_ request: inout Request) async throws -> String? {
        guard let boundary = Multipart.boundary(contentType: request.headers[.contentType] ?? "") else { return nil }
        let body = try await request.collectBody(upTo: pictureBodyLimit)
        return Multipart.field("api_key", in: Array(buffer: body), boundary: boundary).map { String(decoding: $0, as: UTF8.self) }
    }

    func handle(_ request: Request, context: ServerContext, next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        var request = request
        if let host = request.head.authority, !hosts.allows(host: host) {
            throw HTTPError(.misdirectedRequest, message: "this server does not answer to \(host.prefix(200)); \(hosts.hint)")
        }
        let path = request.uri.path
        var authenticatedByBearer = false
        if let token, !token.isEmpty, !Self.isOpen(path) {
            let client = context.clientAddress
            if let authorization = request.headers[.authorization] {
                // Guessing is slowed per address; a signed-in page (its session cookie) is not.
                if let wait = limiter.wait(for: client) {
                    throw HTTPError(.tooManyRequests, headers: [.retryAfter: String(wait)], message: "too many wrong tokens from \(client): try again in \(wait) s")
                }
                guard authorization.hasPrefix("Bearer "), constantTimeEquals(String(authorization.dropFirst(7)), token) else {
                    limiter.recordFailure(client)
                    throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "wrong token")
                }
                authenticatedByBearer = true
            } else if path == "/v1/vision/detection", let key = try await deepStackKey(&request), constantTimeEquals(key, token) {
                // DeepStack's clients (Frigate, Home Assistant) send the key as the form field api_key.
                authenticatedByBearer = true
            } else if !sessions.isValid(Sessions.id(in: request.headers[.cookie])) {
                if request.method == .get && !path.hasPrefix("/api/") && !path.hasPrefix("/v1/") && !path.hasPrefix("/media/") {
                    return Response(status: .seeOther, headers: [.location: "/login?next=" + (path.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "/")])
                }
                throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "this server needs a token: send Authorization: Bearer TOKEN")
            }
        }
        if ![.get, .head, .options].contains(request.method) {
            let claimed = request.headers[.origin] ?? request.headers[.referer]
            if let claimed {
                guard hosts.isSameOrigin(claimed, host: request.head.authority) else {
                    throw HTTPError(.forbidden, message: "cross-origin request refused: \(claimed.prefix(200)) is not this server's origin")
                }
            } else if let token, !token.isEmpty, !authenticatedByBearer, path != "/login" {
                throw HTTPError(.forbidden, message: "a change without Origin must authenticate with Authorization: Bearer TOKEN")
            }
        }
        return try await next(request, context)
    }
}

/// The names the server answers to: its bind address, `localhost`, `127.0.0.1`, `[::1]`, the names
/// given with `--allowed-hosts` and `--public-url`, and, bound to every interface (`0.0.0.0`,
/// `::`), this machine's host name and interface addresses.
package struct HostNames: Sendable {
    let names: Set<String>
    let publicOrigin: (scheme: String, host: String, port: Int)?

    package init(bind: String, allowed: [String], publicURL: URL?) {
        var names: Set<String> = ["localhost", "127.0.0.1", "::1"]
        names.insert(Self.normalize(bind))
        for name in allowed { names.insert(Self.normalize(name)) }
        if let host = publicURL?.host { names.insert(Self.normalize(host)) }
        if bind == "0.0.0.0" || bind == "::" {
            names.formUnion(Self.machineNames())
        }
        names.remove("0.0.0.0")
        names.remove("::")
        self.names = names
        publicOrigin = publicURL.flatMap { url in
            guard let scheme = url.scheme?.lowercased(), let host = url.host else { return nil }
            return (scheme, Self.normalize(host), url.port ?? (scheme == "https" ? 443 : 80))
        }
    }

    static func normalize(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// The host name and port of a `Host` header value (`cam.local:8080`, `[::1]:8080`).
    static func split(_ value: String) -> (name: String, port: Int?) {
        if value.hasPrefix("["), let close = value.firstIndex(of: "]") {
            let name = String(value[value.index(after: value.startIndex)..<close])
            let rest = value[value.index(after: close)...]
            return (name.lowercased(), rest.hasPrefix(":") ? Int(rest.dropFirst()) : nil)
        }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 2 { return (normalize(String(parts[0])), Int(parts[1])) }
        return (normalize(value), nil)
    }

    package func allows(host value: String) -> Bool { names.contains(Self.split(value).name) }

    /// Whether `claimed` (an `Origin` or a `Referer`) is this server's origin: the scheme, host and
    /// port of the request's own `Host`, or of `--public-url`.
    package func isSameOrigin(_ claimed: String, host: String?) -> Bool {
        guard let url = URL(string: claimed), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let claimedHost = url.host else { return false }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        let name = Self.normalize(claimedHost)
        if let publicOrigin, publicOrigin.scheme == scheme, publicOrigin.host == name, publicOrigin.port == port { return true }
        guard let host else { return false }
        let own = Self.split(host)
        return own.name == name && (own.port ?? (scheme == "https" ? 443 : 80)) == port && names.contains(name)
    }

    var hint: String { "it answers to \(names.sorted().joined(separator: ", ")); start it with --allowed-hosts NAME to add one" }

    /// This machine's host name (also as `NAME.local`) and interface addresses.
    static func machineNames() -> Set<String> {
        var names = Set<String>()
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count) == 0 {
            let name = normalize(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            names.insert(name)
            names.insert(name + ".local")
        }
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return names }
        defer { freeifaddrs(list) }
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let length = address.pointee.sa_family == UInt16(AF_INET6) ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size
            guard [UInt16(AF_INET), UInt16(AF_INET6)].contains(address.pointee.sa_family),
                  getnameinfo(address, socklen_t(length), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            names.insert(normalize(text.split(separator: "%").first.map(String.init) ?? text))
        }
        return names
    }
}

/// Sessions of people who signed in on the login page: random ids kept in memory for a week (a
/// restart signs everyone out), at most 1,000 (the oldest go first).
final class Sessions: Sendable {
    static let lifetime: TimeInterval = 7 * 86400
    static let limit = 1000
    static let cookie = "spotter_session"
    private let state = Mutex<[String: Date]>([:])

    /// Starts a session and returns its id (32 random bytes as hex).
    func start() -> String {
        var generator = SystemRandomNumberGenerator()
        let id = (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
        state.withLock { sessions in
            let now = Date()
            sessions = sessions.filter { $0.value > now }
            if sessions.count >= Self.limit, let oldest = sessions.min(by: { $0.value < $1.value })?.key { sessions[oldest] = nil }
            sessions[id] = now.addingTimeInterval(Self.lifetime)
        }
        return id
    }

    func isValid(_ id: String?) -> Bool {
        guard let id, id.count == 64 else { return false }
        return state.withLock { sessions in
            guard let expiry = sessions[id] else { return false }
            guard expiry > Date() else {
                sessions[id] = nil
                return false
            }
            return true
        }
    }

    func end(_ id: String?) {
        guard let id else { return }
        _ = state.withLock { $0.removeValue(forKey: id) }
    }

    /// The session id in a `Cookie` header.
    static func id(in header: String?) -> String? {
        header?.split(separator: ";").lazy.map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix(cookie + "=") }.map { String($0.dropFirst(cookie.count + 1)) }
    }

    /// The `Set-Cookie` value of a new session (`Secure` when the public URL is https).
    static func setCookie(_ id: String, secure: Bool) -> String {
        "\(cookie)=\(id); HttpOnly; SameSite=Strict; Path=/; Max-Age=\(Int(lifetime))" + (secure ? "; Secure" : "")
    }
}

/// Failed logins (and wrong bearer tokens) per client address: after ``maxFailures`` within a
/// minute, the address waits until the oldest of them is a minute old.
package final class LoginLimiter: Sendable {
    package static let maxFailures = 10
    package static let window: TimeInterval = 60
    private let state = Mutex<[String: [Date]]>([:])
    /// The time now (tests give their own).
    private let clock: @Sendable () -> Date

    package init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    package func recordFailure(_ client: String) {
        state.withLock { failures in
            let now = clock()
            if failures.count > 10_000 { failures = failures.filter { $0.value.contains { now.timeIntervalSince($0) < Self.window } } }
            failures[client, default: []].append(now)
            failures[client] = failures[client]!.filter { now.timeIntervalSince($0) < Self.window }.suffix(Self.maxFailures)
        }
    }

    /// Seconds `client` must wait before trying again, nil when it may try now.
    package func wait(for client: String) -> Int? {
        state.withLock { failures in
            let now = clock()
            let recent = (failures[client] ?? []).filter { now.timeIntervalSince($0) < Self.window }
            failures[client] = recent.isEmpty ? nil : recent
            guard recent.count >= Self.maxFailures, let oldest = recent.first else { return nil }
            return max(1, Int((Self.window - now.timeIntervalSince(oldest)).rounded(.up)))
        }
    }
}

/// Compares two strings in time that depends only on their lengths, not on where they differ.
package func constantTimeEquals(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    var difference = UInt8(truncatingIfNeeded: x.count ^ y.count) | UInt8(x.count == y.count ? 0 : 1)
    for i in 0..<max(x.count, y.count) {
        difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
    }
    return difference == 0
}

extension ServerContext {
    /// The client's IP address (without port), or "unknown".
    var clientAddress: String { channel.remoteAddress?.ipAddress ?? "unknown" }
}

/// Closes connections past a limit as they open, so slow or idle clients cannot use up the
/// process's file descriptors (the sources and the album need some too).
final class ConnectionLimiter: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    private let open: OpenConnections

    init(_ open: OpenConnections) { self.open = open }

    func handlerAdded(context: ChannelHandlerContext) {
        if !open.enter() { context.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        open.leave()
    }
}

/// The count of open connections one server shares among its connection handlers.
final class OpenConnections: Sendable {
    let limit: Int
    private let count = Mutex(0)
    init(limit: Int) { self.limit = limit }

    /// Counts a connection in; false when it is over the limit (it is counted anyway and leaves when closed).
    func enter() -> Bool { count.withLock { $0 += 1; return $0 <= limit } }
    func leave() { count.withLock { $0 -= 1 } }
    var current: Int { count.withLock { $0 } }
}
