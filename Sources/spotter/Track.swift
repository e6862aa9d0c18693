import ArgumentParser
import Foundation
import Imaging
import Tracking

struct Track: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "track",
        abstract: "Track objects through a file of detections (MOTChallenge format) and write their tracks.",
        discussion: """
            Reads detections as MOTChallenge writes them (frame,id,x,y,w,h,score,...: frames from 1, \
            id -1, boxes in pixels, further columns ignored) and writes MOTChallenge results \
            (frame,id,x,y,w,h,score,-1,-1,-1), one line per tracked detection, ids from 1. This is \
            how trackers are compared on public detections; `spotter video`, `record` and `serve` \
            run the same tracker on live detections.

            With --zones, each track's bottom-centre point is followed through the file's zones \
            and over its lines, and --events gets one JSON line per zone_enter, zone_exit, \
            line_cross and loitering, in frame order (ids as in --output). A zones file:
              {"zones": [{"name": "door", "polygon": [[100, 400], [300, 400], [300, 480], [100, 480]]}],
               "lines": [{"name": "gate", "from": [320, 0], "to": [320, 480]}]}

            Examples:
              spotter track det.txt --output tracks.txt --frame-rate 25
              spotter track det.txt --output out.txt --zones z.json --events e.jsonl
              spotter track det.txt --output tracks.txt --fill-gaps 1
            """)

    @Argument(help: "Detections in MOTChallenge format (det.txt).")
    var detections: String

    @Option(help: "Where to write the tracks (MOTChallenge results).")
    var output: String

    @Option(parsing: .unconditional, help: "Frames per second of the sequence (the tracker's times are frame / rate).")
    var frameRate: Double = 30

    @Option(help: "A zones file (JSON: zones with polygons, lines with from and to) to follow the tracks through.")
    var zones: String?

    @Option(help: "Where to write the zone and line events (JSON lines); needs --zones.")
    var events: String?

    @Option(help: "The frames' size, WIDTHxHEIGHT: needed for a zones file with normalized coordinates.")
    var frameSize: String?

    @Option(parsing: .unconditional, help: "Fill each track's missed frames up to this many seconds long by straight-line interpolation between its boxes (offline; 0: off).")
    var fillGaps: Double = 0

    func validate() throws {
        guard frameRate > 0, frameRate.isFinite, frameRate <= 1000 else { throw ValidationError("--frame-rate must be between 0 and 1000") }
        guard fillGaps >= 0, fillGaps.isFinite else { throw ValidationError("--fill-gaps cannot be negative") }
        if events != nil, zones == nil { throw ValidationError("--events needs --zones FILE") }
        if let frameSize, Self.size(frameSize) == nil { throw ValidationError("--frame-size must be WIDTHxHEIGHT, e.g. 640x480") }
    }

    static func size(_ text: String) -> Size? {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), width > 0, height > 0 else { return nil }
        return Size(width: width, height: height)
    }

    func run() throws {
        for path in [output] + (events.map { [$0] } ?? []) {
            try refuseOverwriting(inputs: [detections] + (zones.map { [$0] } ?? []), with: path, flag: path == output ? "--output" : "--events")
            try checkWritable(path, flag: path == output ? "--output" : "--events")
        }
        if let events, events == output { throw CommandFailure("--events and --output must be different files") }
        var monitor: ZoneMonitor?
        if let zones {
            var layout = try ZoneFile.read(zones)
            if layout.normalized ?? false {
                guard let size = frameSize.flatMap(Self.size) else {
                    throw CommandFailure("\(zones) has normalized coordinates: give the frames' size with --frame-size WIDTHxHEIGHT")
                }
                layout = layout.inPixels(width: size.width, height: size.height)
            }
            monitor = ZoneMonitor(layout: layout)
        }
        let frames = try MOTDetections.read(detections)
        var options = ObjectTracker.Options()
        options.referenceFrameRate = frameRate
        var tracker = ObjectTracker(options: options)
        var rows: [TrackedBox] = []
        rows.reserveCapacity(frames.count)
        let lastFrame = frames.last?.frame ?? 0
        let start = ContinuousClock.now
        for frame in stride(from: 1, through: lastFrame, by: 1) {
            let boxes = frames.boxes(in: frame)
            let ids = tracker.update(boxes, time: Double(frame - 1) / frameRate)
            for (box, id) in zip(boxes, ids) {
                guard let id else { continue }
                rows.append(TrackedBox(frame: frame, track: id, box: box.box, score: box.score))
            }
        }
        let tracking = ContinuousClock.now - start
        if fillGaps > 0 { rows = rows.fillingGaps(upTo: Int((fillGaps * frameRate).rounded())) }
        var lines = ""
        lines.reserveCapacity(rows.count * 48)
        for row in rows {
            let b = row.box
            lines += "\(row.frame),\(row.track),\(MOTDetections.format(b.minX)),\(MOTDetections.format(b.minY)),"
                + "\(MOTDetections.format(b.maxX - b.minX)),\(MOTDetections.format(b.maxY - b.minY)),\(MOTDetections.format(Double(row.score))),-1,-1,-1\n"
        }
        var eventLines: String?
        if var monitor {
            // The observations are the rows written: boxes as --output has them, in frame order.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            var text = ""
            for row in rows {
                let box = Rect(minX: MOTDetections.rounded(row.box.minX), minY: MOTDetections.rounded(row.box.minY),
                               maxX: MOTDetections.rounded(row.box.minX) + MOTDetections.rounded(row.box.maxX - row.box.minX),
                               maxY: MOTDetections.rounded(row.box.minY) + MOTDetections.rounded(row.box.maxY - row.box.minY))
                for event in monitor.observe(track: row.track, box: box, time: Double(row.frame - 1) / frameRate) {
                    text += String(decoding: try encoder.encode(FramedEvent(frame: row.frame, event: event)), as: UTF8.self) + "\n"
                }
            }
            eventLines = text
        }
        try write(lines, to: output, flag: "--output")
        if let events, let eventLines { try write(eventLines, to: events, flag: "--events") }
        let seconds = Double(tracking.components.seconds) + Double(tracking.components.attoseconds) / 1e18
        let tracks = Set(rows.map(\.track)).count
        FileHandle.standardError.write(Data(String(format: "%@: %d frames, %d tracks; tracker %.4f ms per frame\n", output, lastFrame, tracks,
                                                   lastFrame > 0 ? seconds * 1000 / Double(lastFrame) : 0).utf8))
    }

    private func write(_ text: String, to path: String, flag: String) throws {
        let staged = StagedFile(path)
        do {
            try text.write(toFile: staged.temporary, atomically: false, encoding: .utf8)
            try staged.commit()
        } catch {
            staged.discard()
            throw CommandFailure("\(flag) \(path): \(error.localizedDescription)")
        }
    }
}

/// `{"frame": N, ...event}`: a zone or line event of `spotter track --events`.
private struct FramedEvent: Encodable {
    let frame: Int
    let event: ZoneEvent

    enum CodingKeys: String, CodingKey { case frame }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(frame, forKey: .frame)
        try event.encode(to: encoder)
    }
}

/// Reads a zones file.
enum ZoneFile {
    /// - Throws: `CommandFailure` saying what is wrong with the file.
    static func read(_ path: String) throws -> ZoneLayout {
        let data = try readFile(path, limit: 1 << 20, flag: "--zones")
        let layout: ZoneLayout
        do { layout = try JSONDecoder().decode(ZoneLayout.self, from: data) } catch {
            throw CommandFailure("--zones \(path): not a zones file (\(describeDecoding(error))); expected {\"zones\": [{\"name\": ..., \"polygon\": [[x, y], ...]}], \"lines\": [{\"name\": ..., \"from\": [x, y], \"to\": [x, y]}]}")
        }
        do { try layout.validate() } catch { throw CommandFailure("--zones \(path): \(error)") }
        return layout
    }
}

/// A JSON decoding error in a sentence: what is wrong and where.
func describeDecoding(_ error: Error) -> String {
    guard let error = error as? DecodingError else { return "\(error)" }
    func path(_ context: DecodingError.Context) -> String {
        let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        return keys.isEmpty ? "" : " at \(keys.hasPrefix(".") ? String(keys.dropFirst()) : keys)"
    }
    switch error {
    case .keyNotFound(let key, let context): return "\"\(key.stringValue)\" is missing\(path(context))"
    case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
        return context.debugDescription + path(context)
    @unknown default: return "\(error)"
    }
}

/// A MOTChallenge detection file, by frame.
struct MOTDetections {
    /// Rows sorted by frame.
    private(set) var rows: [(frame: Int, input: ObjectTracker.Input)] = []
    private var starts: [Int: Range<Int>] = [:]

    var count: Int { rows.count }
    var last: (frame: Int, input: ObjectTracker.Input)? { rows.last }

    func boxes(in frame: Int) -> [ObjectTracker.Input] {
        guard let range = starts[frame] else { return [] }
        return rows[range].map(\.input)
    }

    /// Reads `frame,id,x,y,w,h,score[,...]` lines; blank lines and `#` comments are skipped.
    ///
    /// - Throws: `CommandFailure` naming the line that is not a detection.
    static func read(_ path: String) throws -> MOTDetections {
        let text = String(decoding: try readFile(path, limit: 1 << 30), as: UTF8.self)
        var file = MOTDetections()
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let fields = trimmed.split(separator: ",", omittingEmptySubsequences: false).map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard fields.count >= 7, let frame = fields[0], let x = fields[2], let y = fields[3], let w = fields[4], let h = fields[5],
                  let score = fields[6], frame >= 1, frame == frame.rounded(), frame < 1e8, w >= 0, h >= 0,
                  [x, y, w, h, score].allSatisfy(\.isFinite) else {
                throw CommandFailure("\(path):\(number + 1): not a MOTChallenge detection (frame,id,x,y,w,h,score,...): \(trimmed.prefix(80))")
            }
            file.rows.append((Int(frame), ObjectTracker.Input(box: Rect(minX: x, minY: y, maxX: x + w, maxY: y + h), score: Float(score))))
        }
        file.rows.sort { $0.frame < $1.frame }
        var start = 0
        while start < file.rows.count {
            var end = start
            while end < file.rows.count && file.rows[end].frame == file.rows[start].frame { end += 1 }
            file.starts[file.rows[start].frame] = start..<end
            start = end
        }
        return file
    }

    /// `value` as MOTChallenge results write it: to two decimals.
    static func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }

    /// A number as MOTChallenge files write them (at most two decimals, no trailing zeros).
    static func format(_ value: Double) -> String {
        let rounded = rounded(value)
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int(rounded)) : String(rounded)
    }
}
