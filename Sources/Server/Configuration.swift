import Detection
import Foundation
import Imaging
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
    /// Detector settings (backend, labels; `threadCount` detectors of one thread each run requests
    /// side by side); the threshold and classes come with each request.
    public var detector: ObjectDetector.Options
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

    public init(album: URL, modelPath: String, detector: ObjectDetector.Options = .init(), host: String = "127.0.0.1", port: Int = 8080,
                token: String? = nil) {
        self.album = album
        self.modelPath = modelPath
        self.detector = detector
        self.host = host
        self.port = port
        self.token = token
    }

    /// Whether `host` only accepts connections from this machine.
    public var bindsLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// - Throws: ``ServerError/tokenRequired(host:)`` for a non-loopback address without a token.
    public func validate() throws {
        if !bindsLoopback && (token ?? "").isEmpty { throw ServerError.tokenRequired(host: host) }
        do { try webhooks.validate() } catch let error as WebhookError { throw ServerError.badWebhook(error) }
    }
}

/// Why the server cannot start.
public enum ServerError: Error, Equatable, Sendable, CustomStringConvertible {
    case tokenRequired(host: String)
    case badWebhook(WebhookError)

    public var description: String {
        switch self {
        case .tokenRequired(let host):
            return "binding \(host) lets other machines in: give a token (--token) that every request must carry"
        case .badWebhook(let error):
            return "\(error)"
        }
    }
}
