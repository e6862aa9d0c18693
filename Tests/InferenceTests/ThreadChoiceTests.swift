import Inference
import Testing

/// The adaptive choice between the thread pool and the calling thread, driven by a synthetic clock:
/// each test says how long a period takes on each way and reads back which way every invoke used.
@Suite struct ThreadChoiceTests {
    /// Runs `invokes` invokes whose periods take `period(pooled, index)` seconds; returns the ways used.
    static func ways(_ invokes: Int, period: (Bool, Int) -> Double) -> [Bool] {
        var choice = ThreadChoice()
        var now = ContinuousClock.now
        var used: [Bool] = []
        for index in 0..<invokes {
            let pooled = choice.startInvoke(at: now)
            used.append(pooled)
            now = now.advanced(by: .nanoseconds(Int64(period(pooled, index) * 1e9)))
        }
        return used
    }

    @Test func idleMachineKeepsThePoolWhenItIsFaster() {
        let used = Self.ways(200) { pooled, _ in pooled ? 0.004 : 0.007 }
        #expect(used.suffix(150).allSatisfy { $0 })
    }

    @Test func clearlySlowerPoolIsDroppedAtOnce() {
        let used = Self.ways(200) { pooled, _ in pooled ? 0.020 : 0.007 }
        #expect(used.filter { $0 }.count <= 2 * ThreadChoice.skippedAfterSwitch + 1)
        #expect(used.suffix(150).allSatisfy { !$0 })
    }

    /// A pool many times slower than the calling thread alone (a core taken by another program) is
    /// dropped on its first pooled period, without the periods skipped after a switch.
    @Test func hopelessPoolIsDroppedOnItsFirstPeriod() {
        let used = Self.ways(200) { pooled, _ in pooled ? 0.007 * (ThreadChoice.hopelessPool + 1) : 0.007 }
        #expect(used.filter { $0 }.count == 1)
        #expect(used.suffix(150).allSatisfy { !$0 })
    }

    /// Under a busy core the first pooled periods can look fast (the pipeline's queues still hold
    /// frames) and later ones lose to the calling thread alone, though by too little (under 1.5x the
    /// pool's own median) to start a new measurement: the kept pool is given up within its checked periods.
    @Test func poolThatLosesOverLaterPeriodsIsGivenUpBeforeTheHoldEnds() {
        var pooledSeen = 0
        let used = Self.ways(400) { pooled, _ in
            guard pooled else { return 0.007 }
            pooledSeen += 1
            return pooledSeen <= 2 * ThreadChoice.skippedAfterSwitch + ThreadChoice.samplesPerWay ? 0.006 : 0.0085
        }
        // Measuring (2 + 4 single, 2 + 4 pooled), then the pool is kept only for its checked periods.
        let firstSingleAfterPool = used.indices.first { $0 > 10 && used[$0 - 1] && !used[$0] }
        #expect(firstSingleAfterPool != nil)
        #expect((firstSingleAfterPool ?? .max) <= 2 * (ThreadChoice.skippedAfterSwitch + ThreadChoice.samplesPerWay) + ThreadChoice.checkedPooledPeriods + 1)
        // 400 periods of 7 ms are 2.8 s, within the 5 s hold: no new measurement, no pool again.
        #expect(used[(firstSingleAfterPool ?? 0)...].allSatisfy { !$0 })
    }
}
