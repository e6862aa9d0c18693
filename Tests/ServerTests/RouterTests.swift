import Detection
import Foundation
import Hummingbird
import HummingbirdTesting
import Imaging
import Media
import Pipeline
import Server
import Testing
import TestSupport

/// An album with one real clip (recorded from the shared person video by the clip session, so the
/// file, thumbnail and row are what `spotter record` writes), made once for the suite.
enum ServerFixtures {
    static let album: URL = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-server-\(UUID().uuidString.prefix(8))")
        let album = try! Album(directory: directory)
        let reader = try! VideoReader(path: Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path)
        let session = try! ClipSession(album: album, source: "/videos/asl-walk.mkv", options: .init(frameRate: 30), events: { _ in })
        var detections: [Detection] = []
        while let frame = try! reader.nextFrame() {
            let box = Rect(minX: 100, minY: 50, maxX: 300, maxY: 400)
            detections = [Detection(classIndex: 0, label: "person", score: 0.8, box: box,
                                    normalizedBox: Rect(minX: 100 / 640, minY: 50 / 480, maxX: 300 / 640, maxY: 400 / 480))]
            try! session.consume(DetectedFrame(frame: frame, detections: detections, inferenceMilliseconds: 0))
        }
        try! session.finish()
        return directory
    }()

    static func configuration(token: String? = nil, album: URL = album) -> ServerConfiguration {
        var configuration = ServerConfiguration(album: album, modelPath: Fixtures.detectModel.path, token: token)
        configuration.detector.threadCount = 1
        configuration.maxUploadBytes = 2 << 20
        // Sources in the tests read the shared videos.
        configuration.mediaFolders = [Fixtures.shared.appendingPathComponent("videos")]
        return configuration
    }

    static func application(token: String? = nil, album: URL = album) throws -> some ApplicationProtocol {
        Application(router: try buildRouter(configuration: configuration(token: token, album: album)))
    }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any], "not a JSON object: \(String(buffer: buffer))")
    }

    /// A shared picture to upload: the one whose top detection LiteRT is surest of, with its bytes,
    /// its size, and that detection with its label.
    struct Picture {
        let name: String
        let png: [UInt8]
        let size: Size
        let top: LiteRT.Detection
        let label: String
    }

    static let picture: Picture = {
        guard let (name, size, top) = LiteRT.surest else {
            fatalError("no shared picture with a clear LiteRT detection in fixtures-generated/detect/xnnpack (scripts/make_litert_fixtures.py)")
        }
        let labels = try! Labels.read(path: Fixtures.shared.appendingPathComponent("models/coco-ssd-mobilenet-v1/labelmap.txt").path)
        return Picture(name: name, png: try! Fixtures.bytes(URL(fileURLWithPath: LiteRT.picturePath(name))), size: size, top: top,
                       label: labels.name(top.classIndex))
    }()
}

@Suite struct RouterTests {
    @Test func healthAnswersOK() async throws {
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/health", method: .get) { response in
                #expect(response.status == .ok)
                let body = try ServerFixtures.json(response.body)
                #expect(body["status"] as? String == "ok")
            }
        }
    }

    @Test func albumListsTheClipNewestFirstWithURLs() async throws {
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/api/v1/album", method: .get) { response in
                #expect(response.status == .ok)
                let body = try ServerFixtures.json(response.body)
                let clips = try #require(body["clips"] as? [[String: Any]])
                #expect(clips.count == 1)
                let clip = try #require(clips.first)
                #expect(clip["source"] as? String == "/videos/asl-walk.mkv")
                #expect(clip["labels"] as? [String] == ["person"])
                #expect((clip["frames"] as? Int ?? 0) > 0)
                // Absolute URLs, on the host the request named.
                #expect((clip["url"] as? String ?? "").hasPrefix("http://localhost/media/clips/"))
                #expect((clip["thumbnail_url"] as? String ?? "").hasPrefix("http://localhost/media/thumbnails/"))
                #expect(body["next"] is NSNull)
            }
            try await client.execute(uri: "/api/v1/album?label=car", method: .get) { response in
                let body = try ServerFixtures.json(response.body)
                #expect((body["clips"] as? [Any])?.isEmpty == true)
            }
            try await client.execute(uri: "/api/v1/album?limit=0", method: .get) { response in
                #expect(response.status == .badRequest)
                let error = try #require(try ServerFixtures.json(response.body)["error"] as? [String: Any])
                #expect(error["status"] as? Int == 400)
            }
        }
    }

    static func clipURL(_ client: some TestClientProtocol) async throws -> String {
        try await client.execute(uri: "/api/v1/album", method: .get) { response in
            let clips = try #require(try ServerFixtures.json(response.body)["clips"] as? [[String: Any]])
            // The path on this server (URLs in answers are absolute).
            return try #require(clips.first?["url"] as? String).replacingOccurrences(of: "http://localhost", with: "")
        }
    }

    @Test func clipIsServedWithByteRangesAsSafariAsksForThem() async throws {
        let file = try FileManager.default.contentsOfDirectory(atPath: ServerFixtures.album.appendingPathComponent("clips").path).first { $0.hasSuffix(".mp4") }
        let bytes = try Fixtures.bytes(ServerFixtures.album.appendingPathComponent("clips/\(try #require(file))"))
        let size = bytes.count
        try await ServerFixtures.application().test(.router) { client in
            let url = try await Self.clipURL(client)
            try await client.execute(uri: url, method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.acceptRanges] == "bytes")
                #expect(response.headers[.contentType] == "video/mp4")
                #expect(Array(buffer: response.body) == bytes)
            }
            // Safari's first probe.
            try await client.execute(uri: url, method: .get, headers: [.range: "bytes=0-1"]) { response in
                #expect(response.status == .partialContent)
                #expect(response.headers[.contentRange] == "bytes 0-1/\(size)")
                #expect(Array(buffer: response.body) == Array(bytes[0...1]))
            }
            try await client.execute(uri: url, method: .get, headers: [.range: "bytes=100-"]) { response in
                #expect(response.status == .partialContent)
                #expect(response.headers[.contentRange] == "bytes 100-\(size - 1)/\(size)")
                #expect(Array(buffer: response.body) == Array(bytes[100...]))
            }
            // Suffix range: the last 500 bytes.
            try await client.execute(uri: url, method: .get, headers: [.range: "bytes=-500"]) { response in
                #expect(response.status == .partialContent)
                #expect(response.headers[.contentRange] == "bytes \(size - 500)-\(size - 1)/\(size)")
                #expect(Array(buffer: response.body) == Array(bytes[(size - 500)...]))
            }
            // An end past the file is clamped; a start past it is 416 with the size.
            try await client.execute(uri: url, method: .get, headers: [.range: "bytes=\(size - 10)-\(size + 1000)"]) { response in
                #expect(response.status == .partialContent)
                #expect(response.headers[.contentRange] == "bytes \(size - 10)-\(size - 1)/\(size)")
            }
            try await client.execute(uri: url, method: .get, headers: [.range: "bytes=\(size)-"]) { response in
                #expect(response.status == .rangeNotSatisfiable)
                #expect(response.headers[.contentRange] == "bytes */\(size)")
            }
            try await client.execute(uri: url, method: .get, headers: [.range: "bytes=-0"]) { response in
                #expect(response.status == .rangeNotSatisfiable)
            }
            try await client.execute(uri: url, method: .head) { response in
                #expect(response.status == .ok && response.headers[.contentLength] == String(size))
            }
        }
    }

    @Test(arguments: ["/media/clips/..%2Findex.sqlite", "/media/clips/.hidden", "/media/thumbnails/..%2F..%2Fetc%2Fpasswd",
                      "/media/clips/%2Fetc%2Fpasswd", "/media/clips/a%00b.mp4"])
    func pathsOutsideTheAlbumAreRefused(uri: String) async throws {
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: uri, method: .get) { response in
                #expect(response.status == .badRequest || response.status == .notFound, "\(uri): \(response.status)")
                #expect(!String(buffer: response.body).contains("root:"))
            }
        }
    }

    @Test func missingClipIs404() async throws {
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/media/clips/nothing.mp4", method: .get) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/api/v1/album/999999", method: .get) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/api/v1/album/999999", method: .delete) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/api/v1/nowhere", method: .get) { #expect($0.status == .notFound) }
        }
    }

    @Test func deletingAClipRemovesFileThumbnailAndRow() async throws {
        // A copy of the album, so the other tests keep their clip.
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-server-delete-\(UUID().uuidString.prefix(8))")
        try FileManager.default.copyItem(at: ServerFixtures.album, to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let before = try FileManager.default.contentsOfDirectory(atPath: copy.appendingPathComponent("thumbnails").path)
        #expect(before.count == 2, "thumbnail and snapshot: \(before)")
        try await ServerFixtures.application(album: copy).test(.router) { client in
            let id = try await client.execute(uri: "/api/v1/album", method: .get) { response in
                try #require((try ServerFixtures.json(response.body)["clips"] as? [[String: Any]])?.first?["id"] as? Int)
            }
            try await client.execute(uri: "/api/v1/album/\(id)", method: .delete) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/api/v1/album/\(id)", method: .get) { #expect($0.status == .notFound) }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: copy.appendingPathComponent("clips").path).filter { $0.hasSuffix(".mp4") }.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: copy.appendingPathComponent("thumbnails").path).isEmpty)
        let rows = try run("sqlite3", [copy.appendingPathComponent("index.sqlite").path, "select count(*) from clips"])
        #expect(rows.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }

    @Test func detectEndpointAnswersAsTheCommandLineDoes() async throws {
        let picture = ServerFixtures.picture
        let cli = try Fixtures.runSpotter(["detect", LiteRT.picturePath(picture.name), "--json",
                                           "--model", Fixtures.detectModel.path, "--threads", "1"])
        let expected = try #require(try JSONSerialization.jsonObject(with: Data(cli.output.utf8)) as? [String: Any])
        let want = try #require(expected["detections"] as? [[String: Any]])
        let wantLabels = want.map { $0["label"] as? String ?? "" }, wantScores = want.map { $0["score"] as? Double ?? -1 }
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/api/v1/detect", method: .post, headers: [.contentType: "image/png"],
                                     body: ByteBuffer(bytes: ServerFixtures.picture.png)) { response in
                #expect(response.status == .ok)
                let body = try ServerFixtures.json(response.body)
                #expect(body["width"] as? Int == picture.size.width && body["height"] as? Int == picture.size.height)
                let got = try #require(body["detections"] as? [[String: Any]])
                #expect(got.map { $0["label"] as? String ?? "" } == wantLabels)
                #expect(zip(got.map { $0["score"] as? Double ?? 0 }, wantScores).allSatisfy { abs($0 - $1) < 1e-6 })
            }
            let only = picture.label.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            try await client.execute(uri: "/api/v1/detect?classes=\(only)", method: .post, body: ByteBuffer(bytes: picture.png)) { response in
                let got = try #require(try ServerFixtures.json(response.body)["detections"] as? [[String: Any]])
                #expect(got.map { $0["label"] as? String } == wantLabels.filter { $0 == picture.label })
            }
        }
    }

    @Test func deepStackEndpointTakesAMultipartImage() async throws {
        let boundary = "spotterBoundary42"
        var body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"image\"; filename=\"\(ServerFixtures.picture.name).png\"\r\nContent-Type: image/png\r\n\r\n".utf8)
        body += ServerFixtures.picture.png
        body += Array("\r\n--\(boundary)--\r\n".utf8)
        let upload = body
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/v1/vision/detection?min_confidence=0.5", method: .post,
                                     headers: [.contentType: "multipart/form-data; boundary=\(boundary)"], body: ByteBuffer(bytes: upload)) { response in
                #expect(response.status == .ok)
                let answer = try ServerFixtures.json(response.body)
                #expect(answer["success"] as? Bool == true)
                let predictions = try #require(answer["predictions"] as? [[String: Any]])
                // LiteRT's top detection on the picture, in whole pixels.
                let top = ServerFixtures.picture.top
                let found = try #require(predictions.first { $0["label"] as? String == ServerFixtures.picture.label }, "\(predictions)")
                #expect(abs((found["confidence"] as? Double ?? 0) - Double(top.score)) < 0.03)
                #expect(abs(Double(found["x_min"] as? Int ?? 0) - top.box.minX) <= 3 && abs(Double(found["x_max"] as? Int ?? 0) - top.box.maxX) <= 3,
                        "\(found), LiteRT \(top)")
                #expect(abs(Double(found["y_min"] as? Int ?? 0) - top.box.minY) <= 3 && abs(Double(found["y_max"] as? Int ?? 0) - top.box.maxY) <= 3,
                        "\(found), LiteRT \(top)")
            }
        }
    }

    @Test func badUploadsGetPreciseErrors() async throws {
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/api/v1/detect", method: .post, body: ByteBuffer(string: "<html>not a picture</html>")) {
                #expect($0.status == .unsupportedMediaType)
            }
            try await client.execute(uri: "/api/v1/detect", method: .post) { #expect($0.status == .badRequest) }
            try await client.execute(uri: "/api/v1/detect?threshold=2", method: .post, body: ByteBuffer(bytes: ServerFixtures.picture.png)) {
                #expect($0.status == .badRequest)
            }
            // A PNG signature with nothing after it.
            try await client.execute(uri: "/api/v1/detect", method: .post, body: ByteBuffer(bytes: ServerFixtures.picture.png.prefix(40))) {
                #expect($0.status == .unprocessableContent)
            }
            // Larger than the configured 2 MiB.
            let large = ServerFixtures.picture.png + [UInt8](repeating: 0, count: 3 << 20)
            try await client.execute(uri: "/api/v1/detect", method: .post, body: ByteBuffer(bytes: large)) {
                #expect($0.status == .contentTooLarge)
            }
            try await client.execute(uri: "/v1/vision/detection", method: .post,
                                     headers: [.contentType: "multipart/form-data; boundary=x"], body: ByteBuffer(string: "--x\r\n\r\n--x--")) {
                #expect($0.status == .badRequest)
            }
        }
    }

    @Test func tokenIsRequiredEverywhereButHealthWhenConfigured() async throws {
        try await ServerFixtures.application(token: "s3cret-token-42").test(.router) { client in
            try await client.execute(uri: "/health", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/api/v1/album", method: .get) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
            }
            try await client.execute(uri: "/api/v1/album", method: .get, headers: [.authorization: "Bearer wrong"]) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/api/v1/album", method: .get, headers: [.authorization: "Bearer s3cret-token-42"]) { #expect($0.status == .ok) }
            try await client.execute(uri: "/album", method: .get) { response in
                #expect(response.status == .seeOther && response.headers[.location] == "/login?next=%2Falbum")
            }
            let cookie = try await client.execute(uri: "/login", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                                  body: ByteBuffer(string: "token=s3cret-token-42")) { response in
                #expect(response.status == .seeOther)
                return try #require(response.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            }
            try await client.execute(uri: "/album", method: .get, headers: [.cookie: cookie]) { #expect($0.status == .ok) }
            try await client.execute(uri: "/login", method: .post, body: ByteBuffer(string: "token=nope")) { #expect($0.status == .unauthorized) }
        }
    }

    @Test func nonLoopbackAddressWithoutATokenIsRefused() throws {
        var configuration = ServerFixtures.configuration()
        configuration.host = "0.0.0.0"
        #expect(throws: ServerError.tokenRequired(host: "0.0.0.0")) { try configuration.validate() }
        configuration.token = "fifteen-letters"
        #expect(throws: ServerError.tokenTooShort(length: 15, minimum: 16)) { try configuration.validate() }
        configuration.token = "sixteen-letters!"
        try configuration.validate()
        configuration.host = "127.0.0.1"
        configuration.token = "a"
        #expect(throws: ServerError.tokenTooShort(length: 1, minimum: 12)) { try configuration.validate() }
    }

    /// Every operation of the OpenAPI document answers with one of its documented statuses.
    @Test func everyDocumentedOperationAnswersWithADocumentedStatus() async throws {
        try await ServerFixtures.application().test(.router) { client in
            let document = try await client.execute(uri: "/api/v1/openapi.json", method: .get) { try ServerFixtures.json($0.body) }
            #expect(document["openapi"] as? String == "3.1.0")
            let paths = try #require(document["paths"] as? [String: [String: [String: Any]]])
            let clipName = try await Self.clipURL(client).split(separator: "/").last.map(String.init) ?? ""
            var checked = 0
            for (path, operations) in paths {
                let uri = path.replacingOccurrences(of: "{id}", with: "999999").replacingOccurrences(of: "{name}", with: clipName)
                    .replacingOccurrences(of: "{track}", with: "1")
                for (method, operation) in operations {
                    let responses = operation["responses"] as? [String: Any] ?? [:]
                    // An endless stream never completes a router test's response; check_server.py reads them.
                    let content = ((responses["200"] as? [String: Any])?["content"] as? [String: Any]) ?? [:]
                    if content["text/event-stream"] != nil || content["application/vnd.spotter.live"] != nil { continue }
                    let statuses = Set(responses.keys)
                    let httpMethod: HTTPRequest.Method = method == "post" ? .post : method == "delete" ? .delete : method == "head" ? .head
                        : method == "patch" ? .patch : .get
                    let body = httpMethod == .post || httpMethod == .patch ? ByteBuffer(bytes: ServerFixtures.picture.png) : nil
                    try await client.execute(uri: uri, method: httpMethod, body: body) { response in
                        #expect(statuses.contains(String(response.status.code)), "\(method) \(uri): \(response.status.code) not in \(statuses)")
                    }
                    checked += 1
                }
            }
            #expect(checked >= 19)
        }
    }

    @Test func metricsAreInPrometheusFormat() async throws {
        try await ServerFixtures.application().test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(text.contains("# TYPE spotter_process_resident_bytes gauge"))
                #expect(text.contains("spotter_album_clips 1"))
            }
        }
    }
}
