import Detection
import Foundation
import Imaging
import Testing
import TestSupport

@Suite struct DetectorPoolTests {
    /// Threads and tasks hammer a pool of two detectors with four pictures at once: each answer
    /// is LiteRT's top detection for its own picture (a detector shared by two callers at once would
    /// mix their tensors up), and every call is counted.
    @Test func concurrentThreadsAndTasksEachGetTheirOwnPicturesDetections() async throws {
        let pool = try DetectorPool(modelPath: Fixtures.detectModel.path, count: 2, options: .init())
        let pictures = try ObjectDetectorTests.expected.map { try ObjectDetectorTests.picture($0.image) }
        let rounds = 3
        let failures = MessageLog()
        let group = DispatchGroup()
        for (index, expected) in ObjectDetectorTests.expected.enumerated() {
            let picture = pictures[index]
            DispatchQueue.global().async(group: group) {
                for _ in 0..<rounds {
                    do {
                        let result = try pool.withDetector { try $0.detect(picture) }
                        guard let top = result.detections.first(where: { $0.label == expected.label }),
                              abs(top.score - expected.score) <= 0.03, top.box.iou(expected.box) >= 0.9 else {
                            failures.add("\(expected.image): \(result.detections.map(\.label))")
                            continue
                        }
                    } catch {
                        failures.add("\(expected.image): \(error)")
                    }
                }
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for (index, expected) in ObjectDetectorTests.expected.enumerated() {
                let picture = pictures[index]
                tasks.addTask {
                    for _ in 0..<rounds {
                        let result = try await pool.withDetector { try $0.detect(picture) }
                        let top = try ObjectDetectorTests.top(result, expected.label)
                        #expect(abs(top.score - expected.score) <= 0.03 && top.box.iou(expected.box) >= 0.9, "\(expected.image)")
                    }
                }
            }
            try await tasks.waitForAll()
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { done.resume() } }
        #expect(failures.messages.isEmpty, "\(failures.messages)")
        #expect(pool.totals.calls == 2 * rounds * pictures.count)
    }
}
