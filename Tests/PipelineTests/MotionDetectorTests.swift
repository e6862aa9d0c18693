import Imaging
import Pipeline
import Testing

/// The motion detector on synthetic grey scenes whose motion is known by construction: sensor
/// noise is not motion, a walking block is (where it walks), the place it left settles, a lighting
/// change counts once, and masks hide what they cover.
@Suite struct MotionDetectorTests {
    /// A 320x200 grey scene: a gradient, deterministic noise of +-`noise` levels, and optionally a
    /// bright 30x60 block at `block`.
    static func scene(frame: Int, noise: Int = 3, block: (x: Int, y: Int)? = nil, offset: Int = 0) -> Image {
        var pixels = [UInt8](repeating: 0, count: 320 * 200)
        var seed = UInt32(truncatingIfNeeded: frame &* 2_654_435_761 &+ 1)
        for y in 0..<200 {
            for x in 0..<320 {
                seed = seed &* 1_664_525 &+ 1_013_904_223
                let jitter = Int(seed >> 24) % (2 * noise + 1) - noise
                var value = 60 + x / 4 + y / 5 + jitter + offset
                if let block, (block.x..<block.x + 30).contains(x), (block.y..<block.y + 60).contains(y) { value = 230 }
                pixels[y * 320 + x] = UInt8(clamping: value)
            }
        }
        return try! Image(width: 320, height: 200, format: .gray8, data: pixels)
    }

    @Test func sensorNoiseIsNotMotion() {
        var detector = MotionDetector()
        _ = detector.detect(in: Self.scene(frame: 0))
        let moving = (1..<100).filter { detector.detect(in: Self.scene(frame: $0)).hasMotion }
        #expect(moving.isEmpty, "motion in frames \(moving)")
    }

    @Test func aWalkingBlockIsMotionWhereItIsAndThePlaceItLeftSettles() throws {
        var detector = MotionDetector()
        for frame in 0..<30 { _ = detector.detect(in: Self.scene(frame: frame)) }
        for step in 0..<20 {
            let x = 20 + step * 12
            let result = detector.detect(in: Self.scene(frame: 30 + step, block: (x, 80)))
            #expect(result.hasMotion, "step \(step)")
            let covers = result.regions.contains { $0.minX <= Double(x + 15) && Double(x + 15) <= $0.maxX && $0.minY <= 110 && 110 <= $0.maxY }
            #expect(covers, "step \(step): \(result.regions)")
        }
        // It stops at the right edge and stays: within a second at 10 fps nothing moves any more,
        // neither where it stands nor where it walked.
        let moving = (0..<30).map { detector.detect(in: Self.scene(frame: 50 + $0, block: (280, 80))).hasMotion }
        let settledAt = try #require(moving.firstIndex(of: false), "\(moving)")
        #expect(settledAt <= 10 && !moving[settledAt...].contains(true), "\(moving)")
    }

    @Test func aLightingChangeCountsOnce() {
        var detector = MotionDetector()
        for frame in 0..<10 { _ = detector.detect(in: Self.scene(frame: frame)) }
        #expect(detector.detect(in: Self.scene(frame: 10, offset: 80)).hasMotion)
        let after = (11..<30).filter { detector.detect(in: Self.scene(frame: $0, offset: 80)).hasMotion }
        #expect(after.isEmpty, "motion after the change in frames \(after)")
    }

    @Test func aMaskHidesWhatItCovers() {
        var options = MotionDetector.Options()
        options.masks = [[Point(x: 0, y: 0), Point(x: 160, y: 0), Point(x: 160, y: 200), Point(x: 0, y: 200)]]
        var detector = MotionDetector(options: options)
        for frame in 0..<10 { _ = detector.detect(in: Self.scene(frame: frame)) }
        #expect(!detector.detect(in: Self.scene(frame: 10, block: (60, 60))).hasMotion, "a block under the mask")
        #expect(detector.detect(in: Self.scene(frame: 11, block: (220, 60))).hasMotion, "a block beside it")
    }
}
