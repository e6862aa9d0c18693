import Foundation
import Hummingbird
import HummingbirdTesting
import Server
import Synchronization
import Testing
import TestSupport

/// Who may add a source and what it may open; which requests count as this server's own.
@Suite struct AccessTests {
    static let videos = Fixtures.shared.appendingPathComponent("videos")
    static let walk = videos.appendingPathComponent("asl-walk.mkv").path

    /// A private file, by any spelling, is refused for API sources; a file in an allowed folder and
    /// the network schemes pass, each with its reader whitelists.
    @Test func sourcePolicyAllowsNetworkSchemesCamerasAndFilesInItsFolders() throws {
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-policy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        let allowed = outside.appendingPathComponent("allowed")
        try FileManager.default.createDirectory(at: allowed, withIntermediateDirectories: true)
        let secret = outside.appendingPathComponent("secret.mkv").path
        try FileManager.default.copyItem(atPath: Self.walk, toPath: secret)
        try FileManager.default.copyItem(atPath: Self.walk, toPath: allowed.appendingPathComponent("ok.mkv").path)
        try FileManager.default.createSymbolicLink(atPath: allowed.appendingPathComponent("out.mkv").path, withDestinationPath: secret)
        let policy = SourcePolicy(folders: [allowed])

        for input in [secret, allowed.appendingPathComponent("out.mkv").path, allowed.path + "/../secret.mkv", "file:" + secret,
                      "file://" + secret, "concat:\(secret)|\(secret)", "subfile:,start,0,end,0,,:" + secret, "pipe:0", "data:,x",
                      "crypto:" + secret, "hls+file:" + secret, "ftp://host/x", "rtsp:no-host", "", "rtsp://cam/\u{0}"] {
            #expect(throws: SourcePolicy.Refusal.self, "\(input)") { try policy.check(input, origin: .api) }
        }
        let file = try policy.check(allowed.appendingPathComponent("ok.mkv").path, origin: .api)
        #expect(file.allowedProtocols == "file" && file.allowedFormats == SourcePolicy.fileFormats)
        // The operator's config file may name files anywhere, through the file protocol only.
        let configured = try policy.check(secret, origin: .config)
        #expect(configured.input == SourcePolicy.realPath(secret) && configured.allowedProtocols == "file")
        #expect(throws: SourcePolicy.Refusal.self) { try policy.check("concat:\(secret)|\(secret)", origin: .config) }

        for input in ["rtsp://cam.local:554/live", "rtsps://cam/live", "http://cam/stream.m3u8", "https://cam/x.mp4", "tcp://127.0.0.1:9000",
                      "udp://239.0.0.1:1234", "srt://host:9000", "rtmp://host/app"] {
            let resolved = try policy.check(input, origin: .api)
            #expect(resolved.input == input)
            #expect(!(resolved.allowedProtocols ?? "file").split(separator: ",").contains("file"), "\(input): \(resolved)")
        }
        #expect(try policy.check("/dev/video0", origin: .api).input == "/dev/video0")
    }

    @Test func passwordsInURLsAreRedacted() {
        #expect(SourcePolicy.redacted("rtsp://admin:hunter2@cam.local:554/live") == "rtsp://admin:***@cam.local:554/live")
        #expect(SourcePolicy.redacted("rtsp://cam.local/live?user=a") == "rtsp://cam.local/live?user=a")
        #expect(SourcePolicy.redacted("/videos/a@b:c.mp4") == "/videos/a@b:c.mp4")
    }

    /// Cross-site requests through the router: a foreign Origin or Referer is refused for changes,
    /// a JSON body must say so, and no CORS header is sent.
    @Test func crossSiteRequestsAreRefusedAndTheServersOwnAreNot() async throws {
        let body = ByteBuffer(string: "{\"input\": \"rtsp://127.0.0.1:9/cam\", \"record\": false}")
        try await ServerFixtures.application().test(.router) { client in
            let cases: [(String, String?, String?, HTTPResponse.Status)] = [
                ("text/plain", "http://evil.example", nil, .forbidden),
                ("application/json", "http://evil.example", nil, .forbidden),
                ("application/json", nil, "http://evil.example/page", .forbidden),
                ("text/plain", nil, nil, .unsupportedMediaType),
                ("application/x-www-form-urlencoded", nil, nil, .unsupportedMediaType),
                // The router tests' requests name the host "localhost" (port 80).
                ("application/json", "http://localhost", nil, .created),
                ("application/json", "http://localhost:8080", nil, .forbidden),
                ("application/json; charset=utf-8", nil, nil, .created),
            ]
            for (type, origin, referer, expected) in cases {
                var headers: HTTPFields = [.contentType: type]
                if let origin { headers[.origin] = origin }
                if let referer { headers[.referer] = referer }
                try await client.execute(uri: "/api/v1/sources", method: .post, headers: headers, body: body) { response in
                    #expect(response.status == expected, "\(headers)")
                    #expect(!response.headers.contains { $0.name.rawName.lowercased().hasPrefix("access-control") })
                }
            }
        }
        // A foreign Host is refused with 421: scripts/check_security.py sends one to a real server
        // (the router tests name every request's host "localhost").
    }

    @Test func sameOriginIsSchemeHostAndPort() {
        let hosts = HostNames(bind: "127.0.0.1", allowed: ["cams.lan"], publicURL: URL(string: "https://cams.example.com"))
        #expect(hosts.isSameOrigin("http://localhost:8080", host: "localhost:8080"))
        #expect(hosts.isSameOrigin("http://cams.lan:8080", host: "cams.lan:8080"))
        #expect(!hosts.isSameOrigin("http://localhost:8081", host: "localhost:8080"))
        #expect(!hosts.isSameOrigin("http://evil.example:8080", host: "evil.example:8080"), "a host the server does not answer to")
        #expect(!hosts.isSameOrigin("null", host: "localhost:8080"))
        #expect(hosts.isSameOrigin("https://cams.example.com", host: "127.0.0.1:8080"), "behind a reverse proxy, the public URL's origin")
        #expect(hosts.allows(host: "CAMS.LAN:80") && hosts.allows(host: "cams.example.com") && !hosts.allows(host: "cams.lan.evil"))
    }

    @Test func tokensCompareWholly() {
        #expect(constantTimeEquals("correct-horse", "correct-horse"))
        #expect(!constantTimeEquals("correct-horse", "correct-hors"))
        #expect(!constantTimeEquals("correct-horse", "correct-horsf"))
        #expect(!constantTimeEquals("", "x"))
    }

    /// The limiter's rule on a clock of the test's own: ten failures from one address within a
    /// minute, then a wait until the oldest of them is a minute old; other addresses unaffected.
    @Test func theLoginLimiterCountsFailuresPerAddressOverAMinute() {
        let time = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let limiter = LoginLimiter(clock: { time.withLock { $0 } })
        for _ in 0..<(LoginLimiter.maxFailures - 1) { limiter.recordFailure("10.0.0.1") }
        #expect(limiter.wait(for: "10.0.0.1") == nil)
        limiter.recordFailure("10.0.0.1")
        #expect(limiter.wait(for: "10.0.0.1") == 60)
        #expect(limiter.wait(for: "10.0.0.2") == nil)
        time.withLock { $0 += 30 }
        #expect(limiter.wait(for: "10.0.0.1") == 30)
        time.withLock { $0 += 30.5 }
        #expect(limiter.wait(for: "10.0.0.1") == nil)
    }

    /// Ten wrong tokens from one address in a minute, then 429 with Retry-After, for the login form
    /// and for bearer tokens alike. (On a machine so busy that the ten take most of a minute the
    /// first have aged out of the window; the rule itself is checked on a clock of its own above.)
    @Test func wrongTokensAreRateLimited() async throws {
        try await ServerFixtures.application(token: "s3cret-token-42").test(.router) { client in
            let began = Date()
            for attempt in 0..<10 {
                try await client.execute(uri: "/login", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                                         body: ByteBuffer(string: "token=guess\(attempt)")) { #expect($0.status == .unauthorized) }
            }
            guard Date().timeIntervalSince(began) < LoginLimiter.window / 2 else { return }
            try await client.execute(uri: "/login", method: .post, body: ByteBuffer(string: "token=s3cret-token-42")) { response in
                #expect(response.status == .tooManyRequests)
                #expect(Int(response.headers[.retryAfter] ?? "") ?? 0 > 0)
            }
            try await client.execute(uri: "/api/v1/album", method: .get, headers: [.authorization: "Bearer s3cret-token-42"]) {
                #expect($0.status == .tooManyRequests)
            }
        }
    }
}
