import Detection
import Foundation
import Hummingbird
import HummingbirdCore
import Imaging
import Logging
import Media
import NIOCore
import Pipeline
import ServiceLifecycle

/// The request context of Spotter's server: Hummingbird's core storage.
public struct ServerContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The request's connection (the live stream bounds what waits in its buffers).
    let channel: any Channel
    /// The body limit of Hummingbird's own decoding (64 KiB, the size of the JSON bodies); the
    /// routes that take pictures collect their bodies up to the configuration's own limits.
    public var maxUploadSize: Int { 64 << 10 }

    public init(source: Source) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// Builds the `spotter serve` application: pages, the `/api/v1` JSON API, clip files with byte
/// ranges, the DeepStack-compatible detection endpoint, health and metrics.
///
/// ```swift
/// let app = try await buildApplication(configuration: .init(album: albumURL, modelPath: "detect.tflite"))
/// try await app.runService()   // SIGINT/SIGTERM end it gracefully
/// ```
///
/// - Throws: ``ServerError``, ``AlbumError``, detector errors.
public func buildApplication(configuration: ServerConfiguration, logger: Logger = Logger(label: "spotter.serve"),
                             onListening: @escaping @Sendable () -> Void = {}) async throws -> some ApplicationProtocol {
    try configuration.validate()
    let routes = try Routes(configuration: configuration)
    // Clips a killed run (or, in a cluster, a node that died) left without an index row are
    // indexed as incomplete before the first request is answered and before any source starts;
    // clips a running recorder holds stay locked and are skipped.
    // (A cluster node repairs once its database's schema is in place: ClusterRun.)
    if routes.cluster == nil {
        let repaired = try routes.album.repair()
        if !repaired.adopted.isEmpty || !repaired.removed.isEmpty {
            logger.info("album: indexed \(repaired.adopted.count) clip(s) left without an index row, removed \(repaired.removed.count) unreadable one(s)")
        }
    }
    // The service group stops when any service returns, so the webhook service runs only when
    // there are URLs; it is listed first so it shuts down last, after the sources' final clips.
    var services: [any Service] = []
    if !configuration.webhooks.urls.isEmpty {
        services.append(WebhookService(options: configuration.webhooks, events: routes.sources.events, logger: logger, counters: routes.webhooks))
    }
    var cluster: ClusterRun?
    if let store = routes.cluster, let outbox = routes.clusterEvents, let settings = configuration.cluster {
        cluster = ClusterRun(store: store, outbox: outbox, settings: settings, hub: routes.sources, initial: configuration.sources, token: configuration.token,
                             logger: logger)
    }
    services.append(SourcesService(hub: routes.sources, initial: configuration.sources, retention: configuration.retention, cluster: cluster, logger: logger))
    let connections = OpenConnections(limit: configuration.maxConnections)
    let limits = configuration.bodyLimits
    let http = HTTP1Channel.Configuration(additionalChannelHandlers: [ConnectionLimiter(connections), BodyLimitHandler(limit: limits)],
                                          idleTimeout: .milliseconds(Int64(configuration.idleTimeout * 1000)))
    return Application(
        router: buildRouter(routes),
        server: .http1(configuration: http),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "spotter"),
        services: services,
        onServerRunning: { _ in onListening() },
        logger: logger)
}

/// Starts the configured sources with the server, applies the album's retention every minute,
/// and at shutdown (after the HTTP server has stopped taking requests) stops every source so each
/// open clip is finished and indexed.
struct SourcesService: Service {
    let hub: SourceHub
    let initial: [SourceSpec]
    let retention: Retention
    /// In cluster mode the sources come from the cluster's leases, not the album or config file.
    let cluster: ClusterRun?
    let logger: Logger

    func run() async throws {
        if cluster == nil {
            for (input, error) in hub.restore(config: initial) { logger.error("source \(input): \(error)") }
        }
        for source in hub.list() { logger.info("source \(source.id) (\(source.origin.rawValue)): \(source.shownInput)") }
        let pruning = Task { [hub, retention, logger] in
            while !retention.isEmpty && !Task.isCancelled {
                do {
                    for entry in try hub.album.prune(retention) {
                        hub.events.publish("clip_deleted", source: nil, encoding: ClipDeleted(clip: ClipReport(entry, base: hub.publicBase)))
                    }
                } catch {
                    logger.error("retention: \(error)")
                }
                try? await Task.sleep(for: .seconds(60))
            }
        }
        if let cluster {
            // Returns at shutdown once this node's sources have stopped and their leases are released.
            do { try await cluster.run() } catch {
                pruning.cancel()
                await hub.shutdown()
                throw error
            }
        } else {
            try? await gracefulShutdown()
        }
        pruning.cancel()
        await hub.shutdown()
    }
}

/// Builds the application and runs it until SIGINT or SIGTERM (graceful shutdown through
/// swift-service-lifecycle, as Hummingbird's `runService` sets it up).
///
/// - Parameter listening: called once the server listens on its address (not when binding fails).
/// - Throws: ``ServerError``, ``AlbumError``, detector errors, and bind failures.
public func serve(configuration: ServerConfiguration, listening: @escaping @Sendable () -> Void = {}) async throws {
    var logger = Logger(label: "spotter.serve")
    logger.logLevel = .info
    let application = try await buildApplication(configuration: configuration, logger: logger, onListening: listening)
    try await application.runService()
}

/// The router alone (tests drive it without sockets; sources they add run until they remove them).
public func buildRouter(configuration: ServerConfiguration) throws -> Router<ServerContext> {
    try configuration.validate()
    return buildRouter(try Routes(configuration: configuration))
}

func buildRouter(_ routes: Routes) -> Router<ServerContext> {
    let configuration = routes.configuration
    let router = Router(context: ServerContext.self)
    router.add(middleware: JSONErrorMiddleware())
    router.add(middleware: AccessMiddleware(hosts: routes.hosts, token: configuration.token, sessions: routes.sessions, limiter: routes.limiter,
                                            pictureBodyLimit: configuration.maxUploadBytes + (64 << 10)))
    routes.register(on: router)
    return router
}

/// Every error becomes a JSON body `{"error": {"status": N, "message": "..."}}` with its status.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPResponseError {
            let message = (error as? HTTPError)?.body ?? "\(error.status.reasonPhrase)"
            // DeepStack's clients read {"success": false, "error": "..."}.
            let object: [String: Any] = request.uri.path.hasPrefix("/v1/vision/")
                ? ["success": false, "error": message, "duration": 0] : ["error": ["status": Int(error.status.code), "message": message]]
            var response = jsonResponse(object, status: error.status)
            if let http = error as? HTTPError {
                for field in http.headers where field.name != .contentType && field.name != .contentLength { response.headers.append(field) }
            }
            return response
        } catch {
            context.logger.error("\(request.method) \(request.uri.path): \(error)")
            return jsonResponse(["error": ["status": 500, "message": "\(error)"]], status: .internalServerError)
        }
    }
}

/// A JSON response from a JSON-serializable object.
func jsonResponse(_ object: Any, status: HTTPResponse.Status = .ok) -> Response {
    Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: jsonData(object))))
}

/// A JSON answer of one of our Codable types.
func jsonResponse(encoding value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
    Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: ResultEncoding.encodeData(value))))
}

/// A JSON-serializable object as one line of JSON, keys sorted (`{}` if it is not serializable).
func jsonData(_ object: Any) -> Data {
    (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
}
