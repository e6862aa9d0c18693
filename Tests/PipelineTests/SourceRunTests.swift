import Detection
import Foundation
import Imaging
import Media
import Pipeline
import Testing
import TestSupport

/// The frames and events a run reported, collected from its threads.
final class RunLog: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var frameTimes: [Double] = []
    private var states: [SourceRun.State] = []
    private var decodedAt: [Date] = []

    func record(_ event: SourceRun.Event) {
        lock.withLock {
            switch event {
            case .frame(let item):
                frameTimes.append(item.frame.time)
                decodedAt.append(item.decodedAt)
            case .state(let state, _): states.append(state)
            default: break
            }
        }
    }

    var times: [Double] { lock.withLock { frameTimes } }
    var stateLog: [SourceRun.State] { lock.withLock { states } }
    var decodeTimes: [Date] { lock.withLock { decodedAt } }
}

final class ProcessBox: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var stored: Process?
    var process: Process? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

@Suite struct SourceRunTests {
    static let walk = Fixtures.shared.appendingPathComponent("videos/asl-walk.mkv").path

    /// A detector stand-in that finds a "person" in every frame (the run is under test, not the model).
    static func everyFrame(_ frame: VideoFrame) -> [Detection] {
        [Detection(classIndex: 0, label: "person", score: 0.9, box: Rect(minX: 10, minY: 10, maxX: 100, maxY: 200),
                   normalizedBox: Rect(minX: 0.01, minY: 0.02, maxX: 0.15, maxY: 0.4))]
    }

    @Test func aFileRunDetectsEveryFrameFfprobeCountsAndIndexesItsClip() throws {
        let directory = try temporaryDirectory("source-run")
        defer { try? FileManager.default.removeItem(at: directory) }
        let album = try Album(directory: directory)
        let session = try ClipSession(album: album, source: Self.walk, options: .init(frameRate: 30), events: { _ in })
        let log = RunLog()
        let run = SourceRun(input: Self.walk, recorder: session, detect: Self.everyFrame, events: { log.record($0) })
        let stats = try run.run()
        let probe = try Probe(Self.walk)
        #expect(stats.processed == probe.frames && log.times.count == probe.frames)
        #expect(log.stateLog == [.opening, .running, .finished])
        let clips = try album.clips()
        #expect(clips.count == 1 && clips.first?.frames == probe.frames && clips.first?.incomplete == false)
        #expect(try Probe(directory.appendingPathComponent(try #require(clips.first).clip).path).frames == probe.frames)
    }

    @Test func realTimePacingDeliversAFileAtItsOwnSpeed() throws {
        var options = SourceRun.Options()
        options.pipeline.realTime = true
        let log = RunLog()
        let run = SourceRun(input: Self.walk, options: options, recorder: nil, detect: { _ in [] }, events: { log.record($0) })
        try run.run()
        let probe = try Probe(Self.walk)
        let decoded = log.decodeTimes
        let first = try #require(decoded.first), last = try #require(decoded.last)
        let times = log.times
        // Frames reach the detector no sooner than their timestamps say (50 ms of slack for the clock).
        #expect(last.timeIntervalSince(first) >= (times.last ?? 0) - (times.first ?? 0) - 0.05,
                "\(last.timeIntervalSince(first)) s for \(times.last ?? 0) s of video")
        #expect(times.count <= probe.frames && times.count > probe.frames / 2, "\(times.count) of \(probe.frames) frames")
    }

    @Test func aLoopedFileKeepsItsClockRunningUntilStopped() throws {
        let log = RunLog()
        let run = SourceRun(input: Self.walk, options: .init(loop: true), recorder: nil, detect: { _ in [] }, events: { log.record($0) })
        let stop = run.stopRequested
        let probe = try Probe(Self.walk)
        // Stop once the second pass has begun.
        DispatchQueue.global().async {
            while log.times.count < probe.frames + 10 { usleep(10_000) }
            stop.set()
        }
        let stats = try run.run()
        let times = log.times
        #expect(stats.processed > probe.frames)
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 }, "frame times increase across the loop")
        #expect(log.stateLog.last == .stopped)
    }

    @Test func aMissingInputFailsWithTheReadersError() throws {
        let log = RunLog()
        let run = SourceRun(input: "/nonexistent/video.mp4", recorder: nil, detect: { _ in [] }, events: { log.record($0) })
        #expect(throws: MediaError.self) { try run.run() }
        #expect(log.stateLog == [.opening, .failed])
    }

    /// A live stream (ffmpeg serving MPEG-TS on 127.0.0.1) killed mid-clip: the clip is finished and
    /// indexed with every frame ffprobe finds in it, and the run reconnects when the stream returns.
    @Test func aLiveStreamThatDiesMidClipIsFinishedAndReconnectedWhenItReturns() throws {
        let directory = try temporaryDirectory("source-reconnect")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = Int.random(in: 20_000...40_000)
        @Sendable func serve() throws -> Process {
            let server = Process()
            server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            server.arguments = ["ffmpeg", "-v", "error", "-re", "-stream_loop", "-1", "-i", Self.walk, "-c", "copy", "-f", "mpegts",
                                "tcp://127.0.0.1:\(port)?listen=1"]
            try server.run()
            return server
        }
        let first = try serve()
        defer { first.terminate() }
        Thread.sleep(forTimeInterval: 0.5)
        let album = try Album(directory: directory)
        let session = try ClipSession(album: album, source: "tcp", options: .init(frameRate: 30), events: { _ in })
        var options = SourceRun.Options(reconnect: true, maxBackoff: 1, reader: .init(openTimeout: 3, readTimeout: 2))
        options.pipeline.live = true
        let log = RunLog()
        let run = SourceRun(input: "tcp://127.0.0.1:\(port)", options: options, recorder: session, detect: Self.everyFrame,
                            events: { log.record($0) })
        let stop = run.stopRequested
        let outcome = MessageLog()
        let second = ProcessBox()
        defer { second.process?.terminate() }
        // The stream's life, on another thread, while this one runs the source.
        Thread.detachNewThread {
            func waitFor(_ what: String, _ condition: () -> Bool) {
                let deadline = Date().addingTimeInterval(20)
                while !condition() && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
                if !condition() { outcome.add("timed out waiting for \(what)") }
            }
            waitFor("frames") { log.times.count > 20 }
            kill(first.processIdentifier, SIGKILL)
            first.waitUntilExit()
            waitFor("the clip to be indexed") { ((try? album.clips().count) ?? 0) == 1 }
            let dead = log.times.count
            do { second.process = try serve() } catch { outcome.add("\(error)") }
            waitFor("frames after reconnecting") { log.times.count > dead + 20 }
            stop.set()
        }
        try run.run()
        #expect(outcome.messages.isEmpty, "\(outcome.messages)")
        let states = log.stateLog
        let reconnecting = try #require(states.firstIndex(of: .reconnecting), "\(states)")
        #expect(states[reconnecting...].contains(.running) && states.last == .stopped, "\(states)")
        let clips = try album.clips()
        #expect(clips.count == 2 && clips.allSatisfy { !$0.incomplete }, "\(clips)")
        for clip in clips {
            #expect(try Probe(directory.appendingPathComponent(clip.clip).path).frames == clip.frames)
        }
    }

    /// A camera that is down when the run starts is waited for (`waiting`, then `running` once it
    /// answers), and a stop during the wait ends the run at once.
    @Test func aLiveSourceThatIsDownAtStartIsWaitedForAndAStopEndsTheWait() throws {
        let port = Int.random(in: 20_000...40_000)
        var options = SourceRun.Options(reconnect: true, maxBackoff: 1, reader: .init(openTimeout: 3, readTimeout: 2))
        options.pipeline.live = true
        let log = RunLog()
        let run = SourceRun(input: "tcp://127.0.0.1:\(port)", options: options, recorder: nil, detect: Self.everyFrame,
                            events: { log.record($0) })
        let stop = run.stopRequested
        let server = ProcessBox()
        defer { server.process?.terminate() }
        let outcome = MessageLog()
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 2.5)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["ffmpeg", "-v", "error", "-re", "-stream_loop", "-1", "-i", Self.walk, "-c", "copy", "-f", "mpegts",
                                 "tcp://127.0.0.1:\(port)?listen=1"]
            do { try process.run() } catch { outcome.add("\(error)") }
            server.process = process
            let deadline = Date().addingTimeInterval(20)
            while log.times.count < 10 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            if log.times.count < 10 { outcome.add("no frames after the stream started") }
            stop.set()
        }
        try run.run()
        #expect(outcome.messages.isEmpty, "\(outcome.messages)")
        let states = log.stateLog
        let waiting = try #require(states.firstIndex(of: .waiting), "\(states)")
        #expect(states[waiting...].contains(.running) && states.last == .stopped, "\(states)")

        // Stopped while waiting for a source that never comes: back within a second.
        let idle = SourceRun(input: "tcp://127.0.0.1:\(port + 1)", options: options, recorder: nil, detect: Self.everyFrame)
        let idleStop = idle.stopRequested
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 1.5)
            idleStop.set()
        }
        let started = ContinuousClock.now
        try idle.run()
        #expect(started.duration(to: .now) < .seconds(2.6), "\(started.duration(to: .now))")
    }
}
