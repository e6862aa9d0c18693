import Foundation

/// Where a cluster's PostgreSQL database is: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`
/// (also `postgresql://`). A URL without a password takes `PGPASSWORD`'s, as libpq does, so that
/// the password need not be a command-line argument (which every local user can read in `ps`).
/// The password is never shown: ``description`` leaves it out.
///
/// ```swift
/// let url = try DatabaseURL("postgres://spotter@127.0.0.1:5432/spotter")
/// ```
public struct DatabaseURL: Sendable, Equatable, CustomStringConvertible {
    public var user: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String

    /// Parses a `postgres://` URL; without a password in it, the password is `environment`'s
    /// `PGPASSWORD`, if set.
    ///
    /// - Throws: ``ClusterError/badURL(_:reason:)`` naming what is missing or wrong.
    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let shown = Self.redacting(text)
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw ClusterError.badURL(shown, reason: "not a URL; expected postgres://USER@HOST:PORT/DATABASE")
        }
        guard scheme == "postgres" || scheme == "postgresql" else {
            throw ClusterError.badURL(shown, reason: "the scheme must be postgres:// (it is \(scheme)://)")
        }
        guard let host = components.host, !host.isEmpty else { throw ClusterError.badURL(shown, reason: "no host") }
        guard let user = components.user, !user.isEmpty else { throw ClusterError.badURL(shown, reason: "no user (postgres://USER@HOST/DATABASE)") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else {
            throw ClusterError.badURL(shown, reason: "no database name (postgres://USER@HOST/DATABASE)")
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw ClusterError.badURL(shown, reason: "port \(port) is out of range") }
        self.user = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 } ?? environment["PGPASSWORD"]
        self.host = host
        self.port = port
        self.database = database.removingPercentEncoding ?? database
    }

    public var description: String { "postgres://\(user)\(password == nil ? "" : ":***")@\(host):\(port)/\(database)" }

    /// `text` with the password between `:` and `@` replaced by `***`.
    static func redacting(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].firstIndex(of: "@") else { return text }
        let credentials = text[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }
}
