/// Why the model store could not give a file. Every case names the URL or path involved; the
/// description ends with what to do.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Neither a file, a URL nor a catalog name.
    case unknownName(String, known: [String])
    /// A path (it has a `/` or a file extension) where there is no file.
    case noSuchFile(path: String)
    /// Not cached and downloads are off (`--offline`, `SPOTTER_OFFLINE=1`).
    case offline(name: String, kind: CatalogEntry.Kind)
    /// The server answered with an error status.
    case httpStatus(url: String, status: Int)
    /// No byte arrived for `seconds`; what arrived is kept and the next pull resumes.
    case stalled(url: String, seconds: Double, received: Int)
    /// The connection ended early; what arrived is kept and the next pull resumes.
    case interrupted(url: String, received: Int, reason: String)
    /// The server could not be reached or another transfer failure.
    case network(url: String, reason: String)
    case sizeMismatch(url: String, expected: Int, actual: Int)
    case checksumMismatch(url: String, expected: String, actual: String)
    /// The download is bigger than the store accepts.
    case tooLarge(url: String, limit: Int)
    /// The bytes are not what the entry should be (an HTML page instead of a zip, say).
    case unexpectedContent(url: String, expected: String, found: String)
    case invalidArchive(url: String, reason: String)
    /// An archive entry would land outside the target folder (`../x`, `/etc/x`).
    case unsafeArchiveEntry(url: String, entry: String)
    /// The archive unpacks to more than the store accepts (a zip bomb, or a wrong limit).
    case archiveTooLarge(url: String, limit: Int)
    /// The download lacks a file the catalog says it yields.
    case missingFile(url: String, file: String)
    case invalidCatalog(path: String, reason: String)
    /// A file system operation in the cache failed.
    case cache(path: String, reason: String)

    public var description: String {
        switch self {
        case .unknownName(let name, let known):
            return "\"\(name)\" is neither a file, an http(s) URL nor a catalog name (known: \(known.joined(separator: ", "))); `spotter models list` shows the catalog"
        case .noSuchFile(let path):
            return "no file at \(path); check the path, or give a catalog name (`spotter models list`) or a URL"
        case .offline(let name, let kind):
            return "\(name) is not in the cache and downloads are off (--offline or SPOTTER_OFFLINE=1); run `spotter \(kind == .sample ? "samples" : "models") pull \(name)` while online"
        case .httpStatus(let url, let status):
            return "\(url): the server answered HTTP \(status); check the URL or try again later"
        case .stalled(let url, let seconds, let received):
            return "\(url): no data for \(Int(seconds)) s after \(received) bytes; run the pull again to resume"
        case .interrupted(let url, let received, let reason):
            return "\(url): the download broke off after \(received) bytes (\(reason)); run the pull again to resume"
        case .network(let url, let reason):
            return "\(url): \(reason); check the network connection"
        case .sizeMismatch(let url, let expected, let actual):
            return "\(url): expected \(expected) bytes, got \(actual); nothing was cached, try again"
        case .checksumMismatch(let url, let expected, let actual):
            return "\(url): SHA-256 \(actual) does not match the expected \(expected); nothing was cached (the file changed or was damaged)"
        case .tooLarge(let url, let limit):
            return "\(url): the download exceeds the limit of \(limit) bytes; nothing was cached"
        case .unexpectedContent(let url, let expected, let found):
            return "\(url): expected \(expected) but got \(found); nothing was cached (a login or error page?)"
        case .invalidArchive(let url, let reason):
            return "\(url): not a readable zip archive (\(reason)); nothing was cached"
        case .unsafeArchiveEntry(let url, let entry):
            return "\(url): the archive entry \"\(entry)\" would be written outside its folder; refused, nothing was cached"
        case .archiveTooLarge(let url, let limit):
            return "\(url): the archive unpacks to more than \(limit) bytes; refused, nothing was cached"
        case .missingFile(let url, let file):
            return "\(url): the download has no \(file); nothing was cached (is the catalog entry right?)"
        case .invalidCatalog(let path, let reason):
            return "cannot read the catalog \(path): \(reason)"
        case .cache(let path, let reason):
            return "cache \(path): \(reason); check the folder's permissions and free space"
        }
    }
}
