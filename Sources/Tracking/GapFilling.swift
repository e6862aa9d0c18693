import Imaging

/// One box of one track in a numbered frame: a row of a tracking result.
public struct TrackedBox: Sendable, Equatable {
    public var frame: Int
    public var track: Int
    public var box: Rect
    public var score: Float
    /// Whether the box was filled in between two observations rather than detected.
    public var isFilled: Bool

    public init(frame: Int, track: Int, box: Rect, score: Float, isFilled: Bool = false) {
        self.frame = frame
        self.track = track
        self.box = box
        self.score = score
        self.isFilled = isFilled
    }
}

extension Array where Element == TrackedBox {
    /// The rows with each track's missed frames filled in: where a track is seen in frames a and b
    /// with 1 < b - a ≤ `maximumGap`, frames a+1 ..< b get the box (and score) on the straight line
    /// between its two observations. An offline step (it needs the frame after the gap); sorted by
    /// frame, then track.
    public func fillingGaps(upTo maximumGap: Int) -> [TrackedBox] {
        var byTrack: [Int: [TrackedBox]] = [:]
        for row in self { byTrack[row.track, default: []].append(row) }
        var filled = self
        for rows in byTrack.values {
            let sorted = rows.sorted { $0.frame < $1.frame }
            for (a, b) in zip(sorted, sorted.dropFirst()) where b.frame - a.frame > 1 && b.frame - a.frame <= maximumGap {
                let span = Double(b.frame - a.frame)
                for frame in (a.frame + 1)..<b.frame {
                    let t = Double(frame - a.frame) / span
                    func mix(_ x: Double, _ y: Double) -> Double { x + (y - x) * t }
                    let box = Rect(minX: mix(a.box.minX, b.box.minX), minY: mix(a.box.minY, b.box.minY),
                                   maxX: mix(a.box.maxX, b.box.maxX), maxY: mix(a.box.maxY, b.box.maxY))
                    filled.append(TrackedBox(frame: frame, track: a.track, box: box, score: Float(mix(Double(a.score), Double(b.score))), isFilled: true))
                }
            }
        }
        return filled.sorted { ($0.frame, $0.track) < ($1.frame, $1.track) }
    }
}
