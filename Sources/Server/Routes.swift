import Cluster
import Detection
import Foundation
import Logging
import Hummingbird
import Imaging
import Media
import Pipeline

/// The server's endpoints. Paths taken from a request are checked against a strict pattern and
/// resolved inside the album; nothing outside it is ever read or deleted.
struct Routes: Sendable {
    let configuration: ServerConfiguration
    let album: Album
    let detection: DetectionService
    let sources: SourceHub
    /// The cluster's database in cluster mode (`--database`); nil for a server on its own.
    let cluster: ClusterStore?
    /// In cluster mode: this node's events to and from the database's outbox.
    let clusterEvents: EventOutbox?
    let downloads: SampleDownloads?
    let fileIO = FileIO()
    let started = Date()
    let webhooks = WebhookCounters()
    let hosts: HostNames
    let sessions = Sessions()
    let limiter = LoginLimiter()
    /// Pictures decoded for requests at once, and how many may wait.
    let decoding: WorkGate
    /// Video uploads received at once.
    let uploading: WorkGate

    /// Opens the album and loads the detector pool.
    ///
    /// - Throws: ``AlbumError``, detector errors.
    init(configuration: ServerConfiguration) throws {
        self.configuration = configuration
        let cluster = configuration.cluster.map { ClusterStore(url: $0.database) }
        // In a cluster the album folder is shared and its rows are in the cluster's database.
        album = try cluster.map { try Album(directory: configuration.album, index: ClusterAlbumIndex(store: $0)) } ?? Album(directory: configuration.album)
        detection = DetectionService(pool: try DetectionService.makePool(modelPath: configuration.modelPath, options: configuration.detector),
                                     refine: configuration.refine)
        let events = EventHub()
        let policy = SourcePolicy(folders: [configuration.album.appendingPathComponent("uploads")] + configuration.mediaFolders)
        sources = SourceHub(album: album, pool: detection.pool, refine: configuration.refine, events: events, resolve: configuration.resolveInput,
                            policy: policy, defaults: configuration.defaults, publicBase: configuration.externalBase)
        self.cluster = cluster
        if let cluster, let settings = configuration.cluster {
            let outbox = EventOutbox(store: cluster, node: settings.node, logger: Logger(label: "spotter.cluster"))
            events.forward { type, source, json in outbox.enqueue(type: type, source: source, json: json) }
            clusterEvents = outbox
        } else {
            clusterEvents = nil
        }
        hosts = HostNames(bind: configuration.host, allowed: configuration.allowedHosts, publicURL: configuration.publicURL)
        let slots = max(1, configuration.decodeSlots ?? detection.pool.count)
        decoding = WorkGate(running: slots, waiting: 2 * slots)
        uploading = WorkGate(running: max(1, configuration.maxConcurrentUploads), waiting: 0)
        downloads = configuration.samples.map { SampleDownloads(library: $0, events: events) }
        if let classes = configuration.defaults.classes, let labels = detection.pool.labels {
            do { try SourceSpec.checkClasses(classes, labels: labels) } catch { throw ServerError.badDetectionSettings("--classes: \(error)") }
        }
    }

    func register(on router: Router<ServerContext>) {
        router.get("/") { _, _ in Response(status: .seeOther, headers: [.location: "/album"]) }
        for path in ["/health", "/api/v1/health"] {
            // The album's path only where no token guards the server (it tells a stranger about the machine).
            router.get(RouterPath(path)) { _, _ in
                jsonResponse((configuration.token ?? "").isEmpty ? ["status": "ok", "album": configuration.album.path] : ["status": "ok"])
            }
        }
        router.get("/api/v1/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: OpenAPI.document)))
        }
        router.get("/metrics") { _, _ in try await metrics() }
        router.get("/album") { _, _ in html(Pages.album) }
        router.get("/login") { request, _ in html(Pages.login(next: Self.localPath(request.uri.queryParameters["next"]), message: nil)) }
        router.post("/login") { request, context in try await login(request, context) }
        router.post("/logout") { request, _ in
            sessions.end(Sessions.id(in: request.headers[.cookie]))
            return Response(status: .seeOther, headers: [.location: "/login", .setCookie: "\(Sessions.cookie)=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"])
        }

        router.get("/api/v1/album") { request, _ in try listClips(request) }
        router.get("/api/v1/album/:id") { request, context in
            let id = try context.parameters.require("id", as: Int64.self)
            guard let clip = try album.clip(id: id) else { throw HTTPError(.notFound, message: "no clip \(id) in the album") }
            return jsonResponse(encoding: ClipReport(clip, base: base(of: request)))
        }
        router.delete("/api/v1/album/:id") { _, context in
            let id = try context.parameters.require("id", as: Int64.self)
            do {
                guard try album.delete(id: id) else { throw HTTPError(.notFound, message: "no clip \(id) in the album") }
            } catch let error as AlbumError {
                // The file stays, and so does the clip in the album.
                if case .cannotDelete = error { throw HTTPError(.conflict, message: "\(error)") }
                throw error
            }
            return Response(status: .noContent)
        }
        router.get("/media/clips/:name") { request, context in try await albumFile(folder: "clips", request, context) }
        router.head("/media/clips/:name") { request, context in try await albumFile(folder: "clips", request, context) }
        router.get("/media/thumbnails/:name") { request, context in try await albumFile(folder: "thumbnails", request, context) }

        router.get("/live") { _, _ in html(Pages.live) }
        router.get("/api/v1/events") { request, _ in
            let query = request.uri.queryParameters
            let types = query["types"].map { Set($0.split(separator: ",").map(String.init)) }
            return sources.events.response(sources: query["source"].map { [String($0)] }, types: types, format: .serverSentEvents)
        }
        router.get("/api/v1/live") { request, context in
            let query = request.uri.queryParameters
            let list = { (name: String) in query[name[...]].map { Set($0.split(separator: ",").map(String.init)) } }
            try? await EventHub.keepLiveBuffersShort(context.channel)
            // `local=1`: only this node's own sources (another node's relay asks so; relays never chain).
            return sources.events.response(sources: list("sources"), types: list("types"), format: .live, relayed: query["local"] != "1")
        }
        router.get("/api/v1/sources") { _, _ in
            if let cluster { return jsonResponse(["sources": try await clusterSources(cluster).map { $0.object }]) }
            return jsonResponse(["sources": sources.list().map { $0.status() }])
        }
        router.post("/api/v1/sources") { request, context in try await addSource(request, context) }
        router.get("/api/v1/sources/:id") { _, context in
            if let cluster {
                let id = try context.parameters.require("id")
                guard let row = try await Self.clusterCall({ try await cluster.source(id) }) else { throw HTTPError(.notFound, message: "no source \(id)") }
                return jsonResponse(ClusterSourceAnswer.object(row, local: sources.source(id), node: configuration.cluster?.node ?? ""))
            }
            return jsonResponse(try source(context).status())
        }
        router.patch("/api/v1/sources/:id") { request, context in
            let id = try context.parameters.require("id")
            let patch = try await decodeJSON(SourcePatch.self, request, example: "{\"classes\": [\"person\", \"car\"], \"threshold\": 0.6, \"paused\": true}")
            if let cluster { return try await updateClusterSource(cluster, id: id, patch: patch) }
            do { return jsonResponse(try await sources.update(id, with: patch).status()) } catch let error as SourceHub.AddError {
                throw Self.httpError(error)
            }
        }
        router.delete("/api/v1/sources/:id") { _, context in
            let id = try context.parameters.require("id")
            if let cluster {
                guard try await Self.clusterCall({ try await cluster.removeSource(id) }) else { throw HTTPError(.notFound, message: "no source \(id)") }
                return Response(status: .noContent)
            }
            do {
                guard try await sources.remove(id) else { throw HTTPError(.notFound, message: "no source \(id)") }
            } catch let error as SourceHub.AddError {
                throw Self.httpError(error)
            }
            return Response(status: .noContent)
        }
        router.get("/api/v1/counts") { request, _ in try counts(request) }
        router.get("/api/v1/sources/:id/objects/:track/snapshot.jpg") { _, context in
            let track = try context.parameters.require("track", as: Int.self)
            guard let bytes = try source(context).snapshot(track: track) else {
                throw HTTPError(.notFound, message: "no snapshot of object \(track): only the last 64 objects that ended keep theirs")
            }
            return Response(status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "no-store"], body: .init(byteBuffer: bytes))
        }
        router.get("/api/v1/sources/:id/snapshot.jpg") { request, context in
            let boxes = request.uri.queryParameters["boxes"].map { $0 == "1" || $0 == "true" } ?? true
            return try frame(try source(context), number: nil, boxes: boxes)
        }
        router.get("/api/v1/sources/:id/frames/:name") { request, context in
            let name = try context.parameters.require("name")
            guard name.hasSuffix(".jpg"), let number = Int(name.dropLast(4)), number > 0 else {
                throw HTTPError(.badRequest, message: "frames are named N.jpg")
            }
            let boxes = request.uri.queryParameters["boxes"].map { $0 == "1" || $0 == "true" } ?? false
            return try frame(try source(context), number: number, boxes: boxes)
        }

        router.post("/api/v1/uploads") { request, context in
            try await uploading.run(busy: "\(configuration.maxConcurrentUploads) uploads are being received; try again when one ends") {
                try await Uploads(folder: configuration.album.appendingPathComponent("uploads"), maxBytes: configuration.maxVideoUploadBytes,
                                  maxTotalBytes: configuration.maxUploadsTotalBytes).receive(request, context)
            }
        }
        router.get("/samples") { _, _ in html(Pages.samples) }
        router.get("/api/v1/samples") { _, _ in jsonResponse(["samples": downloads?.list() ?? []]) }
        router.post("/api/v1/samples/:name/pull") { _, context in
            let name = try context.parameters.require("name")
            guard let downloads else { throw HTTPError(.notFound, message: "this server has no sample catalog") }
            switch downloads.start(name) {
            case (false, _): throw HTTPError(.notFound, message: "no sample named \(name) (GET /api/v1/samples lists them)")
            case (true, true): return jsonResponse(["name": name, "state": "cached"])
            case (true, false): return jsonResponse(["name": name, "state": "downloading"], status: .accepted)
            }
        }

        router.post("/api/v1/detect") { request, context in try await detect(request, context, deepStack: false) }
        router.post("/v1/vision/detection") { request, context in try await detect(request, context, deepStack: true) }
    }

    // MARK: Album

    /// `GET /api/v1/album?source=&label=&from=&to=&before=&limit=`: newest first, with the URL of
    /// the next page.
    func listClips(_ request: Request) throws -> Response {
        let query = request.uri.queryParameters
        var filter = Album.Query()
        filter.source = query["source"].map(String.init)
        filter.label = query["label"].map(String.init)
        filter.createdFrom = query["from"].map(String.init)
        filter.createdBefore = query["to"].map(String.init)
        if let before = query["before"] {
            guard let id = Int64(before) else { throw HTTPError(.badRequest, message: "before must be a clip id") }
            filter.beforeID = id
        }
        if let limit = query["limit"] {
            guard let value = Int(limit), (1...500).contains(value) else { throw HTTPError(.badRequest, message: "limit must be 1...500") }
            filter.limit = value
        }
        let clips = try album.clips(matching: filter)
        var next: String?
        if clips.count == filter.limit, let last = clips.last?.id {
            var parts = ["before=\(last)", "limit=\(filter.limit)"]
            for key in ["source", "label", "from", "to"] {
                if let value = query[Substring(key)] {
                    parts.append("\(key)=\(String(value).addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+"))) ?? "")")
                }
            }
            next = "/api/v1/album?" + parts.joined(separator: "&")
        }
        let base = base(of: request)
        return jsonResponse(encoding: ClipPage(clips: clips.map { ClipReport($0, base: base) }, next: next))
    }

    /// Names a request may ask for in the album's folders: a file name, no path.
    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 200 && !name.hasPrefix(".")
            && name.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) }
    }

    /// A clip or thumbnail, with byte ranges (206, `Accept-Ranges`, `Content-Range`, 416).
    func albumFile(folder: String, _ request: Request, _ context: ServerContext) async throws -> Response {
        let name = try context.parameters.require("name")
        guard Self.isSafeName(name) else { throw HTTPError(.badRequest, message: "not a file name: \(name)") }
        let path = configuration.album.appendingPathComponent(folder).appendingPathComponent(name).path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              attributes[.type] as? FileAttributeType == .typeRegular, let size = attributes[.size] as? Int else {
            throw HTTPError(.notFound, message: "no \(folder == "clips" ? "clip" : "thumbnail") named \(name)")
        }
        let type = name.hasSuffix(".mp4") ? "video/mp4" : name.hasSuffix(".jpg") ? "image/jpeg" : "application/octet-stream"
        var headers: HTTPFields = [.contentType: type, .acceptRanges: "bytes"]
        switch ByteRange(header: request.headers[.range], size: size) {
        case .unsatisfiable:
            throw HTTPError(.rangeNotSatisfiable, headers: [.contentRange: "bytes */\(size)"], message: "the range is outside the \(size)-byte file")
        case .whole:
            headers[.contentLength] = String(size)
            if request.method == .head || size == 0 { return Response(status: .ok, headers: headers) }
            return Response(status: .ok, headers: headers, body: try await fileIO.loadFile(path: path, context: context))
        case .part(let range):
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            headers[.contentLength] = String(range.count)
            if request.method == .head { return Response(status: .partialContent, headers: headers) }
            return Response(status: .partialContent, headers: headers, body: try await fileIO.loadFile(path: path, range: range, context: context))
        }
    }

    // MARK: Sources

    func source(_ context: ServerContext) throws -> LiveSource {
        let id = try context.parameters.require("id")
        guard let source = sources.source(id) else { throw HTTPError(.notFound, message: "no source \(id)") }
        return source
    }

    /// `POST /api/v1/sources` with `{"input": ..., "record": true, "classes": [...], ...}`: 201 and
    /// the new source's status (with its `id`).
    func addSource(_ request: Request, _ context: ServerContext) async throws -> Response {
        let spec = try await decodeJSON(SourceSpec.self, request, example: "{\"input\": \"rtsp://cam/live\", \"record\": true, \"classes\": [\"person\"]}")
        if let cluster {
            // Checked here, stored for whichever node claims it (202: it is not running yet).
            do { try sources.check(spec) } catch let error as SourceHub.AddError { throw Self.httpError(error) }
            let settings = try spec.storedSettings()
            let id = try await Self.clusterCall { try await cluster.addSource(settings: settings, paused: spec.paused ?? false) }
            let row = SourceStatus(id: id, settings: settings, desired: (spec.paused ?? false) ? "paused" : "running", node: nil, generation: 0, state: "waiting")
            var response = jsonResponse(ClusterSourceAnswer.object(row, local: nil, node: ""), status: .accepted)
            response.headers[.location] = "/api/v1/sources/\(id)"
            return response
        }
        let source: LiveSource
        do { source = try sources.add(spec, origin: .api) } catch let error as SourceHub.AddError {
            throw Self.httpError(error)
        }
        var response = jsonResponse(source.status(), status: .created)
        response.headers[.location] = "/api/v1/sources/\(source.id)"
        return response
    }

    /// Every source of the cluster, with this node's status of those it runs.
    func clusterSources(_ cluster: ClusterStore) async throws -> [(id: String, object: [String: Any])] {
        let rows = try await Self.clusterCall { try await cluster.sources() }
        let node = configuration.cluster?.node ?? ""
        return rows.map { row in (row.id, ClusterSourceAnswer.object(row, local: sources.source(row.id), node: node)) }
    }

    /// `PATCH` in cluster mode: the new settings are checked and stored; the node running the
    /// source restarts it with them at its next lease renewal.
    func updateClusterSource(_ cluster: ClusterStore, id: String, patch: SourcePatch) async throws -> Response {
        guard let row = try await Self.clusterCall({ try await cluster.source(id) }) else {
            throw HTTPError(.notFound, message: "no source \(id)")
        }
        let old = try JSONDecoder().decode(SourceSpec.self, from: Data(row.settings.utf8))
        let spec = old.merging(patch)
        do { try sources.check(spec) } catch let error as SourceHub.AddError { throw Self.httpError(error) }
        let settings = try spec.storedSettings()
        try await Self.clusterCall { try await cluster.updateSource(id, settings: settings, paused: spec.paused) }
        var changed = row
        changed.settings = settings
        changed.desired = (spec.paused ?? false) ? "paused" : "running"
        return jsonResponse(ClusterSourceAnswer.object(changed, local: nil, node: ""))
    }

    /// A cluster database call; its failure is answered 503 (the database is down or slow).
    static func clusterCall<Result: Sendable>(_ body: @Sendable () async throws -> Result) async throws -> Result {
        do { return try await body() } catch let error as ClusterError {
            if case .unknownSource(let id) = error { throw HTTPError(.notFound, message: "no source \(id)") }
            throw HTTPError(.serviceUnavailable, message: "\(error)")
        }
    }

    /// The address URLs in an answer start with: `--public-url`, else the server the request named.
    func base(of request: Request) -> String {
        if let url = configuration.publicURL { return url.absoluteString.hasSuffix("/") ? String(url.absoluteString.dropLast()) : url.absoluteString }
        guard let authority = request.head.authority, hosts.allows(host: authority) else { return "" }
        return "http://" + authority
    }

    /// The HTTP answer to a source that cannot be added, changed or removed.
    static func httpError(_ error: SourceHub.AddError) -> HTTPError {
        switch error {
        case .invalid(let message): return HTTPError(.badRequest, message: message)
        case .tooMany: return HTTPError(.conflict, message: "\(error)")
        case .shuttingDown: return HTTPError(.serviceUnavailable, message: "\(error)")
        case .notFound: return HTTPError(.notFound, message: "\(error)")
        case .cannotStore: return HTTPError(.init(code: 507, reasonPhrase: "Insufficient Storage"), message: "\(error)")
        }
    }

    /// A JSON request body as `T`: `application/json` only (a form or `text/plain` body is what a
    /// page on another site can send without asking), at most `maxJSONBytes`.
    func decodeJSON<T: Decodable>(_ type: T.Type, _ request: Request, example: String) async throws -> T {
        let contentType = (request.headers[.contentType] ?? "").split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard contentType == "application/json" else {
            throw HTTPError(.unsupportedMediaType, message: "send the body as JSON with Content-Type: application/json, like \(example)")
        }
        var request = request
        let body: ByteBuffer
        do { body = try await request.collectBody(upTo: configuration.maxJSONBytes) } catch {
            throw HTTPError(.contentTooLarge, message: "the JSON body is larger than \(configuration.maxJSONBytes) bytes")
        }
        do { return try JSONDecoder().decode(T.self, from: Data(buffer: body)) } catch {
            throw HTTPError(.badRequest, message: "the body must be JSON like \(example): \(error)")
        }
    }

    /// A frame of a source as JPEG: `number` (one of the last few, for the live view) or the latest.
    func frame(_ source: LiveSource, number: Int?, boxes: Bool) throws -> Response {
        guard let (shown, bytes) = try source.jpeg(frame: number, boxes: boxes) else {
            throw HTTPError(.notFound, message: number.map { "frame \($0) of \(source.id) is no longer kept" } ?? "\(source.id) has no frame yet")
        }
        return Response(status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "no-store", .init("X-Frame")!: String(shown)],
                        body: .init(byteBuffer: bytes))
    }

    // MARK: Detection

    /// `POST /api/v1/detect` (the object of `spotter detect --json`) and `POST /v1/vision/detection`
    /// (DeepStack's answer, for Frigate, Home Assistant and Blue Iris). The picture is the raw body or
    /// the multipart field `image`; `threshold` (DeepStack's `min_confidence`), `classes` and
    /// `max_results` as query or form fields; defaults from `serve --threshold`, `--classes`,
    /// `--max-results`. DeepStack's predictions are sorted by confidence, at most 20 (Frigate reads
    /// 20), and its errors are `{"success": false, "error": ...}`.
    func detect(_ request: Request, _ context: ServerContext, deepStack: Bool) async throws -> Response {
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: configuration.maxUploadBytes + (64 << 10))
        } catch {
            throw HTTPError(.contentTooLarge, message: "the picture is larger than \(configuration.maxUploadBytes) bytes")
        }
        var bytes = Array(buffer: body)
        var fields: [String: String] = [:]
        for (key, value) in request.uri.queryParameters { fields[String(key)] = String(value) }
        let contentType = request.headers[.contentType] ?? ""
        if let boundary = Multipart.boundary(contentType: contentType) {
            guard let field = Multipart.field("image", in: bytes, boundary: boundary) else {
                throw HTTPError(.badRequest, message: "the multipart body has no field named image")
            }
            // Form fields, as DeepStack's clients send them (min_confidence, api_key).
            for name in ["threshold", "min_confidence", "classes", "max_results"] {
                if let value = Multipart.field(name, in: bytes, boundary: boundary) { fields[name] = String(decoding: value, as: UTF8.self) }
            }
            bytes = Array(field)
        }
        guard bytes.count <= configuration.maxUploadBytes else {
            throw HTTPError(.contentTooLarge, message: "the picture is larger than \(configuration.maxUploadBytes) bytes")
        }
        guard !bytes.isEmpty else { throw HTTPError(.badRequest, message: "send a picture: the raw body, or the multipart field image") }
        guard ImageFile.sniff(bytes) != nil else {
            throw HTTPError(.unsupportedMediaType, message: "the body is not a JPEG, PNG, BMP, WebP, GIF or TIFF picture")
        }
        let defaults = configuration.defaults
        var threshold = defaults.threshold
        if let value = fields["threshold"] ?? fields["min_confidence"] {
            guard let parsed = Float(value.trimmingCharacters(in: .whitespaces)), (0...1).contains(parsed) else {
                throw HTTPError(.badRequest, message: "threshold (min_confidence) must be between 0 and 1")
            }
            threshold = max(parsed, DetectionService.floorThreshold)
        }
        let named = fields["classes"].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
            ?? defaults.classes
        if let named, let labels = detection.pool.labels {
            do { try SourceSpec.checkClasses(named, labels: labels) } catch { throw HTTPError(.badRequest, message: "\(error)") }
        }
        let classes = named.map { Set($0.map { $0.lowercased() }) }
        var maxResults = defaults.maxResults ?? (deepStack ? 20 : nil)
        if let value = fields["max_results"] {
            guard let parsed = Int(value), parsed >= 1 else { throw HTTPError(.badRequest, message: "max_results must be a positive integer") }
            maxResults = parsed
        }
        // The declared size first: a picture bomb is refused before it costs anything.
        if let header = ImageFile.header(bytes), header.pixels > configuration.pictureLimits.maxPixels {
            throw HTTPError(.contentTooLarge, message: "\(MediaError.tooManyPixels(path: "the picture", width: header.width, height: header.height, limit: configuration.pictureLimits.maxPixels))")
        }
        let limits = configuration.pictureLimits, posted = bytes
        let start = Date()
        var result = try await decoding.run(busy: "the server is decoding as many pictures as it can; try again shortly") {
            let picture: Image
            do {
                picture = try await offCooperativeThreads { try ImageFile.decode(bytes: posted, name: "upload", limits: limits).upright }
            } catch let error as MediaError {
                if case .tooManyPixels = error { throw HTTPError(.contentTooLarge, message: "\(error)") }
                throw HTTPError(.unprocessableContent, message: "\(error)")
            }
            return try await detection.detect(picture, threshold: threshold, classes: classes)
        }
        // Strongest first (stable for equal scores), then at most maxResults.
        result.detections = result.detections.enumerated().sorted { $0.element.score != $1.element.score ? $0.element.score > $1.element.score : $0.offset < $1.offset }
            .map(\.element)
        if let maxResults { result.detections = Array(result.detections.prefix(maxResults)) }
        if deepStack {
            let predictions: [[String: Any]] = result.detections.map { d in
                var prediction: [String: Any] = [
                    "label": d.label, "confidence": (Double(d.score) * 10000).rounded() / 10000,
                    "x_min": Int(d.box.minX.rounded()), "y_min": Int(d.box.minY.rounded()),
                    "x_max": Int(d.box.maxX.rounded()), "y_max": Int(d.box.maxY.rounded()),
                ]
                // DeepStack's face recognition names people in `userid` ("unknown" for a stranger).
                if let identity = d.identity { prediction["userid"] = identity.name ?? "unknown" }
                return prediction
            }
            return jsonResponse(["success": true, "predictions": predictions, "duration": Int(Date().timeIntervalSince(start) * 1000)])
        }
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: ResultEncoding.json(result, image: "upload"))))
    }

    /// `GET /api/v1/counts?source=ID&from=T&to=T`: zone entries and line crossings per hour (hours
    /// starting at or after `from` and before `to`, ISO 8601; the last 24 hours by default).
    func counts(_ request: Request) throws -> Response {
        let query = request.uri.queryParameters
        func time(_ key: String) throws -> String? {
            guard let value = query[Substring(key)].map(String.init), !value.isEmpty else { return nil }
            guard let normalized = Album.countsTime(value) else {
                throw HTTPError(.badRequest, message: "\(key) must be an ISO 8601 time in UTC such as 2026-11-26T15:00:00Z, or a day such as 2026-11-26")
            }
            return normalized
        }
        let from = try time("from") ?? Album.hour(of: Date().addingTimeInterval(-24 * 3600))
        let to = try time("to")
        let source = query["source"].map(String.init)
        // What the sources counted since their last write is included.
        for live in sources.list() where source == nil || live.id == source { live.flushCounts(album) }
        let rows = try album.counts(source: source, from: from, to: to)
        return jsonResponse(encoding: CountsAnswer(from: from, to: to, counts: rows))
    }

    // MARK: Pages, login, metrics

    /// A page; never cached, which also keeps it out of the browser's back-forward cache (where a
    /// live page would keep its stream, and a connection, open).
    func html(_ page: String) -> Response {
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                 body: .init(byteBuffer: ByteBuffer(string: page)))
    }

    /// The login form posts `token=...&next=/path`: a right token starts a session (an HttpOnly
    /// cookie holding a random id) and returns to `next`; a wrong one shows the form again with
    /// 401, and after ``LoginLimiter/maxFailures`` wrong ones in a minute from one address, 429.
    func login(_ request: Request, _ context: ServerContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: configuration.maxJSONBytes)
        var form: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            form[String(parts[0])] = String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        let next = Self.localPath(form["next"])
        guard let token = configuration.token, !token.isEmpty else { return Response(status: .seeOther, headers: [.location: next]) }
        let client = context.clientAddress
        if let wait = limiter.wait(for: client) {
            var response = html(Pages.login(next: next, message: "Too many wrong tokens from this address: try again in \(wait) s."))
            response.status = .tooManyRequests
            response.headers[.retryAfter] = String(wait)
            return response
        }
        guard let given = form["token"], constantTimeEquals(given, token) else {
            limiter.recordFailure(client)
            var response = html(Pages.login(next: next, message: "Wrong token."))
            response.status = .unauthorized
            return response
        }
        let secure = configuration.publicURL?.scheme?.lowercased() == "https"
        return Response(status: .seeOther, headers: [.location: next, .setCookie: Sessions.setCookie(sessions.start(), secure: secure)])
    }

    /// A path on this server to return to after signing in (`/album` when it is anything else).
    static func localPath(_ value: Substring?) -> String { localPath(value.map(String.init)) }

    static func localPath(_ value: String?) -> String {
        guard let value, value.hasPrefix("/"), !value.hasPrefix("//"), !value.contains("\\"), value.count <= 500,
              !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return "/album" }
        return value
    }

    /// Prometheus text: process memory, album size, detections and their time, per-source counters.
    func metrics() async throws -> Response {
        let (requests, seconds) = detection.pool.totals
        let milliseconds = seconds * 1000
        var perSource = ""
        let all = sources.list()
        if !all.isEmpty {
            let rows = all.map { ($0.id, $0.metrics) }
            typealias Row = (fps: Double, inference: Double, dropped: Int, processed: Int, skipped: Int, recording: Bool)
            let series: [(name: String, help: String, kind: String, value: (Row) -> String)] = [
                ("spotter_source_fps", "Frames detected per second.", "gauge", { String(format: "%.2f", $0.fps) }),
                ("spotter_source_inference_milliseconds", "Latest detection time.", "gauge", { String(format: "%.2f", $0.inference) }),
                ("spotter_source_dropped_frames_total", "Frames dropped while the detector was busy.", "counter", { String($0.dropped) }),
                ("spotter_source_frames_total", "Frames processed (analyzed or skipped by motion gating).", "counter", { String($0.processed) }),
                ("spotter_source_frames_analyzed_total", "Frames the detector ran on.", "counter", { String($0.processed - $0.skipped) }),
                ("spotter_source_frames_skipped_total", "Frames motion gating skipped (nothing moved).", "counter", { String($0.skipped) }),
                ("spotter_source_recording", "1 while a clip is open.", "gauge", { $0.recording ? "1" : "0" }),
            ]
            for (name, help, kind, value) in series {
                perSource += "# HELP \(name) \(help)\n# TYPE \(name) \(kind)\n"
                for (id, m) in rows { perSource += "\(name){source=\"\(id)\"} \(value(m))\n" }
            }
        }
        let clips = try album.clipCount()
        let text = """
            # HELP spotter_process_resident_bytes Resident memory of the server process.
            # TYPE spotter_process_resident_bytes gauge
            spotter_process_resident_bytes \(residentBytes())
            # HELP spotter_album_clips Clips in the album index.
            # TYPE spotter_album_clips gauge
            spotter_album_clips \(clips)
            # HELP spotter_detections_total Pictures and source frames the detector pool ran on.
            # TYPE spotter_detections_total counter
            spotter_detections_total \(requests)
            # HELP spotter_detection_milliseconds_total Time spent detecting them.
            # TYPE spotter_detection_milliseconds_total counter
            spotter_detection_milliseconds_total \(String(format: "%.3f", milliseconds))
            # HELP spotter_uptime_seconds Seconds since the server started.
            # TYPE spotter_uptime_seconds gauge
            spotter_uptime_seconds \(String(format: "%.0f", Date().timeIntervalSince(started)))
            # HELP spotter_event_subscribers Open event streams (live views).
            # TYPE spotter_event_subscribers gauge
            spotter_event_subscribers \(sources.events.subscriberCount)
            # HELP spotter_webhook_deliveries_total clip_finished events posted to webhooks, by outcome (failed: every attempt failed).
            # TYPE spotter_webhook_deliveries_total counter
            spotter_webhook_deliveries_total{result="delivered"} \(webhooks.totals.delivered)
            spotter_webhook_deliveries_total{result="failed"} \(webhooks.totals.failed)

            """ + perSource + (await clusterMetrics())
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// In cluster mode: whether the database answers, live nodes, and this node's leases, claims
    /// and takeovers (failovers it performed), from the database's `nodes` table.
    func clusterMetrics() async -> String {
        guard let cluster, let settings = configuration.cluster else { return "" }
        let nodes = try? await cluster.nodes(within: settings.lease.leaseSeconds)
        var text = """
            # HELP spotter_cluster_database_up 1 when the cluster's database answered this scrape.
            # TYPE spotter_cluster_database_up gauge
            spotter_cluster_database_up \(nodes == nil ? 0 : 1)

            """
        guard let nodes else { return text }
        let me = nodes.first { $0.name == settings.node }
        let series: [(String, String, String, String)] = [
            ("spotter_cluster_nodes_live", "Nodes whose heartbeat is younger than a lease.", "gauge", "\(nodes.filter(\.live).count)"),
            ("spotter_cluster_leases", "Sources this node holds an unexpired lease on.", "gauge", "\(me?.sources ?? 0)"),
            ("spotter_cluster_capacity_cores", "This node's capacity for placement: its cores less what other processes use.", "gauge",
             String(format: "%.1f", me?.capacity ?? 0)),
            ("spotter_cluster_claims_total", "Leases this node has claimed.", "counter", "\(me?.claims ?? 0)"),
            ("spotter_cluster_takeovers_total", "Leases this node took over from another node (failovers).", "counter", "\(me?.takeovers ?? 0)"),
        ]
        for (name, help, kind, value) in series { text += "# HELP \(name) \(help)\n# TYPE \(name) \(kind)\n\(name) \(value)\n" }
        if let outbox = clusterEvents {
            let totals = outbox.totals
            text += """
                # HELP spotter_cluster_events_total Events this node published for the outbox, by outcome (fenced: its lease had moved on; dropped: the queue was full).
                # TYPE spotter_cluster_events_total counter
                spotter_cluster_events_total{result="written"} \(totals.written)
                spotter_cluster_events_total{result="fenced"} \(totals.fenced)
                spotter_cluster_events_total{result="dropped"} \(totals.dropped)
                # HELP spotter_cluster_events_pending Events waiting to be written to the outbox.
                # TYPE spotter_cluster_events_pending gauge
                spotter_cluster_events_pending \(outbox.pending)
                # HELP spotter_cluster_events_relayed_total Events of other nodes' sources relayed to this node's subscribers.
                # TYPE spotter_cluster_events_relayed_total counter
                spotter_cluster_events_relayed_total \(totals.relayed)

                """
        }
        return text
    }

    /// VmRSS from /proc/self/status, in bytes.
    func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes * 1024
    }
}
