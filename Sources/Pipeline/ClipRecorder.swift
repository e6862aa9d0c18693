/// Decides which frames go into which clip: a clip opens at the first frame with a match, keeps
/// every frame while `t - t(last match) <= postRoll` (video time), and the first frame past that
/// closes it; a later match opens a new clip. With a pre-roll, the frames of the `preRoll` seconds
/// before the opening match are kept in a bounded ring buffer and written first. Frames fed with
/// `hold` (an object seen but not yet confirmed) are kept too, so that a match that names an
/// earlier start (`since`: when its object was first seen) opens the clip there.
///
/// ```
///                 match (write pre-roll, then the frame)
///        ┌──────┐ ─────────────────────────────────────▶ ┌───────────┐
///  ─────▶│ idle │                                        │ recording │──┐ t - lastMatch <= postRoll:
///        └──────┘ ◀───────────────────────────────────── └───────────┘◀─┘ write (a match moves lastMatch)
///          │  ▲     t - lastMatch > postRoll: close,
///          └──┘     and reopen at once if this frame matches
///     no match: keep in the pre-roll buffer
/// ```
///
/// Generic over the frame payload so it can be tested with plain values. Not thread-safe.
public struct ClipRecorder<Payload> {
    public struct Policy: Sendable, Equatable {
        /// Seconds of video time kept after the last match. Default 5.
        public var postRoll: Double = 5
        /// Seconds of video time kept before the first match. Default 0.
        public var preRoll: Double = 0
        /// Most frames the pre-roll buffer holds, whatever the frame rate. Default 600.
        public var maxPreRollFrames: Int = 600

        public init(postRoll: Double = 5, preRoll: Double = 0, maxPreRollFrames: Int = 600) {
            self.postRoll = postRoll
            self.preRoll = preRoll
            self.maxPreRollFrames = maxPreRollFrames
        }
    }

    public enum Action {
        /// Start a new clip whose first frame is at `start` (source seconds).
        case open(start: Double)
        case write(Payload, time: Double)
        /// The current clip ends; its last frame was at `end`.
        case close(end: Double)
    }

    public let policy: Policy
    public private(set) var isRecording = false
    private var lastMatch = 0.0
    private var lastWritten = 0.0
    private var buffer: [(payload: Payload, time: Double)] = []
    /// The time of the first frame held since the last frame that was neither held nor matched.
    private var heldSince: Double?
    /// Tolerance so a frame exactly `postRoll` after the match is still written despite rounding.
    private let epsilon = 1e-9

    public init(policy: Policy = Policy()) {
        self.policy = policy
    }

    /// Feeds the next frame (times must not decrease) and returns what to do with it.
    ///
    /// - Parameters:
    ///   - hold: keep this frame (and the ones after it) in the buffer until a match or a frame
    ///     without `hold`, whatever the pre-roll.
    ///   - since: where a clip this match opens should start at the earliest (a held frame's time).
    public mutating func feed(_ payload: Payload, time: Double, matched: Bool, hold: Bool = false, since: Double? = nil) -> [Action] {
        var actions: [Action] = []
        if isRecording, time - lastMatch > policy.postRoll + epsilon {
            actions.append(.close(end: lastWritten))
            isRecording = false
        }
        if matched {
            lastMatch = time
            if !isRecording {
                isRecording = true
                let from = min(time - policy.preRoll, since ?? time)
                let preRoll = buffer.filter { $0.time >= from - epsilon }
                actions.append(.open(start: preRoll.first?.time ?? time))
                actions += preRoll.map { .write($0.payload, time: $0.time) }
                buffer.removeAll(keepingCapacity: true)
            }
            heldSince = nil
        } else if hold {
            if heldSince == nil { heldSince = time }
        } else {
            heldSince = nil
        }
        if isRecording {
            actions.append(.write(payload, time: time))
            lastWritten = time
        } else if policy.preRoll > 0 || heldSince != nil {
            buffer.append((payload, time))
            let keepFrom = min(time - policy.preRoll, heldSince ?? time)
            while let first = buffer.first, first.time < keepFrom - epsilon || buffer.count > policy.maxPreRollFrames {
                buffer.removeFirst()
            }
        } else if !buffer.isEmpty {
            buffer.removeAll(keepingCapacity: true)
        }
        return actions
    }

    /// Ends the stream: closes an open clip.
    public mutating func finish() -> [Action] {
        buffer.removeAll()
        guard isRecording else { return [] }
        isRecording = false
        return [.close(end: lastWritten)]
    }
}
