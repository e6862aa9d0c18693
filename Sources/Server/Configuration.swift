import Detection
import Foundation
import Imaging
import Media
import Pipeline

/// Work on a source frame's detections after the detector (face recognition naming person
/// boxes): given the kept detections (upright pixels) and the frame's picture, returns them
/// changed. Called from source threads, up to one per detector at once.
public typealias DetectionRefiner = @Sendable (_ detections: [Detection], _ image: Image) throws -> [Detection]

/// How `spotter serve` is set up.
public struct ServerConfiguration: Sendable {
    /// Address to bind. Default `127.0.0.1`; any other address requires a ``token``.
    public var host = "127.0.0.1"
    /// Default 8080.
    public var port = 8080
    /// The album folder the server shows (created if needed).
    public var album: URL
    /// When set, every page and API request must carry it (`Authorization: Bearer TOKEN`, or the
    /// cookie the login page sets). Default none (only allowed on a loopback address).
    public var token: String?
    /// The detection model for the detect endpoints.
    public var modelPath: String
    /// Detector settings (backend, labels, resizing, normalization; `threadCount` detectors of one
    /// thread each run requests side by side).
    public var detector: ObjectDetector.Options
    /// The threshold, classes and result count of the detect endpoints and new sources (`serve
    /// --threshold`, `--classes`, `--max-results`); requests and sources may ask for others.
    public var defaults = DetectionDefaults()
    /// Largest upload accepted, in bytes. Default 32 MiB.
    public var maxUploadBytes = 32 << 20
    /// Largest video upload (`POST /api/v1/uploads`), in bytes. Default 2 GiB.
    public var maxVideoUploadBytes = 2 << 30
    /// Largest JSON body accepted, in bytes. Default 64 KiB.
    public var maxJSONBytes = 64 << 10
    /// Sources started with the server (the config file's); the API adds and removes more.
    public var sources: [SourceSpec] = []
    /// Turns a source's input into what the reader opens (the CLI resolves sample names through
    /// the model store). Default: the input as given.
    public var resolveInput: @Sendable (String) throws -> String = { $0 }
    /// How long the album keeps clips (checked at start and every minute). Default: keep everything.
    public var retention = Retention()
    /// URLs that get each `clip_finished` event as a JSON POST, with retries. Default none.
    public var webhooks = WebhookOptions()
    /// Runs on the detections of every source frame and detect request while its detector is held
    /// (`serve --faces` names people with it). Default none.
    public var refine: DetectionRefiner?
    /// The sample videos of the demo page (the CLI's model store). Default none: the page says so.
    public var samples: (any SampleLibrary)?
    /// Folders whose video files API sources may open, besides the album's uploads (`--media-dir`,
    /// and the sample cache). Default none. See ``SourcePolicy``.
    public var mediaFolders: [URL] = []
    /// Host names the server answers to besides its bind address, `localhost`, `127.0.0.1` and
    /// `[::1]` (and, bound to every interface, this machine's names and addresses). A request
    /// naming another host is refused with 421, which stops DNS rebinding. Default none.
    public var allowedHosts: [String] = []
    /// The address people and webhooks reach the server at (`https://cams.example.com`, behind a
    /// reverse proxy): its origin is accepted for changes and its host in `Host`. Default none.
    public var publicURL: URL?
    /// What an uploaded or posted picture may cost before it is decoded (``ImageFile/Limits``).
    public var pictureLimits = ImageFile.Limits()
    /// Pictures decoded at once for requests; as many more wait, and beyond that a request is
    /// answered 503. Default: the detector count.
    public var decodeSlots: Int?
    /// Most bytes the album's `uploads` folder may hold; an upload that would pass it is refused
    /// with 507. Default 20 GiB.
    public var maxUploadsTotalBytes = 20 << 30
    /// Video uploads received at once; more are answered 503. Default 2.
    public var maxConcurrentUploads = 2
    /// Most open HTTP connections; more are closed as they arrive. Default 512.
    public var maxConnections = 512
    /// Seconds a connection may send nothing (while its request line, headers or body are awaited,
    /// or between requests) before it is closed. Default 30.
    public var idleTimeout: Double = 30
    /// Cluster mode (`--database`): sources live in the cluster's PostgreSQL database and run on
    /// whichever node holds their lease. Default none: this server alone, sources kept in the album.
    public var cluster: ClusterSettings?

    public init(album: URL, modelPath: String, detector: ObjectDetector.Options = .init(), host: String = "127.0.0.1", port: Int = 8080,
                token: String? = nil) {
        self.album = album
        self.modelPath = modelPath
        self.detector = detector
        self.host = host
        self.port = port
        self.token = token
    }

    /// The largest body each path takes: video uploads, pictures (with room for a multipart
    /// envelope), and JSON for everything else.
    public var bodyLimits: @Sendable (String) -> Int {
        let (videos, pictures, json) = (maxVideoUploadBytes, maxUploadBytes + (64 << 10), maxJSONBytes)
        return { path in
            switch path {
            case "/api/v1/uploads": return videos
            case "/api/v1/detect", "/v1/vision/detection": return pictures
            default: return json
            }
        }
    }

    /// The address webhooks and events name the server by: `publicURL`, else `http://HOST:PORT`
    /// with the bind address (this machine's name when bound to every interface).
    public var externalBase: String {
        if let publicURL {
            let text = publicURL.absoluteString
            return text.hasSuffix("/") ? String(text.dropLast()) : text
        }
        var name = host
        if host == "0.0.0.0" || host == "::" {
            name = Self.machineName() ?? "localhost"
        } else if host.contains(":") {
            name = "[\(host)]"
        }
        return "http://\(name):\(port)"
    }

    /// This machine's host name (`gethostname`), nil when it cannot be read.
    public static func machineName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `host` only accepts connections from this machine.
    public var bindsLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// Shortest token accepted on a loopback address.
    public static let minimumTokenLength = 12
    /// Shortest token accepted when other machines can connect.
    public static let minimumNetworkTokenLength = 16

    /// - Throws: ``ServerError/tokenRequired(host:)`` for a non-loopback address without a token,
    ///   ``ServerError/tokenTooShort(length:minimum:)``.
    public func validate() throws {
        if !bindsLoopback && (token ?? "").isEmpty { throw ServerError.tokenRequired(host: host) }
        if let token, !token.isEmpty {
            let minimum = bindsLoopback ? Self.minimumTokenLength : Self.minimumNetworkTokenLength
            guard token.count >= minimum else { throw ServerError.tokenTooShort(length: token.count, minimum: minimum) }
        }
        do { try webhooks.validate() } catch let error as WebhookError { throw ServerError.badWebhook(error) }
    }
}

/// Why the server cannot start.
public enum ServerError: Error, Equatable, Sendable, CustomStringConvertible {
    case tokenRequired(host: String)
    case tokenTooShort(length: Int, minimum: Int)
    case badWebhook(WebhookError)
    /// A detection setting the model cannot honour (a class it does not have).
    case badDetectionSettings(String)

    public var description: String {
        switch self {
        case .tokenRequired(let host):
            return "binding \(host) lets other machines in: give a token (--token, or SPOTTER_TOKEN in the environment) of at least \(ServerConfiguration.minimumNetworkTokenLength) characters that every request must carry"
        case .tokenTooShort(let length, let minimum):
            return "the token has \(length) characters; it needs at least \(minimum) (for example: openssl rand -hex 16)"
        case .badWebhook(let error):
            return "\(error)"
        case .badDetectionSettings(let reason):
            return reason
        }
    }
}
