import Detection
import Foundation
import Hummingbird
import HummingbirdTesting
import Media
import Pipeline
import Server
import Testing
import TestSupport

@Suite struct SourcesTests {
    static let walk = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path

    static func emptyAlbum() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-sources-\(UUID().uuidString.prefix(8))")
        _ = try Album(directory: url)
        return url
    }

    static func body(_ object: [String: Any]) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: object))
    }

    /// A file source is a job: it runs to the end of the video with every frame detected (as many as
    /// ffprobe counts), records the person into the album, serves its last frame as JPEG, and stays
    /// listed as finished until removed.
    @Test func aFileSourceDetectsEveryFrameRecordsItsClipAndFinishes() async throws {
        let album = try Self.emptyAlbum()
        defer { try? FileManager.default.removeItem(at: album) }
        try await ServerFixtures.application(album: album).test(.router) { client in
            let id = try await client.execute(uri: "/api/v1/sources", method: .post, headers: [.contentType: "application/json"],
                                              body: try Self.body(["input": Self.walk, "record": true])) { response in
                #expect(response.status == .created)
                let body = try ServerFixtures.json(response.body)
                #expect(response.headers[.location] == "/api/v1/sources/\(body["id"] as? String ?? "")")
                return try #require(body["id"] as? String)
            }
            var status: [String: Any] = [:]
            for _ in 0..<600 {
                status = try await client.execute(uri: "/api/v1/sources/\(id)", method: .get) { try ServerFixtures.json($0.body) }
                if ["finished", "failed"].contains(status["state"] as? String ?? "") { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let probe = try run("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames",
                                            "-of", "csv=p=0", Self.walk])
            #expect(status["state"] as? String == "finished", "\(status)")
            #expect(status["processed"] as? Int == Int(probe.trimmingCharacters(in: .whitespacesAndNewlines)), "\(status)")
            #expect(status["kind"] as? String == "file" && status["percent"] as? Double == 100, "\(status)")
            try await client.execute(uri: "/api/v1/sources/\(id)/snapshot.jpg", method: .get) { response in
                #expect(response.status == .ok && response.headers[.contentType] == "image/jpeg")
                let picture = try ImageFile.decode(bytes: Array(buffer: response.body), name: "snapshot").upright
                #expect(picture.width == 640 && picture.height == 480)
            }
            try await client.execute(uri: "/api/v1/album?source=" + Self.walk, method: .get) { response in
                let clips = try #require(try ServerFixtures.json(response.body)["clips"] as? [[String: Any]])
                #expect(clips.count == 1 && (clips.first?["labels"] as? [String]) == ["person"], "\(clips)")
            }
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(text.contains("spotter_source_frames_total{source=\"\(id)\"} \(status["processed"] as? Int ?? -1)"), "\(text)")
            }
            try await client.execute(uri: "/api/v1/sources/\(id)", method: .delete) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/api/v1/sources", method: .get) { response in
                let sources = try ServerFixtures.json(response.body)["sources"] as? [Any]
                #expect(sources?.isEmpty == true)
            }
        }
    }

    /// `"trigger": "unknown-face"`: with a face namer that calls everyone a stranger the person
    /// video records its clip; with one that knows everyone it records nothing (the detections are
    /// the shared model's; only the names come from the double); without `--faces` the request is
    /// refused.
    @Test(arguments: [true, false])
    func unknownFaceTriggerRecordsOnlyWhileAStrangerIsInView(strangers: Bool) async throws {
        let album = try Self.emptyAlbum()
        defer { try? FileManager.default.removeItem(at: album) }
        var configuration = ServerFixtures.configuration(album: album)
        configuration.refine = { detections, _ in
            detections.map { detection in
                var named = detection
                named.identity = Detection.Identity(name: strangers ? nil : "Grace", distance: strangers ? 1.3 : 0.4)
                return named
            }
        }
        try await Application(router: try buildRouter(configuration: configuration)).test(.router) { client in
            let id = try await client.execute(uri: "/api/v1/sources", method: .post, headers: [.contentType: "application/json"],
                                              body: try Self.body(["input": Self.walk, "trigger": "unknown-face"])) { response in
                #expect(response.status == .created)
                return try #require(try ServerFixtures.json(response.body)["id"] as? String)
            }
            var status: [String: Any] = [:]
            for _ in 0..<600 {
                status = try await client.execute(uri: "/api/v1/sources/\(id)", method: .get) { try ServerFixtures.json($0.body) }
                if ["finished", "failed"].contains(status["state"] as? String ?? "") { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(status["state"] as? String == "finished" && (status["processed"] as? Int ?? 0) > 0, "\(status)")
            try await client.execute(uri: "/api/v1/album", method: .get) { response in
                let clips = try #require(try ServerFixtures.json(response.body)["clips"] as? [[String: Any]])
                #expect(clips.count == (strangers ? 1 : 0), "\(clips)")
            }
        }
        try await ServerFixtures.application(album: album).test(.router) { client in
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: [.contentType: "application/json"],
                                     body: try Self.body(["input": Self.walk, "trigger": "unknown-face"])) { response in
                #expect(response.status == .badRequest && String(buffer: response.body).contains("needs spotter serve --faces"))
            }
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: [.contentType: "application/json"],
                                     body: try Self.body(["input": Self.walk, "trigger": "faces"])) { response in
                #expect(response.status == .badRequest && String(buffer: response.body).contains("trigger must be detection or unknown-face"))
            }
        }
    }

    @Test func badSourceRequestsGetClearErrors() async throws {
        let album = try Self.emptyAlbum()
        defer { try? FileManager.default.removeItem(at: album) }
        try await ServerFixtures.application(album: album).test(.router) { client in
            let json: HTTPFields = [.contentType: "application/json"]
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: json, body: ByteBuffer(string: "{not json")) { response in
                #expect(response.status == .badRequest)
                let error = try #require(try ServerFixtures.json(response.body)["error"] as? [String: Any])
                #expect((error["message"] as? String ?? "").contains("input"))
            }
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: json, body: try Self.body(["record": true])) {
                #expect($0.status == .badRequest)
            }
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: json,
                                     body: try Self.body(["input": Self.walk, "threshold": 2])) { #expect($0.status == .badRequest) }
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: json,
                                     body: ByteBuffer(string: "{\"input\": \"" + String(repeating: "a", count: 70_000) + "\"}")) {
                #expect($0.status == .contentTooLarge)
            }
            for (uri, method) in [("/api/v1/sources/s99", HTTPRequest.Method.get), ("/api/v1/sources/s99", .delete),
                                  ("/api/v1/sources/s99/snapshot.jpg", .get)] {
                try await client.execute(uri: uri, method: method) { #expect($0.status == .notFound, "\(uri)") }
            }
            // A file that does not exist is refused at once, naming it.
            try await client.execute(uri: "/api/v1/sources", method: .post, headers: json,
                                     body: try Self.body(["input": "/nonexistent/cam.mp4"])) { response in
                let error = try ServerFixtures.json(response.body)["error"] as? [String: Any]
                #expect(response.status == .badRequest && error?["message"] as? String == "input /nonexistent/cam.mp4: no such file")
            }
            // A stream that cannot be opened yet is waited for, with the reader's reason and the next attempt.
            let id = try await client.execute(uri: "/api/v1/sources", method: .post, headers: json,
                                              body: try Self.body(["input": "tcp://127.0.0.1:9/cam"])) { response in
                try #require(try ServerFixtures.json(response.body)["id"] as? String)
            }
            var status: [String: Any] = [:]
            for _ in 0..<100 {
                status = try await client.execute(uri: "/api/v1/sources/\(id)", method: .get) { try ServerFixtures.json($0.body) }
                if status["state"] as? String == "waiting" { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let message = status["message"] as? String ?? ""
            #expect(status["state"] as? String == "waiting" && message.contains("tcp://127.0.0.1:9/cam") && message.contains("next attempt in"),
                    "\(status)")
            try await client.execute(uri: "/api/v1/sources/\(id)/frames/abc.jpg", method: .get) { #expect($0.status == .badRequest) }
            try await client.execute(uri: "/api/v1/sources/\(id)/frames/5.jpg", method: .get) { #expect($0.status == .notFound) }
            try await client.execute(uri: "/api/v1/sources/\(id)", method: .delete) { #expect($0.status == .noContent) }
        }
    }
}

/// A catalog of one sample whose pull reports three steps and then "caches" the shared video.
final class SampleDouble: SampleLibrary, @unchecked Sendable {
    // `cached` is guarded by `lock`.
    private let lock = NSLock()
    private var cached: String?
    let video = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path

    func samples() -> [SampleVideo] {
        [SampleVideo(name: "walk", summary: "a person signing", license: "CC-BY-4.0", size: 300, cachedPath: lock.withLock { cached })]
    }

    func pull(_ name: String, progress: @escaping (SampleProgress) -> Void) throws -> String {
        for received in [100, 200, 300] {
            progress(SampleProgress(received: received, total: 300, bytesPerSecond: 1000))
            Thread.sleep(forTimeInterval: 0.05)
        }
        lock.withLock { cached = video }
        return video
    }
}

@Suite struct SamplesTests {
    @Test func aSampleIsPulledInTheBackgroundAndThenListedAsCached() async throws {
        var configuration = ServerFixtures.configuration()
        configuration.samples = SampleDouble()
        try await Application(router: try buildRouter(configuration: configuration)).test(.router) { client in
            try await client.execute(uri: "/api/v1/samples", method: .get) { response in
                let samples = try #require(try ServerFixtures.json(response.body)["samples"] as? [[String: Any]])
                #expect(samples.count == 1 && samples[0]["cached"] as? Bool == false && samples[0]["size"] as? Int == 300, "\(samples)")
            }
            try await client.execute(uri: "/api/v1/samples/walk/pull", method: .post) { #expect($0.status == .accepted) }
            try await client.execute(uri: "/api/v1/samples/nothing/pull", method: .post) { #expect($0.status == .notFound) }
            var cached = false
            for _ in 0..<100 where !cached {
                try await Task.sleep(for: .milliseconds(50))
                cached = try await client.execute(uri: "/api/v1/samples", method: .get) { response in
                    let samples = try ServerFixtures.json(response.body)["samples"] as? [[String: Any]]
                    return samples?.first?["cached"] as? Bool == true
                }
            }
            #expect(cached)
            try await client.execute(uri: "/api/v1/samples/walk/pull", method: .post) { response in
                let state = try ServerFixtures.json(response.body)["state"] as? String
                #expect(response.status == .ok && state == "cached")
            }
        }
    }
}

@Suite struct UploadTests {
    static let walk = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv")

    /// An uploaded video lands byte for byte in the album's uploads folder under a safe name, never
    /// over an earlier upload; pictures and oversized bodies are refused and leave no file behind.
    @Test func uploadedVideosAreKeptSafelyAndBadOnesLeaveNothing() async throws {
        let album = try SourcesTests.emptyAlbum()
        defer { try? FileManager.default.removeItem(at: album) }
        var configuration = ServerFixtures.configuration(album: album)
        let video = try Fixtures.bytes(Self.walk)
        configuration.maxVideoUploadBytes = video.count + 10
        let uploads = album.appendingPathComponent("uploads")
        try await Application(router: try buildRouter(configuration: configuration)).test(.router) { client in
            var paths: [String] = []
            for _ in 0..<2 {
                try await client.execute(uri: "/api/v1/uploads?name=../../etc/my%20walk.mkv", method: .post, body: ByteBuffer(bytes: video)) { response in
                    #expect(response.status == .created)
                    let body = try ServerFixtures.json(response.body)
                    #expect(body["container"] as? String == "mkv" && body["size"] as? Int == video.count)
                    paths.append(body["path"] as? String ?? "")
                }
            }
            #expect(paths == [uploads.appendingPathComponent("my_walk.mkv").path, uploads.appendingPathComponent("my_walk-1.mkv").path])
            for path in paths { #expect(try Fixtures.bytes(URL(fileURLWithPath: path)) == video) }
            try await client.execute(uri: "/api/v1/uploads", method: .post, body: ByteBuffer(bytes: ServerFixtures.picture.png.prefix(4096))) {
                #expect($0.status == .unsupportedMediaType)
            }
            try await client.execute(uri: "/api/v1/uploads", method: .post, body: ByteBuffer(bytes: video + [UInt8](repeating: 0, count: 64))) {
                #expect($0.status == .contentTooLarge)
            }
            try await client.execute(uri: "/api/v1/uploads", method: .post) { #expect($0.status == .badRequest) }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: uploads.path).sorted()
        #expect(left == ["my_walk-1.mkv", "my_walk.mkv"], "refused uploads leave nothing: \(left)")
    }
}
