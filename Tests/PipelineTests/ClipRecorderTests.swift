import Pipeline
import Testing

/// The recorder's state machine on scripted matches and synthetic timestamps.
@Suite struct ClipRecorderTests {
    /// Runs frames (time, matched) through a recorder; returns clips as (start, end, frame times).
    static func clips(_ frames: [(Double, Bool)], policy: ClipRecorder<Int>.Policy) -> [(start: Double, end: Double, times: [Double])] {
        var recorder = ClipRecorder<Int>(policy: policy)
        var clips: [(start: Double, end: Double, times: [Double])] = []
        var open: (start: Double, times: [Double])?
        func apply(_ actions: [ClipRecorder<Int>.Action]) {
            for action in actions {
                switch action {
                case .open(let start):
                    #expect(open == nil, "open while a clip is open")
                    open = (start, [])
                case .write(_, let time):
                    open?.times.append(time)
                case .close(let end):
                    if let current = open { clips.append((current.start, end, current.times)) }
                    open = nil
                }
            }
        }
        for (index, (time, matched)) in frames.enumerated() { apply(recorder.feed(index, time: time, matched: matched)) }
        apply(recorder.finish())
        return clips
    }

    static func frames(fps: Double, count: Int, matches: Set<Int>) -> [(Double, Bool)] {
        (0..<count).map { (Double($0) / fps, matches.contains($0)) }
    }

    @Test func clipSpansFirstMatchToPostRollAfterLastMatch() {
        // 10 fps, matches on frames 10...20; post-roll 1 s keeps frames up to 30 and closes at 31.
        let clips = Self.clips(Self.frames(fps: 10, count: 50, matches: Set(10...20)), policy: .init(postRoll: 1))
        #expect(clips.count == 1)
        #expect(clips[0].start == 1.0 && abs(clips[0].end - 3.0) < 1e-9)
        #expect(clips[0].times.count == 21)
    }

    @Test func laterMatchOpensANewClip() {
        let clips = Self.clips(Self.frames(fps: 10, count: 80, matches: [5, 40, 41]), policy: .init(postRoll: 1))
        #expect(clips.map(\.start) == [0.5, 4.0])
        #expect(clips.map(\.times.count) == [11, 12])
    }

    @Test func matchOnTheClosingFrameReopensAtOnce() {
        // Post-roll 1 s after frame 0 keeps frames up to t = 1.0; frame 11 (t = 1.1) closes the clip
        // and, being a match itself, opens the next one with it as the first frame.
        let clips = Self.clips(Self.frames(fps: 10, count: 15, matches: [0, 11]), policy: .init(postRoll: 1))
        #expect(clips.count == 2)
        #expect(clips[0].times.count == 11 && abs(clips[0].end - 1.0) < 1e-9)
        #expect(clips[1].start == 1.1 && clips[1].times.first == 1.1)
    }

    @Test func variableFrameRateUsesVideoTimeNotFrameCounts() {
        // Irregular timestamps: the clip ends by time, whatever the number of frames.
        let times: [Double] = [0, 0.05, 0.3, 0.31, 0.9, 1.2, 1.25, 2.6, 2.61, 3.0]
        let frames = times.enumerated().map { ($1, $0 == 1) }
        let clips = Self.clips(frames, policy: .init(postRoll: 1))
        #expect(clips.count == 1)
        #expect(clips[0].times == [0.05, 0.3, 0.31, 0.9])
    }

    @Test func gapLongerThanPostRollClosesBeforeTheNextFrame() {
        // A 10 s gap in the stream: the frame after it is past the post-roll and is not written.
        let frames: [(Double, Bool)] = [(0, true), (0.1, false), (10.1, false), (10.2, true)]
        let clips = Self.clips(frames, policy: .init(postRoll: 5))
        #expect(clips.count == 2)
        #expect(clips[0].times == [0, 0.1] && clips[1].times == [10.2])
    }

    @Test func preRollLongerThanTheVideoSoFarStartsAtTheFirstFrame() {
        let clips = Self.clips(Self.frames(fps: 10, count: 30, matches: [3]), policy: .init(postRoll: 0.5, preRoll: 10))
        #expect(clips.count == 1)
        #expect(clips[0].start == 0 && clips[0].times.first == 0)
        #expect(clips[0].times.count == 9)
    }

    @Test func preRollKeepsOnlyItsSeconds() {
        let clips = Self.clips(Self.frames(fps: 10, count: 60, matches: [40]), policy: .init(postRoll: 0.2, preRoll: 1))
        #expect(clips.count == 1)
        #expect(abs(clips[0].start - 3.0) < 1e-9)
        #expect(clips[0].times.count == 10 + 1 + 2)
    }

    @Test func preRollBufferIsBoundedInFrames() {
        // 1000 fps for 2 s with a 5 s pre-roll: the ring buffer keeps at most maxPreRollFrames.
        let frames = (0..<2000).map { (Double($0) / 1000, $0 == 1999) }
        let clips = Self.clips(frames, policy: .init(postRoll: 0, preRoll: 5, maxPreRollFrames: 100))
        #expect(clips.count == 1 && clips[0].times.count == 101)
    }

    @Test func openClipIsClosedAtTheEnd() {
        let clips = Self.clips(Self.frames(fps: 10, count: 20, matches: [15]), policy: .init(postRoll: 5))
        #expect(clips.count == 1 && abs(clips[0].end - 1.9) < 1e-9 && clips[0].times.count == 5)
    }
}
