import ArgumentParser
import Cluster
import Detection
import Faces
import Foundation
import ModelStore
import Pipeline
import Server
import Yams

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve live sources, the album and detection over HTTP: pages, a JSON API, events.",
        discussion: """
            Pages: /live (every source's picture with boxes, a recording indicator, fps, inference \
            time, dropped frames and latency; add and remove sources there), /album (clips newest \
            first with thumbnails, filters, playback, download, delete). API under /api/v1 \
            (described at /api/v1/openapi.json): sources (cameras, streams, files, cached samples; \
            all share one detector per core), Server-Sent Events at /api/v1/events, album list, get \
            and delete; \
            POST /api/v1/detect with a picture (the object `spotter detect --json` prints); \
            POST /v1/vision/detection answers as DeepStack does, for Frigate, Home Assistant and \
            Blue Iris. Also /health and /metrics (Prometheus). Binds 127.0.0.1 unless --host says \
            otherwise, which needs --token (at least 16 characters; 12 on loopback). Sources \
            added through the API may be network URLs (rtsp, rtsps, rtmp, http(s), tcp, udp, \
            srt), cameras (/dev/videoN), or files in the album's uploads, downloaded samples \
            and --media-dir folders; the config file's sources may name files anywhere. Changes \
            must come from this server's own pages or a client without Origin (curl, scripts). \
            SIGINT and SIGTERM stop it gracefully.

            A config file (JSON, or YAML) starts sources with the server and names webhooks \
            (each finished clip is POSTed to them as JSON, retried with doubling delays until a \
            2xx answer):
              {"sources": [{"input": "rtsp://cam.local/live", "record": true, "classes": ["person"]},
                           {"input": "demo.mp4", "realtime": true, "loop": true, "rectangles": true}],
               "webhooks": ["http://homeassistant.local:8123/api/webhook/spotter"]}
            or the same in cameras.yaml:
              sources:
                - input: rtsp://cam.local/live
                  classes: [person]
                - {input: demo.mp4, realtime: true, loop: true, rectangles: true}
              webhooks:
                - http://homeassistant.local:8123/api/webhook/spotter

            Examples:
              spotter serve --album ~/Clips
              spotter serve --album ~/Clips --config cameras.json --keep-days 14
              spotter serve --album ~/Clips --media-dir ~/Videos   # sources may use them
              curl -s --json '{"input": "/dev/video0"}' localhost:8080/api/v1/sources
              spotter serve --album ~/Clips --host 0.0.0.0 --token "$(openssl rand -hex 8)"
              SPOTTER_TOKEN=$(cat token) spotter serve --album ~/Clips --host 0.0.0.0
              spotter serve --album ~/Clips --webhook http://127.0.0.1:9000/clips
              spotter serve --album ~/Clips --faces ~/faces.sqlite   # names people
              curl -s --data-binary @photo.jpg localhost:8080/api/v1/detect
              spotter serve --database postgres://spotter@db/spotter --node cams-1
            """)

    @Option(help: "Address to bind (anything but loopback needs --token).")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "Port to listen on.")
    var port = 8080

    @Option(help: "The album folder to show (created if needed).")
    var album = "album"

    @Option(help: ArgumentHelp("A token every request must carry (Authorization: Bearer TOKEN, or the login page's cookie). Without it, SPOTTER_TOKEN's value, if set: other local users can read command-line arguments in ps, not the environment.",
                               valueName: "token"))
    var token: String?

    /// --token, or else SPOTTER_TOKEN.
    var requiredToken: String? { token ?? ProcessInfo.processInfo.environment["SPOTTER_TOKEN"] }

    @Option(help: "A JSON file listing sources to start: {\"sources\": [{\"input\": ..., \"record\": true, \"classes\": [...]}]}.")
    var config: String?

    @Option(help: "A URL that gets each finished clip, object and zone event as a JSON POST (repeat for several; added to the config file's).")
    var webhook: [String] = []

    @Option(help: ArgumentHelp("Comma-separated event types the webhooks get (default all: clip_finished, object_started, object_ended, zone_enter, zone_exit, line_cross, loitering).",
                               valueName: "types"))
    var webhookEvents: String?

    @Option(parsing: .unconditional, help: "Delete clips older than this many days (checked every minute).")
    var keepDays: Double?

    @Option(parsing: .unconditional, help: "Delete the oldest clips while the album takes more than this many GiB.")
    var keepGib: Double?

    @Option(parsing: .unconditional, help: "Largest picture accepted by the detect endpoints, in MiB.")
    var maxUploadMib = 32

    @Option(parsing: .unconditional, help: "Most megapixels a posted picture may declare (checked on its header before decoding).")
    var maxMegapixels: Double = 50

    @Option(name: .customLong("media-dir"), help: "A folder whose videos sources added through the API may open (repeatable; besides uploads and downloaded samples).")
    var mediaDirs: [String] = []

    @Option(name: .customLong("allowed-hosts"), parsing: .upToNextOption, help: "Host names this server answers to besides its address, localhost, 127.0.0.1 and [::1] (a request naming another is refused).")
    var allowedHosts: [String] = []

    @Option(help: "The URL people reach this server at, behind a reverse proxy (https://cams.example.com): accepted as its origin.")
    var publicURL: String?

    @Option(parsing: .unconditional, help: "Most GiB the album's uploaded videos may take together.")
    var maxUploadsGib: Double = 20

    @Option(parsing: .unconditional, help: "Most open HTTP connections; more are closed as they arrive.")
    var maxConnections = 512

    @Option(parsing: .unconditional, help: "Seconds a connection may send nothing (headers, body, or between requests) before it is closed.")
    var idleTimeout: Double = 30

    @Option(help: ArgumentHelp("Cluster mode: a PostgreSQL database shared with other nodes (postgres://USER@HOST:PORT/DB; the password from PGPASSWORD, not the URL, keeps it out of ps); sources added through any node run on one of them.",
                               valueName: "url"))
    var database: String?

    @Option(help: "This node's name in the cluster (default: the machine's name and the port).")
    var node: String?

    @OptionGroup var detector: DetectorOptions

    @OptionGroup(title: "Face recognition (with --faces)") var faceFlags: FaceNamingFlags

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("--port must be 1...65535") }
        guard maxUploadMib >= 1 else { throw ValidationError("--max-upload-mib must be at least 1") }
        // The address and token before anything loads (or downloads) a model.
        do { try ServerConfiguration(album: URL(fileURLWithPath: album), modelPath: "", host: host, port: port, token: requiredToken).validate() } catch {
            throw ValidationError("\(error)")
        }
        guard maxConnections >= 1, idleTimeout > 0 else { throw ValidationError("--max-connections and --idle-timeout must be positive") }
        guard maxMegapixels > 0, maxUploadsGib > 0 else { throw ValidationError("--max-megapixels and --max-uploads-gib must be positive") }
        for folder in mediaDirs {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
                throw ValidationError("--media-dir \(folder) is not a folder")
            }
        }
        if let publicURL {
            guard let url = URL(string: publicURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
                throw ValidationError("--public-url \(publicURL) is not an http(s) URL like https://cams.example.com")
            }
        }
        guard (keepDays ?? 1) > 0, (keepGib ?? 1) > 0 else { throw ValidationError("--keep-days and --keep-gib must be positive") }
        if let database {
            do { _ = try DatabaseURL(database) } catch { throw ValidationError("--database: \(error)") }
        } else if node != nil {
            throw ValidationError("--node names this server in a cluster: give --database too")
        }
        // Before anything loads (or downloads) a model.
        _ = try configFileAndWebhooks()
    }

    /// The config file (empty without --config) and every webhook URL, checked.
    func webhookOptions(urls: [URL]) -> WebhookOptions {
        var options = WebhookOptions(urls: urls)
        if let webhookEvents {
            options.events = Set(webhookEvents.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        return options
    }

    func configFileAndWebhooks() throws -> (file: ConfigFile, webhooks: [URL]) {
        let file = try config.map(Self.read(config:)) ?? ConfigFile()
        let urls = try ((file.webhooks ?? []) + webhook).map { text in
            guard let url = URL(string: text) else { throw ValidationError("webhook \(text) is not a URL") }
            return url
        }
        do { try webhookOptions(urls: urls).validate() } catch { throw ValidationError("\(error)") }
        if faceFlags.faces == nil, let stranger = file.sources?.first(where: { $0.trigger == "unknown-face" }) {
            throw ValidationError("--config source \(stranger.input) has \"trigger\": \"unknown-face\", which needs --faces GALLERY")
        }
        return (file, urls)
    }

    func run() async throws {
        keepHeapCompactForLongRuns()
        var options = ObjectDetector.Options()
        options.threadCount = threadsWithinCores(detector.threads)
        options.backend = detector.backend
        options.labelsPath = detector.labels
        options.resizeMode = detector.resize?.mode
        if let mean = detector.mean, let std = detector.std { options.normalization = .init(mean: [mean], std: [std]) }
        var configuration = ServerConfiguration(album: URL(fileURLWithPath: album), modelPath: try detector.modelPath, detector: options,
                                                host: host, port: port, token: requiredToken)
        configuration.maxUploadBytes = maxUploadMib << 20
        // --threshold, --classes and --max-results: the defaults of the detect endpoints and new sources.
        configuration.defaults = DetectionDefaults(
            threshold: detector.threshold,
            classes: detector.classes.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } },
            maxResults: detector.maxResults)
        configuration.pictureLimits = .init(maxPixels: Int(maxMegapixels * 1_000_000))
        configuration.maxUploadsTotalBytes = Int(maxUploadsGib * 1_073_741_824)
        configuration.allowedHosts = allowedHosts
        configuration.maxConnections = maxConnections
        configuration.idleTimeout = idleTimeout
        configuration.publicURL = publicURL.flatMap(URL.init(string:))
        configuration.retention = Retention(maxAge: keepDays.map { $0 * 86400 }, maxBytes: keepGib.map { Int($0 * 1_073_741_824) })
        let (file, webhooks) = try configFileAndWebhooks()
        configuration.sources = file.sources ?? []
        configuration.webhooks = webhookOptions(urls: webhooks)
        if let database {
            let machine = ServerConfiguration.machineName() ?? "node"
            var cluster = ClusterSettings(database: try DatabaseURL(database), node: node ?? "\(machine):\(port)")
            cluster.lease.address = configuration.externalBase
            configuration.cluster = cluster
        }
        let store = try detector.store.makeStore()
        if faceFlags.faces != nil {
            // One single-threaded namer per detector; each runs while its frame holds a detector.
            let namers = try NamerPool((0..<max(1, options.threadCount)).map { _ in try faceFlags.makeNamer(store: detector.store, threads: 1)! })
            configuration.refine = { detections, image in try namers.name(detections, in: image) }
        }
        // In a cluster, demo videos are downloaded into the shared album, so whichever node runs a
        // sample's source finds it.
        var sampleOptions = store.options
        if database != nil { sampleOptions.root = URL(fileURLWithPath: album).appendingPathComponent("samples") }
        let samples = database == nil ? store : ModelStore(catalog: store.catalog, options: sampleOptions)
        configuration.resolveInput = { input in try Self.resolveCachedSample(input, store: samples) }
        // Sources from the API may open files in these folders (and the album's uploads).
        configuration.mediaFolders = mediaDirs.map { URL(fileURLWithPath: $0) } + [samples.options.root]
        configuration.samples = StoreSamples(store: samples)
        do { try configuration.validate() } catch { throw ValidationError("\(error)") }
        let address = "http://\(host):\(port)/live", folder = album
        do {
            try await serve(configuration: configuration) {
                FileHandle.standardError.write(Data("spotter: serving \(folder) on \(address)\n".utf8))
            }
        } catch let error as ServerError {
            throw ValidationError("\(error)")
        } catch {
            throw CommandFailure("the server stopped: \(error)")
        }
    }

    /// The config file: sources to start and webhook URLs.
    struct ConfigFile: Decodable {
        var sources: [SourceSpec]?
        var webhooks: [String]?
    }

    /// JSON, or YAML (a `.yaml`/`.yml` file, or any file that does not start with `{`).
    static func read(config path: String) throws -> ConfigFile {
        let data: Data
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { throw ValidationError("--config \(path): no such file") }
        guard !isFolder.boolValue else { throw ValidationError("--config \(path) is a folder; give the JSON or YAML file") }
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch { throw ValidationError("--config \(path): not readable (check its permissions)") }
        let text = String(decoding: data, as: UTF8.self)
        let isYAML = [".yaml", ".yml"].contains { path.lowercased().hasSuffix($0) }
            || !text.drop { $0.isWhitespace }.hasPrefix("{")
        do {
            return isYAML ? try YAMLDecoder().decode(ConfigFile.self, from: text) : try JSONDecoder().decode(ConfigFile.self, from: data)
        } catch {
            let example = isYAML ? "sources:\n  - input: rtsp://cam/live\nwebhooks:\n  - http://host/hook"
                                 : "{\"sources\": [{\"input\": \"rtsp://cam/live\"}], \"webhooks\": [\"http://host/hook\"]}"
            throw ValidationError("--config \(path) is not \(isYAML ? "YAML" : "JSON") like\n\(example)\n(\(error))")
        }
    }

    /// A sample's name becomes its cached file; a sample not downloaded yet is an error (the server
    /// does not download inside a request); anything else passes through.
    static func resolveCachedSample(_ input: String, store: ModelStore) throws -> String {
        guard !FileManager.default.fileExists(atPath: input), !input.contains("/"), store.catalog.entry(named: input)?.kind == .sample else {
            return input
        }
        guard let item = try store.cached(input) else {
            throw CommandFailure("the sample \(input) is not downloaded yet: run `spotter samples pull \(input)` first")
        }
        return item.mainFile.path
    }
}

/// The model store's sample videos, as the server's demo page shows them.
struct StoreSamples: SampleLibrary {
    let store: ModelStore

    func samples() -> [SampleVideo] {
        store.catalog.entries.filter { $0.kind == .sample }.map { entry in
            SampleVideo(name: entry.name, summary: entry.summary, license: entry.license, size: entry.size,
                        cachedPath: (try? store.cached(entry.name))?.map { $0.mainFile.path })
        }
    }

    func pull(_ name: String, progress: @escaping (SampleProgress) -> Void) throws -> String {
        try store.pull(name) { event in
            if case .progress(let p) = event { progress(SampleProgress(received: p.received, total: p.total, bytesPerSecond: p.bytesPerSecond)) }
        }.mainFile.path
    }
}
