import Foundation
import Media
import Pipeline

/// What a source of `spotter serve` may open. A source's input comes from whoever can reach the
/// API, so it may name a network stream by scheme, a camera, or a file inside the folders the
/// operator chose, and nothing else: not a private file, not FFmpeg's `file:`, `concat:`,
/// `subfile:`, `pipe:` or `data:` protocols, not a playlist that leads to any of them.
///
/// Every input it allows is opened with FFmpeg's protocol whitelist set (so an HLS playlist or an
/// HTTP redirect cannot switch a network source to `file`), and a file with a list of container
/// demuxers (no playlists, concatenations or image sequences).
///
/// The config file (`serve --config`) is written by the operator: its sources may also name files
/// anywhere the server's user can read; their schemes are checked the same way.
public struct SourcePolicy: Sendable {
    /// Where an input was given.
    public enum Origin: String, Sendable, Codable {
        /// The API or the pages: anyone who can reach the server (with its token, if it has one).
        case api
        /// The operator's config file.
        case config
    }

    /// What a checked input is opened as.
    public struct Resolved: Sendable, Equatable {
        /// The path or URL handed to the reader (files: the resolved absolute path).
        public var input: String
        /// The reader's protocol and demuxer whitelists.
        public var allowedProtocols: String?
        public var allowedFormats: String?
    }

    /// Why an input is refused (the API's 400 answer).
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Network schemes a source may use.
    public static let schemes = ["rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "tcp", "udp", "srt"]

    /// Container demuxers a file source may be read with (FFmpeg's short names).
    public static let fileFormats = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,flv,mpeg,mpegvideo,h264,hevc,mjpeg,asf,ogg,nut,ivf,m4v,yuv4mpegpipe"

    /// Folders whose files API sources may open (resolved with symbolic links).
    public let folders: [URL]

    /// - Parameter folders: the album's uploads, the sample cache, and every `--media-dir`.
    public init(folders: [URL]) {
        self.folders = folders.map { $0.standardizedFileURL }
    }

    /// The folders as the policy compares them: real paths, each ending in `/`.
    private var realFolders: [String] {
        folders.compactMap { Self.realPath($0.path) }.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
    }

    /// Checks `input` (a sample's name already resolved to its file).
    ///
    /// - Throws: ``Refusal`` naming the rule the input breaks.
    public func check(_ input: String, origin: Origin) throws -> Resolved {
        guard !input.isEmpty, !input.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw Refusal(description: "input must not be empty or hold control characters")
        }
        if VideoReader.isDevice(input) { return Resolved(input: input, allowedProtocols: nil, allowedFormats: nil) }
        if let scheme = VideoReader.scheme(of: input) {
            guard Self.schemes.contains(scheme) else {
                throw Refusal(description: "input \(Self.redacted(input)): the scheme \(scheme): is not allowed; a source is a URL "
                              + "(\(Self.schemes.joined(separator: ", "))), a camera /dev/videoN, or a file in \(describeFolders)")
            }
            guard let host = URLComponents(string: input)?.host, !host.isEmpty else {
                throw Refusal(description: "input \(Self.redacted(input)) has no host: write it as \(scheme)://HOST[:PORT]/...")
            }
            return Resolved(input: input, allowedProtocols: VideoReader.protocols(for: input), allowedFormats: nil)
        }
        // A path: resolved with its symbolic links, then it must be a regular file inside an allowed folder.
        guard let real = Self.realPath(input) else { throw Refusal(description: "input \(input): no such file") }
        if let kind = Self.irregularKind(real) { throw Refusal(description: "input \(input) is \(kind), not a video file") }
        switch origin {
        case .config:
            return Resolved(input: real, allowedProtocols: "file", allowedFormats: nil)
        case .api:
            guard realFolders.contains(where: { real.hasPrefix($0) }) else {
                throw Refusal(description: "input \(input) is outside the folders sources may read (\(describeFolders)); "
                              + "upload it, or start the server with --media-dir FOLDER")
            }
            return Resolved(input: real, allowedProtocols: "file", allowedFormats: Self.fileFormats)
        }
    }

    private var describeFolders: String {
        folders.isEmpty ? "no folder (start the server with --media-dir)" : folders.map(\.path).joined(separator: ", ")
    }

    /// The absolute path with every symbolic link resolved, nil when it does not exist.
    package static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func irregularKind(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return "unreadable" }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a folder"
        case S_IFIFO: return "a named pipe"
        default: return "not a regular file"
        }
    }

    package static func redacted(_ input: String) -> String { Album.redactingPassword(input) }
}
