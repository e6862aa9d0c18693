import ArgumentParser
import Detection
import Foundation
import Server

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the album and detection over HTTP: pages, a JSON API, clips with byte ranges.",
        discussion: """
            Pages: /album (clips newest first with thumbnails, filters, playback, download, delete). \
            API under /api/v1 (described at /api/v1/openapi.json): album list, get and delete; \
            POST /api/v1/detect with a picture (the object `spotter detect --json` prints); \
            POST /v1/vision/detection answers as DeepStack does, for Frigate, Home Assistant and \
            Blue Iris. Also /health and /metrics (Prometheus). Binds 127.0.0.1 unless --host says \
            otherwise, which needs --token. SIGINT and SIGTERM stop it gracefully.

            Examples:
              spotter serve --album ~/Clips
              spotter serve --album ~/Clips --host 0.0.0.0 --token s3cret
              curl -s --data-binary @photo.jpg localhost:8080/api/v1/detect
            """)

    @Option(help: "Address to bind (anything but loopback needs --token).")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on.")
    var port = 8080

    @Option(help: "The album folder to show (created if needed).")
    var album = "album"

    @Option(help: "A token every request must carry (Authorization: Bearer TOKEN, or the login page's cookie).")
    var token: String?

    @Option(help: "Largest picture accepted by the detect endpoints, in MiB.")
    var maxUploadMib = 32

    @OptionGroup var detector: DetectorOptions

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("--port must be 1...65535") }
        guard maxUploadMib >= 1 else { throw ValidationError("--max-upload-mib must be at least 1") }
    }

    func run() async throws {
        var options = ObjectDetector.Options()
        options.threadCount = threadsWithinCores(detector.threads)
        options.backend = detector.backend
        options.labelsPath = detector.labels
        var configuration = ServerConfiguration(album: URL(fileURLWithPath: album), modelPath: try detector.modelPath, detector: options,
                                                host: host, port: port, token: token)
        configuration.maxUploadBytes = maxUploadMib << 20
        do { try configuration.validate() } catch { throw ValidationError("\(error)") }
        let address = "http://\(host):\(port)/album", folder = album
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
}
