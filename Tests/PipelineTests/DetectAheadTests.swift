import Detection
import Foundation
import Imaging
import Media
import Pipeline
import Synchronization
import Testing
import TestSupport

/// A file's frames detected ahead on several threads (``DetectAhead``) reach the analysis in frame
/// order with their own detections, whatever order the threads finish in; a failure stops the run
/// with frames before it consumed, and nothing waits forever.
@Suite struct DetectAheadTests {
    /// 60 frames of ffmpeg's test pattern (a moving picture and a frame counter), made by the CLI.
    static let video: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-ahead-\(UUID().uuidString.prefix(8)).mp4").path
        _ = try? run("ffmpeg", ["-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=25", "-frames:v", "60",
                                "-c:v", "libx264", "-pix_fmt", "yuv420p", path])
        return path
    }()

    /// A detection that depends on every pixel of the picture (so each frame's is its own), found
    /// after a random pause (so threads finish out of order).
    static func fingerprint(_ image: Image) -> [Detection] {
        usleep(UInt32.random(in: 0...4000))
        var sum: UInt64 = 0
        for (index, byte) in image.data.enumerated() { sum = sum &+ UInt64(byte) &* UInt64(index % 251 + 1) }
        let box = Rect(minX: Double(sum % 97), minY: Double(sum % 89), maxX: 100 + Double(sum % 83), maxY: 100 + Double(sum % 79))
        return [Detection(classIndex: Int(sum % 80), label: "sum \(sum)", score: 0.5, box: box, normalizedBox: box)]
    }

    /// Runs the video, collecting what is consumed, in consume order.
    static func consumed(ahead: DetectAhead?, consumeFails: Int? = nil) throws -> (frames: [(index: Int, label: String?)], error: Error?) {
        let reader = try VideoReader(path: video)
        var options = FramePipeline.Options()
        options.detectAhead = ahead
        let seen = Mutex<[(index: Int, label: String?)]>([])
        do {
            _ = try FramePipeline(reader: reader, options: options).run(detect: { fingerprint($0.image) }, consume: { item in
                let count = seen.withLock { seen in
                    seen.append((item.frame.index, item.detections?.first?.label))
                    return seen.count
                }
                if let consumeFails, count == consumeFails { throw CancellationError() }
            }, progress: { _ in })
        } catch {
            return (seen.withLock { $0 }, error)
        }
        return (seen.withLock { $0 }, nil)
    }

    @Test func framesDetectedAheadArriveInOrderWithTheirOwnDetections() throws {
        let inline = try Self.consumed(ahead: nil)
        #expect(inline.error == nil && inline.frames.count == 60)
        for threads in [2, 3] {
            let ahead = try Self.consumed(ahead: DetectAhead(threads: threads, detect: { Self.fingerprint($0) }))
            #expect(ahead.error == nil)
            #expect(ahead.frames.map(\.index) == inline.frames.map(\.index), "\(threads) threads: frames out of order")
            #expect(ahead.frames.map(\.label) == inline.frames.map(\.label), "\(threads) threads: detections of other frames")
        }
    }

    @Test func aFailedDetectionStopsTheRunAfterTheFramesBeforeIt() throws {
        struct Broken: Error {}
        let calls = Mutex(0)
        let ahead = DetectAhead(threads: 2) { image in
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            if call == 20 { throw Broken() }
            return Self.fingerprint(image)
        }
        let result = try Self.consumed(ahead: ahead)
        #expect(result.error is Broken)
        // The frames before the one whose detection failed (the 20th call: frame 18, 19 or 20 as
        // the threads took them), in order, and none after it.
        #expect(result.frames.first?.index == 0 && zip(result.frames.dropFirst(), result.frames).allSatisfy { $0.index == $1.index + 1 })
        #expect((15...20).contains(result.frames.count), "\(result.frames.count) frames consumed")
    }

    @Test func aFailingConsumerStopsDetectionAheadWithoutWaitingForever() throws {
        let result = try Self.consumed(ahead: DetectAhead(threads: 2, detect: { Self.fingerprint($0) }), consumeFails: 5)
        #expect(result.error is CancellationError)
        #expect(result.frames.count == 5)
    }
}
