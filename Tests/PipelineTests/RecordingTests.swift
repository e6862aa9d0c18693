import Detection
import Foundation
import Imaging
import Media
import Pipeline
import Testing
import TestSupport

/// Facts ffprobe reports about a video file.
struct Probe {
    var codec: String
    var pixelFormat: String
    var frames: Int
    var duration: Double
    var frameRate: Double
    var width: Int
    var height: Int

    init(_ path: String) throws {
        let out = try run("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                      "stream=codec_name,pix_fmt,nb_read_frames,avg_frame_rate,width,height:format=duration", "-of", "json", path])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "ffprobe: \(out)")
        let stream = try #require((json["streams"] as? [[String: Any]])?.first, "no video stream in \(path): \(out)")
        codec = try #require(stream["codec_name"] as? String, "no codec in \(path): \(out)")
        pixelFormat = try #require(stream["pix_fmt"] as? String, "no pixel format in \(path): \(out)")
        frames = try #require((stream["nb_read_frames"] as? String).flatMap { Int($0) }, "no frame count in \(path): \(out)")
        let rate = (stream["avg_frame_rate"] as? String ?? "").split(separator: "/").compactMap { Double($0) }
        frameRate = rate.count == 2 && rate[1] > 0 ? rate[0] / rate[1] : 0
        width = stream["width"] as? Int ?? 0
        height = stream["height"] as? Int ?? 0
        duration = Double(((json["format"] as? [String: Any])?["duration"] as? String) ?? "0") ?? 0
    }
}

func temporaryDirectory(_ name: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-\(name)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

@Suite(.serialized) struct RecordingTests {
    static let video = Fixtures.shared.appendingPathComponent("videos/one-by-one-person-detection.mp4").path

    static func personDetector() throws -> ObjectDetector {
        var options = ObjectDetector.Options(categoryAllowlist: ["person"])
        options.parksThreadsBetweenPictures = true
        return try ObjectDetector(modelPath: Fixtures.detectModel.path, options: options)
    }

    /// The peer's clips of the same video (scripts/make_recording_fixtures.py runs pipeline_py.py
    /// --record-persons on it), with the video's size and frame rate as OpenCV reads them.
    struct PeerClips: Decodable {
        struct Clip: Decodable {
            let start_s: Double
            let end_s: Double
            let frames: Int
        }
        let width: Int
        let height: Int
        let fps: Double
        let clips: [Clip]
    }

    @Test func recordingTheSharedVideoGivesTheClipsOfThePeer() throws {
        let peer = try JSONDecoder().decode(PeerClips.self, from: Data(contentsOf: Fixtures.generated.appendingPathComponent("recording/peer-clips.json")))
        let directory = try temporaryDirectory("album")
        let album = try Album(directory: directory)
        let detector = try Self.personDetector()
        let reader = try VideoReader(path: Self.video)
        let session = try ClipSession(album: album, source: Self.video, options: .init(frameRate: reader.info.frameRate ?? 10), events: { _ in })
        _ = try FramePipeline(reader: reader).run(detect: { try detector.detect($0.image).detections },
                                                  consume: { try session.consume($0) }, progress: { _ in })
        try session.finish()

        let clips = try album.clips()
        // Within half a second: a person scored just over 0.5 by LiteRT may score just under it here.
        #expect(clips.count == peer.clips.count, "\(clips.map { ($0.start, $0.end) }) against the peer's \(peer.clips.map { ($0.start_s, $0.end_s) })")
        for (clip, expected) in zip(clips, peer.clips) {
            #expect(abs(clip.start - expected.start_s) <= 0.5 && abs(clip.end - expected.end_s) <= 0.5,
                    "\(clip.clip): \(clip.start)-\(clip.end) against the peer's \(expected.start_s)-\(expected.end_s)")
            let probe = try Probe(directory.appendingPathComponent(clip.clip).path)
            #expect(probe.codec == "h264" && probe.pixelFormat == "yuv420p")
            #expect(probe.frames == clip.frames)
            #expect(abs(probe.duration * peer.fps - Double(probe.frames)) <= 1.5, "duration \(probe.duration) for \(probe.frames) frames")
            #expect(clip.labels == "person" && clip.bestScore >= 0.5)
            // The snapshot is the clip's best frame, with its boxes in the person colour; the
            // thumbnail is the same picture 320 pixels wide.
            let thumbnailPath = directory.appendingPathComponent(try #require(clip.thumbnail)).path
            let snapshot = try ImageFile.decode(thumbnailPath.replacingOccurrences(of: ".jpg", with: "-full.jpg")).stored
            #expect(snapshot.width == peer.width && snapshot.height == peer.height)
            #expect(Self.pixels(near: Color.forClass(0), in: snapshot) > 500)
            let thumbnail = try ImageFile.decode(thumbnailPath).stored
            #expect(thumbnail.width == min(320, peer.width))
            #expect(abs(Double(thumbnail.height) - Double(peer.height * thumbnail.width) / Double(peer.width)) <= 1, "\(thumbnail.width)x\(thumbnail.height)")
            #expect(Self.pixels(near: Color.forClass(0), in: thumbnail) > 80)
        }
        // The index as SQLite itself reads it.
        let rows = try run("sqlite3", [directory.appendingPathComponent("index.sqlite").path, "select start, \"end\", frames from clips order by clip"])
        let read = rows.split(separator: "\n").map { $0.split(separator: "|").compactMap { Double($0) } }
        let ours = clips.map { [$0.start, $0.end, Double($0.frames)] }
        #expect(read.count == ours.count && zip(read, ours).allSatisfy { row, clip in
            row.count == 3 && zip(row, clip).allSatisfy { abs($0 - $1) < 1e-6 }
        }, "\(rows)")
    }

    static func pixels(near color: Color, in image: Image) -> Int {
        var count = 0
        for i in stride(from: 0, to: image.data.count, by: 3)
        where abs(Int(image.data[i]) - Int(color.red)) < 40 && abs(Int(image.data[i + 1]) - Int(color.green)) < 40 && abs(Int(image.data[i + 2]) - Int(color.blue)) < 40 {
            count += 1
        }
        return count
    }

    @Test func clipNamesSortByTimeAndNeverCollideAcrossRuns() throws {
        let directory = try temporaryDirectory("names")
        var names: [String] = []
        for _ in 0..<2 {
            let album = try Album(directory: directory)
            for _ in 0..<2 {
                let reservation = try album.reserveClip()
                #expect(FileManager.default.fileExists(atPath: reservation.path))
                names.append(reservation.clip)
                Thread.sleep(forTimeInterval: 0.002)
            }
        }
        #expect(Set(names).count == 4 && names == names.sorted())
    }

    @Test func annotatedVideoIsH264WithTheIndexAtTheFront() throws {
        let directory = try temporaryDirectory("video")
        let output = directory.appendingPathComponent("out.mp4").path
        let source = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path
        let reader = try VideoReader(path: source)
        let writer = try VideoWriter(path: output, width: reader.info.width, height: reader.info.height, options: .init(frameRate: reader.info.frameRate ?? 30))
        var frames = 0
        while let frame = try reader.nextFrame() {
            try writer.write(frame.image, time: frame.time)
            frames += 1
        }
        try writer.finish()
        let probe = try Probe(output)
        #expect(probe.codec == "h264" && probe.pixelFormat == "yuv420p" && probe.frames == frames)
        let bytes = try Fixtures.bytes(URL(fileURLWithPath: output))
        let moov = try #require(Fixtures.find(Array("moov".utf8), in: bytes))
        let mdat = try #require(Fixtures.find(Array("mdat".utf8), in: bytes))
        #expect(moov < mdat, "faststart puts moov before mdat")
    }

    /// Frames FFmpeg's own tools decode from `path` (ffprobe counts them).
    static func framesFFmpegDecodes(_ path: String) throws -> Int {
        let out = try run("ffprobe", ["-v", "quiet", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        return Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    @Test(arguments: [("videos/one-by-one-person-detection.mp4", 4096), ("videos/asl-walk.mkv", 20_000)])
    func damagedInputIsReadPastTheDamageAsFarAsFFmpegReadsIt(file: String, damage: Int) throws {
        let directory = try temporaryDirectory("damaged")
        defer { try? FileManager.default.removeItem(at: directory) }
        var bytes = try Fixtures.bytes(Fixtures.shared.appendingPathComponent(file))
        // Zero (MP4) or scramble (Matroska) a block in the middle of the file.
        for i in (bytes.count / 2)..<(bytes.count / 2 + damage) { bytes[i] = file.hasSuffix(".mp4") ? 0 : UInt8(truncatingIfNeeded: i &* 7919) }
        let path = directory.appendingPathComponent("damaged" + (file.hasSuffix(".mp4") ? ".mp4" : ".mkv")).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let reader = try VideoReader(path: path)
        var frames = 0
        while try reader.nextFrame() != nil { frames += 1 }
        let expected = try Self.framesFFmpegDecodes(path)
        #expect(frames >= expected - 2 && frames > 0, "\(frames) frames against ffprobe's \(expected)")
        // MP4 has no resynchronisation markers: the zeroed packets are rejected and counted.
        // Matroska's demuxer resynchronises by itself.
        if file.hasSuffix(".mp4") { #expect(reader.damagedPackets > 0) }
    }
}

@Suite(.serialized) struct LiveAndSignalTests {
    static let spotter = Fixtures.spotter

    @Test func liveStreamDropsFramesWhileTheDetectorIsBusyAndStaysCurrent() throws {
        // FFmpeg serves the clip at real-time pace on a random port; on a busy machine it can take
        // seconds to listen, and a port already taken makes it exit: up to three ports, 20 s each.
        var server: Process?
        var reader: VideoReader?
        for _ in 0..<3 where reader == nil {
            let port = Int.random(in: 20_000...40_000)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["ffmpeg", "-v", "error", "-re", "-i", Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path,
                                 "-c", "copy", "-f", "mpegts", "tcp://127.0.0.1:\(port)?listen=1"]
            try process.run()
            server = process
            let deadline = Date().addingTimeInterval(20)
            while reader == nil, process.isRunning, Date() < deadline {
                reader = try? VideoReader(path: "tcp://127.0.0.1:\(port)")
                if reader == nil { Thread.sleep(forTimeInterval: 0.1) }
            }
            if reader == nil { process.terminate() }
        }
        defer { server?.terminate() }
        let live = try #require(reader, "no FFmpeg TCP server answered on three ports")
        #expect(live.info.isLive)
        let start = Date()
        let lags = LagLog()
        let stats = try FramePipeline(reader: live).run(
            detect: { frame in
                lags.record(Date().timeIntervalSince(start) - frame.time)
                Thread.sleep(forTimeInterval: 0.15)
                return []
            },
            consume: { _ in }, progress: { _ in })
        #expect(stats.dropped > 10, "dropped \(stats.dropped) of \(stats.received)")
        #expect(stats.processed + stats.dropped <= stats.received + 1)
        #expect(stats.processed >= 5 && stats.processed < stats.received)
        // One frame in flight: the frame being detected is never more than a few detections behind.
        let settled = lags.values.dropFirst(2)
        #expect((settled.max() ?? 0) - (settled.min() ?? 0) < 1.0, "lag grew: \(lags.values)")
    }

    /// Runs `spotter record --json` on the long video until the first clip has a fragment (`moof`) on
    /// disk, then signals it.
    func recordUntilFirstClip(signal: Int32, album: URL) throws -> (clip: String, status: Int32) {
        try #require(FileManager.default.isExecutableFile(atPath: Self.spotter), "build spotter first (scripts/test.sh does)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.spotter)
        process.arguments = ["record", RecordingTests.video, "--album", album.path, "--model", Fixtures.detectModel.path, "--json"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var buffer = Data()
        var clip: String?
        while clip == nil {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            buffer += chunk
            for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") {
                if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                   object["event"] as? String == "clip_started" { clip = object["path"] as? String }
            }
        }
        let path = try #require(clip, "spotter record ended without starting a clip")
        // Killed only once a whole fragment is on disk: its moof box and the mdat box after it (the
        // writer puts the header down first, so a slow run can be caught between the two).
        let deadline = Date().addingTimeInterval(120)
        while !Self.holdsCompleteFragment(Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())) {
            try #require(Date() < deadline && process.isRunning, "no fragment written to \(path)")
            Thread.sleep(forTimeInterval: 0.1)
        }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return (path, process.terminationStatus)
    }

    /// Whether `bytes` (a fragmented MP4 being written) hold a moof box followed by its whole mdat box.
    static func holdsCompleteFragment(_ bytes: [UInt8]) -> Bool {
        func size(at offset: Int) -> Int? {
            guard offset >= 0, offset + 8 <= bytes.count else { return nil }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        guard let type = Fixtures.find(Array("moof".utf8), in: bytes), let moof = size(at: type - 4), moof >= 8,
              let mdat = size(at: type - 4 + moof), mdat >= 8,
              Array(bytes[(type - 4 + moof + 4)..<(type - 4 + moof + 8)]) == Array("mdat".utf8) else { return false }
        return bytes.count >= type - 4 + moof + mdat
    }

    @Test func killedRecorderLeavesAClipThatTheNextRunIndexesAsIncomplete() throws {
        let album = try temporaryDirectory("sigkill")
        defer { try? FileManager.default.removeItem(at: album) }
        let (clip, _) = try recordUntilFirstClip(signal: SIGKILL, album: album)
        let probe = try Probe(clip)
        #expect(probe.codec == "h264" && probe.frames > 0)
        #expect(try Album(directory: album).clips().isEmpty, "the killed run wrote no row")
        // `spotter album repair` (and every `record` start) adopts the orphan.
        let repaired = try Fixtures.runSpotter(["album", "repair", album.path])
        #expect(repaired.status == 0, "\(repaired.errors)")
        let entries = try Album(directory: album).clips()
        #expect(entries.count == 1)
        let entry = try #require(entries.first)
        #expect(entry.incomplete && entry.frames == probe.frames && clip.hasSuffix(entry.clip))
        #expect(entry.source == RecordingTests.video && entry.start > 0, "source and start come from the clip's own tags")
        #expect(FileManager.default.fileExists(atPath: album.appendingPathComponent(try #require(entry.thumbnail)).path))
    }

    @Test func fullDiskMidClipKeepsTheIndexConsistentAndSaysSo() throws {
        let album = try temporaryDirectory("full")
        let scratch = try temporaryDirectory("full-unlimited")
        defer { for url in [album, scratch] { try? FileManager.default.removeItem(at: url) } }
        let command = [Self.spotter, "record", RecordingTests.video, "--model", Fixtures.detectModel.path]
        // Where the limit falls is read from the first clip of an unlimited run (whatever the
        // video's size and rate): halfway through its second fragment, so the first is whole.
        let unlimited = try RunningProgram(command[0], Array(command.dropFirst()) + ["--album", scratch.path]).wait()
        #expect(unlimited.status == 0, "\(unlimited.errors)")
        let whole = try #require(try Album(directory: scratch).clips().min { $0.clip < $1.clip }, "the video gave no clip")
        let wholePath = scratch.appendingPathComponent(whole.clip).path
        let packets = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pos,flags", "-of", "csv=p=0", wholePath])
            .split(separator: "\n").map { $0.split(separator: ",") }
        let keyframes = packets.indices.filter { packets[$0].count > 1 && packets[$0][1].hasPrefix("K") }
        try #require(keyframes.count >= 2, "the first clip has \(keyframes.count) fragment(s); a cut mid-clip needs two")
        let secondFragment = try #require(Int(packets[keyframes[1]][0]))
        let size = try #require(try FileManager.default.attributesOfItem(atPath: wholePath)[.size] as? Int)
        let fragmentEnd = keyframes.count > 2 ? try #require(Int(packets[keyframes[2]][0])) : size
        let blocks = (secondFragment + fragmentEnd) / 2 / 1024
        try #require(blocks * 1024 > secondFragment && blocks * 1024 + 1024 < fragmentEnd, "a second fragment of \(fragmentEnd - secondFragment) bytes")

        // A file-size limit stands in for a full disk: the first clip's writes fail midway.
        let result = try RunningProgram("/bin/bash", ["-c", "ulimit -f \(blocks); exec \"$0\" \"$@\""] + command + ["--album", album.path]).wait()
        #expect(result.status == 1)
        #expect(result.errors.contains("File too large") || result.errors.contains("No space"), "\(result.errors)")
        #expect(result.errors.contains("1 clip(s) are in"), "\(result.errors)")
        let entries = try Album(directory: album).clips()
        let entry = try #require(entries.first)
        #expect(entries.count == 1 && entry.incomplete)
        // At least the whole first fragment, at most the frames of the unlimited clip.
        #expect(entry.frames >= keyframes[1] && entry.frames <= packets.count, "\(entry.frames) frames of \(packets.count); first fragment \(keyframes[1])")
        #expect(try Probe(album.appendingPathComponent(entry.clip).path).frames == entry.frames)
        let files = try FileManager.default.contentsOfDirectory(atPath: album.appendingPathComponent("clips").path).filter { $0.hasSuffix(".mp4") }
        #expect(files.map { "clips/\($0)" } == [entry.clip], "no clip without a row: \(files)")
    }

    @Test func albumRepairRemovesEmptyClipsAndSkipsClipsBeingRecorded() throws {
        let directory = try temporaryDirectory("repair")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let recording = try album.reserveClip()  // held, as by a running recorder
        let orphan = try album.reserveClip()
        orphan.release()  // a killed run's empty file
        let report = try Album(directory: directory).repair()
        #expect(report.removed == [orphan.clip] && report.adopted.isEmpty)
        #expect(FileManager.default.fileExists(atPath: recording.path))
        #expect(!FileManager.default.fileExists(atPath: orphan.path))
    }

    @Test func clipNamesTakenByAnotherWriterAreSkipped() throws {
        let directory = try temporaryDirectory("collide")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let first = try album.reserveClip()
        // Another process took the next name (same run stamp, same sequence number).
        let taken = first.clip.replacingOccurrences(of: "-001.mp4", with: "-002.mp4")
        #expect(taken != first.clip)
        FileManager.default.createFile(atPath: directory.appendingPathComponent(taken).path, contents: Data("other".utf8))
        let second = try album.reserveClip()
        #expect(second.clip != taken && second.clip != first.clip)
        #expect(try String(contentsOf: directory.appendingPathComponent(taken), encoding: .utf8) == "other")
    }

    @Test func threeRecordersStartedTogetherOnANewAlbumAllSucceed() throws {
        let album = try temporaryDirectory("three").appendingPathComponent("new-album")
        defer { try? FileManager.default.removeItem(at: album.deletingLastPathComponent()) }
        let input = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path
        let runs = try (0..<3).map { _ in
            try RunningProgram(Self.spotter, ["record", input, "--album", album.path, "--model", Fixtures.detectModel.path, "--threads", "1"])
        }
        let results = runs.map { $0.wait() }
        for result in results { #expect(result.status == 0, "\(result.errors)") }
        let rows = try run("sqlite3", [album.appendingPathComponent("index.sqlite").path, "select clip from clips"])
            .split(separator: "\n").map(String.init)
        let files = try FileManager.default.contentsOfDirectory(atPath: album.appendingPathComponent("clips").path).filter { $0.hasSuffix(".mp4") }
        #expect(rows.count == 3 && Set(rows).count == 3, "\(rows)")
        #expect(Set(rows) == Set(files.map { "clips/\($0)" }))
        for row in rows { #expect(try Probe(album.appendingPathComponent(row).path).frames > 0) }
    }

    /// A TCP server on 127.0.0.1 that accepts connections and never sends a byte.
    static func silentServer(port: Int) throws -> Process {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-c", "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', \(port)))\ns.listen()\n"
                            + "c, _ = s.accept()\ntime.sleep(60)"]
        try server.run()
        Thread.sleep(forTimeInterval: 0.5)
        return server
    }

    @Test func silentSourceTimesOutWithAMessage() throws {
        let port = Int.random(in: 20_000...40_000)
        let server = try Self.silentServer(port: port)
        defer { server.terminate() }
        let album = try temporaryDirectory("silent")
        defer { try? FileManager.default.removeItem(at: album) }
        let start = Date()
        let result = try Fixtures.runSpotter(["record", "tcp://127.0.0.1:\(port)", "--album", album.path, "--model", Fixtures.detectModel.path, "--timeout", "2"])
        #expect(result.status == 1)
        #expect(result.errors.contains("no data for 5 s"), "\(result.errors)")
        #expect(Date().timeIntervalSince(start) < 15)
    }

    /// Streams the shared person clip over TCP at real-time pace, starts `spotter record --json` on
    /// it and waits for the first clip; returns both processes.
    func recordLiveUntilFirstClip(album: URL, extra: [String] = []) throws -> (sender: Process, recorder: Process, output: Pipe) {
        let port = Int.random(in: 20_000...40_000)
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        sender.arguments = ["ffmpeg", "-v", "quiet", "-re", "-ss", "8", "-stream_loop", "-1", "-i", RecordingTests.video,
                            "-c", "copy", "-f", "mpegts", "tcp://127.0.0.1:\(port)?listen=1"]
        try sender.run()
        Thread.sleep(forTimeInterval: 0.5)
        let recorder = Process()
        recorder.executableURL = URL(fileURLWithPath: Self.spotter)
        recorder.arguments = ["record", "tcp://127.0.0.1:\(port)", "--album", album.path, "--model", Fixtures.detectModel.path, "--json",
                              "--timeout", "3"] + extra
        let output = Pipe()
        recorder.standardOutput = output
        recorder.standardError = FileHandle.nullDevice
        try recorder.run()
        var buffer = Data()
        while !String(decoding: buffer, as: UTF8.self).contains("clip_started") {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            buffer += chunk
        }
        try #require(String(decoding: buffer, as: UTF8.self).contains("clip_started"), "no clip started on the live stream")
        Thread.sleep(forTimeInterval: 1.5)
        return (sender, recorder, output)
    }

    @Test func interruptWhileTheSenderIsStalledEndsWithinASecondAndKeepsTheClip() throws {
        let album = try temporaryDirectory("stalled")
        defer { try? FileManager.default.removeItem(at: album) }
        let (sender, recorder, _) = try recordLiveUntilFirstClip(album: album)
        defer { kill(sender.processIdentifier, SIGKILL) }
        kill(sender.processIdentifier, SIGSTOP)  // the sender stalls mid-stream, the connection stays open
        Thread.sleep(forTimeInterval: 1)
        let signalled = Date()
        kill(recorder.processIdentifier, SIGINT)
        recorder.waitUntilExit()
        #expect(Date().timeIntervalSince(signalled) < 1.5)
        #expect(recorder.terminationStatus == 130)
        let rows = try run("sqlite3", [album.appendingPathComponent("index.sqlite").path, "select frames from clips"])
        #expect((Int(rows.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0, "rows: \(rows)")
    }

    @Test func senderThatDiesEndsTheRunAsABrokenStreamWithTheClipIndexed() throws {
        let album = try temporaryDirectory("dying")
        defer { try? FileManager.default.removeItem(at: album) }
        let (sender, recorder, _) = try recordLiveUntilFirstClip(album: album)
        kill(sender.processIdentifier, SIGKILL)
        recorder.waitUntilExit()
        #expect(recorder.terminationStatus == 1)
        let rows = try run("sqlite3", [album.appendingPathComponent("index.sqlite").path, "select frames from clips"])
        #expect((Int(rows.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0, "rows: \(rows)")
    }

    @Test func interruptedRecorderFinishesTheClipAndTheIndex() throws {
        let album = try temporaryDirectory("sigint")
        let (clip, status) = try recordUntilFirstClip(signal: SIGINT, album: album)
        #expect(status == 130)
        let rows = try run("sqlite3", [album.appendingPathComponent("index.sqlite").path, "select clip, frames from clips"])
        let fields = rows.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
        #expect(fields.count == 2 && clip.hasSuffix(String(fields[0])))
        let probe = try Probe(clip)
        #expect(probe.frames == Int(fields.last ?? "") && probe.frames > 0)
    }
}

final class LagLog: @unchecked Sendable {
    // Written from the detect closure on the calling thread only.
    var values: [Double] = []
    func record(_ lag: Double) { values.append(lag) }
}
