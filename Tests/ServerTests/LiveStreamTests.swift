import Foundation
import Hummingbird
import HummingbirdTesting
import Media
import ModelStore
import NIOCore
import Server
import Testing
import TestSupport

/// The live stream as another program (or another cluster node's ``LiveRelay``) reads it: over a
/// real connection (libcurl), parsed by ``LiveStreamReader`` however TCP splits it.
@Suite struct LiveStreamTests {
    struct Event: Equatable {
        var type: String
        var source: String
        var json: Data
        var frame: Int?
        var jpeg: [UInt8]?
    }

    static func read(_ bytes: [UInt8], pieces: (Int) -> Int) -> (events: [Event], failure: String?) {
        var events: [Event] = []
        let reader = LiveStreamReader { type, source, json, frame, jpeg in
            events.append(Event(type: type, source: source, json: json, frame: frame, jpeg: jpeg.map { Array($0.readableBytesView) }))
        }
        var start = 0
        var index = 0
        while start < bytes.count {
            let end = min(bytes.count, start + max(1, pieces(index)))
            let going = bytes[start..<end].withUnsafeBytes { reader.feed($0) }
            start = end
            index += 1
            if !going { break }
        }
        return (events, reader.failure?.description)
    }

    /// A server's live stream of a looping video, read for a few frames: each detection's JPEG
    /// decodes (libjpeg) to the size the event states, its JSON no longer has `jpeg_bytes`, and
    /// the same bytes cut into pieces of 1 to 13 bytes give the same events.
    @Test func aServersLiveStreamReadsTheSameInAnyPieces() async throws {
        let album = try SourcesTests.emptyAlbum()
        defer { try? FileManager.default.removeItem(at: album) }
        var configuration = ServerFixtures.configuration(album: album)
        configuration.sources = [SourceSpec(input: SourcesTests.walk, realtime: true, loop: true)]
        try await buildApplication(configuration: configuration).test(.live) { client in
            let port = try #require(client.port)
            let bytes: [UInt8] = try await Self.onItsOwnThread {
                Result {
                    var bytes: [UInt8] = []
                    // Generous: the whole test run shares two cores; it ends after a few frames.
                    let deadline = Date().addingTimeInterval(120)
                    var pictures = 0
                    let counter = LiveStreamReader { _, _, _, _, jpeg in if jpeg != nil { pictures += 1 } }
                    // As generous between bytes: the source's first frames can wait that long
                    // for a core (CI saw 30 s pass after the stream's opening bytes).
                    try HTTPStream.get("http://127.0.0.1:\(port)/api/v1/live?types=detection,source_stats",
                                       options: .init(stallTimeout: 120), keepGoing: { Date() < deadline }) { piece in
                        bytes.append(contentsOf: piece)
                        return counter.feed(piece) && pictures < 5 && bytes.count < 2_000_000
                    }
                    return bytes
                }
            }.get()
            let whole = Self.read(bytes, pieces: { _ in Int.max })
            #expect(whole.failure == nil)
            let frames = whole.events.filter { $0.jpeg != nil }
            try #require(frames.count >= 3, "\(whole.events.count) events in \(bytes.count) bytes")
            for event in frames {
                let object = try #require(try JSONSerialization.jsonObject(with: event.json) as? [String: Any])
                #expect(object["jpeg_bytes"] == nil && object["frame"] as? Int == event.frame && object["type"] as? String == "detection")
                let picture = try ImageFile.decode(bytes: event.jpeg!, name: "frame").stored
                #expect([picture.width, picture.height] == [object["width"] as? Int, object["height"] as? Int])
            }
            // The last event may be cut off by the end of the read: compare what both readings finish.
            var generator = SystemRandomNumberGenerator()
            let sizes = (0..<bytes.count).map { _ in Int.random(in: 1...13, using: &generator) }
            let pieces = Self.read(bytes, pieces: { sizes[$0] })
            #expect(pieces.failure == nil)
            #expect(pieces.events == whole.events)
        }
    }

    @Test func overlongLinesAndPicturesEndTheStream() {
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: LiveStreamReader.maxLine + 2)
        #expect(Self.read(long, pieces: { _ in 4096 }).failure?.contains("longer than") == true)
        let huge = Array("{\"type\":\"detection\",\"source\":\"s1\",\"jpeg_bytes\":\(LiveStreamReader.maxPicture + 1)}\n".utf8)
        #expect(Self.read(huge, pieces: { _ in 7 }).failure?.contains("picture of") == true)
        #expect(Self.read(Array("not json\n".utf8), pieces: { _ in 3 }).failure?.contains("not a JSON object") == true)
        // Hello, keep-alive and events without a source are skipped, not errors.
        let quiet = Self.read(Array("{\"type\":\"hello\"}\n{\"type\":\"ping\"}\n{\"type\":\"clip_started\",\"source\":\"s2\"}\n".utf8), pieces: { _ in 5 })
        #expect(quiet.failure == nil && quiet.events.map(\.type) == ["clip_started"])
    }

    /// `body` (blocking network I/O) run on a thread of its own, awaited: run on a thread of the
    /// cooperative pool, it would hold that thread while the in-process server's handlers, which
    /// run on the same pool, answer it. On two cores, with every suite running, this test's server
    /// once took over 30 s to answer (likely for want of a pool thread), and the request ended as
    /// a stall, not a 404.
    static func onItsOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in Thread { continuation.resume(returning: body()) }.start() }
    }

    @Test func httpStreamReportsStatusesAndRefusedConnections() async throws {
        try await ServerFixtures.application().test(.live) { client in
            let port = try #require(client.port)
            let url = "http://127.0.0.1:\(port)/nothing-here"
            let outcome = await Self.onItsOwnThread { Result { try HTTPStream.get(url, keepGoing: { true }) { _ in true } } }
            #expect(throws: StoreError.httpStatus(url: url, status: 404)) { try outcome.get() }
        }
        #expect {
            try HTTPStream.get("http://127.0.0.1:9/", options: .init(connectTimeout: 2), keepGoing: { true }) { _ in true }
        } throws: { error in
            if case StoreError.network = error { return true }
            return false
        }
    }
}
