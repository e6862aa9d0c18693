import Foundation
import Hummingbird
import HummingbirdTesting
import Server
import Synchronization
import Testing
import TestSupport

@Suite struct WebhookTests {
    /// The bodies a receiver on 127.0.0.1 was sent.
    final class Received: Sendable {
        let bodies = Mutex<[Data]>([])

        /// Stores `body`; returns how many have arrived.
        func append(_ body: Data) -> Int {
            bodies.withLock {
                $0.append(body)
                return $0.count
            }
        }
    }

    /// A clip recorded by a source reaches a real HTTP receiver on 127.0.0.1 as the JSON of its
    /// `clip_finished` event, with the album's row; the receiver's first answer (503) is retried;
    /// a URL nothing listens on is given up after its attempts and counted as failed, without
    /// delaying the other.
    @Test func finishedClipsArePostedToWebhooksAndRetried() async throws {
        let album = try SourcesTests.emptyAlbum()
        defer { try? FileManager.default.removeItem(at: album) }
        let received = Received()
        let receiver = Router()
        receiver.post("/hook") { request, _ -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 1 << 20)
            return received.append(Data(buffer: body)) == 1 ? .serviceUnavailable : .ok
        }
        try await Application(router: receiver).test(.live) { receiverClient in
            let port = try #require(receiverClient.port)
            var configuration = ServerFixtures.configuration(album: album)
            configuration.webhooks = WebhookOptions(urls: [URL(string: "http://127.0.0.1:\(port)/hook")!, URL(string: "http://127.0.0.1:9/nothing")!])
            configuration.webhooks.attempts = 3
            configuration.webhooks.events = ["clip_finished"]
            configuration.webhooks.firstRetryDelay = .milliseconds(200)
            configuration.sources = [SourceSpec(input: SourcesTests.walk, record: true)]
            try await buildApplication(configuration: configuration).test(.router) { client in
                var metrics = ""
                for _ in 0..<600 {
                    metrics = try await client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
                    if metrics.contains("{result=\"delivered\"} 1") && metrics.contains("{result=\"failed\"} 1") { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(metrics.contains("spotter_webhook_deliveries_total{result=\"delivered\"} 1"), "\(metrics)")
                #expect(metrics.contains("spotter_webhook_deliveries_total{result=\"failed\"} 1"), "\(metrics)")
                let clips = try await client.execute(uri: "/api/v1/album", method: .get) { response in
                    try #require(try ServerFixtures.json(response.body)["clips"] as? [[String: Any]])
                }
                let bodies = received.bodies.withLock { $0 }
                try #require(bodies.count == 2 && clips.count == 1, "\(bodies.count) posts, \(clips.count) clips")
                #expect(bodies[0] == bodies[1], "a retry sends the same event")
                let event = try #require(try JSONSerialization.jsonObject(with: bodies[1]) as? [String: Any])
                let clip = try #require(event["clip"] as? [String: Any])
                #expect(event["type"] as? String == "clip_finished")
                #expect(clip["id"] as? Int == clips[0]["id"] as? Int && clip["frames"] as? Int == clips[0]["frames"] as? Int, "\(clip) vs \(clips[0])")
                // Absolute, so a receiver can fetch the clip: the server's own address (no --public-url here).
                let path = (clips[0]["url"] as? String ?? "").replacingOccurrences(of: "http://localhost", with: "")
                #expect(path.hasPrefix("/media/clips/") && clip["url"] as? String == "http://127.0.0.1:8080" + path, "\(clip)")
            }
        }
    }

    /// A webhook that is not an http(s) URL stops the server before it starts, with a message
    /// naming it; so does an event type webhooks never get.
    @Test func aWebhookThatIsNotHTTPIsRefused() async throws {
        var configuration = ServerFixtures.configuration()
        configuration.webhooks.urls = [URL(string: "file:///etc/passwd")!]
        #expect(throws: ServerError.badWebhook(.badURL("file:///etc/passwd"))) { try configuration.validate() }
        var options = WebhookOptions(urls: [URL(string: "http://127.0.0.1:9/hook")!])
        options.events = ["clip_finished", "clip_finishd"]
        #expect(throws: WebhookError.badEvent("clip_finishd")) { try options.validate() }
    }
}
