import Cluster
import Foundation
import Logging
import ModelStore
import NIOCore
import Synchronization

/// In a cluster, the live view of sources other nodes run: while this node's live-stream
/// subscribers (the live page, `GET /api/v1/live`) want such a source, this node reads the owner's
/// own live stream of it (`GET ADDRESS/api/v1/live?sources=ID&local=1`, the address the owner
/// gives at its heartbeats, with this node's token) and sends its frames, their detections and
/// its stats on to them. One connection per relayed source, shared by every subscriber; it ends
/// when nobody here wants the source or it moves (then the new owner's stream is read).
/// Nodes of one cluster share one `--token`.
final class LiveRelay: Sendable {
    private let hub: EventHub
    private let store: ClusterStore
    private let node: String
    private let token: String?
    private let leaseSeconds: Double
    private let logger: Logger
    /// The running relays, by source id.
    private let relays = Mutex<[String: Relay]>([:])

    /// The events a relay carries: the ones only the running node publishes (the rest come from the outbox).
    static let types = "detection,object_updated,source_stats"

    init(hub: EventHub, store: ClusterStore, node: String, token: String?, leaseSeconds: Double, logger: Logger) {
        self.hub = hub
        self.store = store
        self.node = node
        self.token = token
        self.leaseSeconds = leaseSeconds
        self.logger = logger
    }

    /// Starts and stops relays as subscribers come and go and sources move, once a second, until cancelled.
    func run() async {
        var owners: [String: String] = [:]
        var checked = ContinuousClock.now - .seconds(60)
        while !Task.isCancelled {
            let wanted = hub.liveWanted
            if wanted == .none {
                owners = [:]
            } else if checked.duration(to: .now) >= .seconds(2) {
                // Which node runs each source, and where it answers (sources on live nodes only).
                if let rows = try? await store.sources(), let nodes = try? await store.nodes(within: leaseSeconds) {
                    let addresses = Dictionary(nodes.filter { $0.live && !$0.address.isEmpty }.map { ($0.name, $0.address) }, uniquingKeysWith: { a, _ in a })
                    owners = [:]
                    for row in rows {
                        guard let owner = row.node, owner != node, let address = addresses[owner] else { continue }
                        owners[row.id] = address
                    }
                }
                checked = .now
            }
            let targets = owners.filter { id, _ in
                switch wanted {
                case .none: false
                case .all: true
                case .some(let ids): ids.contains(id)
                }
            }
            update(targets)
            try? await Task.sleep(for: .seconds(1))
        }
        update([:])
    }

    /// Runs a relay for each source in `targets` (id to its owner's address), and no other.
    private func update(_ targets: [String: String]) {
        let (started, stopped) = relays.withLock { relays -> ([Relay], [Relay]) in
            var stopped: [Relay] = []
            for (id, relay) in relays where targets[id] != relay.address {
                stopped.append(relay)
                relays[id] = nil
            }
            var started: [Relay] = []
            for (id, address) in targets where relays[id] == nil {
                let relay = Relay(source: id, address: address)
                relays[id] = relay
                started.append(relay)
            }
            return (started, stopped)
        }
        for relay in stopped { relay.stop() }
        for relay in started {
            logger.debug("cluster: relaying the live view of \(relay.source) from \(relay.address)")
            relay.start(hub: hub, token: token, logger: logger)
        }
    }
}

/// One relayed source: a thread reading its owner's live stream, reconnecting after a failure
/// (once a second) until stopped.
private final class Relay: Sendable {
    let source: String
    let address: String
    private let stopped = Mutex(false)

    init(source: String, address: String) {
        self.source = source
        self.address = address
    }

    func stop() { stopped.withLock { $0 = true } }

    var isStopped: Bool { stopped.withLock { $0 } }

    func start(hub: EventHub, token: String?, logger: Logger) {
        let id = source.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+#"))) ?? source
        let url = "\(address)/api/v1/live?sources=\(id)&types=\(LiveRelay.types)&local=1"
        let headers = token.map { ["Authorization: Bearer \($0)"] } ?? []
        let thread = Thread { [self] in
            var lastError = ""
            while !isStopped {
                let reader = LiveStreamReader { type, source, json, frame, jpeg in
                    hub.publishRelayedLive(type, source: source, json: json, frame: frame, jpeg: jpeg)
                }
                do {
                    try HTTPStream.get(url, options: .init(connectTimeout: 3, stallTimeout: 20, headers: headers), keepGoing: { !self.isStopped }) { bytes in
                        reader.feed(bytes)
                    }
                    if let failure = reader.failure { throw failure }
                } catch {
                    let message = "\(error)"
                    if message != lastError {
                        logger.warning("cluster: relaying the live view of \(source) from \(address): \(message)")
                        lastError = message
                    }
                }
                for _ in 0..<10 where !isStopped { usleep(100_000) }
            }
        }
        thread.name = "spotter-relay-\(source)"
        thread.start()
    }
}

/// Reads the live stream's framing (``EventHub/Format/live``): a line of JSON per event, and
/// after a line ending in `"jpeg_bytes": N` that many bytes of JPEG. Each event goes to `event`
/// with its JSON object without `jpeg_bytes`, its frame number and JPEG. Lines longer than
/// ``maxLine`` and pictures larger than ``maxPicture`` end the stream (``failure``). For Swift
/// programs that watch a server's sources, as the relay does:
///
/// ```swift
/// let reader = LiveStreamReader { type, source, json, frame, jpeg in show(source, frame, jpeg) }
/// try HTTPStream.get("http://cams-1:8080/api/v1/live", keepGoing: { true }) { reader.feed($0) }
/// ```
public final class LiveStreamReader {
    public typealias Event = (_ type: String, _ source: String, _ json: Data, _ frame: Int?, _ jpeg: ByteBuffer?) -> Void
    public static let maxLine = 1 << 20
    public static let maxPicture = 32 << 20

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    private let event: Event
    private var buffer: [UInt8] = []
    /// The line waiting for its picture, and the picture's size.
    private var waiting: (type: String, source: String, json: Data, frame: Int?, bytes: Int)?
    public private(set) var failure: Failure?

    public init(event: @escaping Event) {
        self.event = event
    }

    /// Takes the next bytes of the stream; false once the stream cannot be read on.
    public func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard failure == nil else { return false }
        buffer.append(contentsOf: bytes)
        var start = 0
        defer { buffer.removeFirst(start) }
        while true {
            if let line = waiting {
                guard buffer.count - start >= line.bytes else { return true }
                var picture = ByteBuffer()
                picture.writeBytes(buffer[start..<(start + line.bytes)])
                start += line.bytes
                waiting = nil
                event(line.type, line.source, line.json, line.frame, picture)
                continue
            }
            guard let end = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                guard buffer.count - start <= Self.maxLine else { return fail("a line longer than \(Self.maxLine) bytes") }
                return true
            }
            guard end - start <= Self.maxLine else { return fail("a line longer than \(Self.maxLine) bytes") }
            let line = Data(buffer[start..<end])
            start = end + 1
            guard let object = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any], let type = object["type"] as? String else {
                return fail("a line that is not a JSON object with a type")
            }
            // The stream's own hello and keep-alive, and events of no source, are not relayed.
            guard let source = object["source"] as? String else { continue }
            let frame = object["frame"] as? Int
            guard let size = object["jpeg_bytes"] as? Int else {
                event(type, source, line, frame, nil)
                continue
            }
            guard (0...Self.maxPicture).contains(size) else { return fail("a picture of \(size) bytes") }
            waiting = (type, source, Self.withoutPictureSize(line), frame, size)
        }
    }

    private func fail(_ reason: String) -> Bool {
        failure = Failure(description: "the live stream has \(reason)")
        return false
    }

    /// The JSON object without its last member, `"jpeg_bytes": N` (the stream writes it last).
    private static func withoutPictureSize(_ line: Data) -> Data {
        guard let key = line.range(of: Data("\"jpeg_bytes\"".utf8), options: .backwards) else { return line }
        var head = line[..<key.lowerBound]
        while let last = head.last, last == UInt8(ascii: " ") || last == UInt8(ascii: ",") { head = head.dropLast() }
        return Data(head) + Data("}".utf8)
    }
}
