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
}
