/// Decides, from measured throughput, whether an interpreter's operators run on its thread pool or
/// on the calling thread alone.
///
/// On an idle machine the pool is faster. When another process keeps a core busy, every operator's
/// fork-join waits for a worker the scheduler has put aside, and one thread is faster. In a video
/// pipeline the pool's workers also take time from the decode and encode threads. So the choice is
/// measured by what the caller gets: the time from one invoke's start to the next's (inference plus
/// whatever the caller does between invokes), a few periods each way in two blocks (the first periods
/// after a switch are left out: the pool's workers take a while to wake or to fall asleep); the faster way is
/// kept for a while (5 s, doubling up to 40 s while measurements keep confirming it), then measured
/// again. A run of periods much slower than the kept way's median starts a new measurement at once.
/// A kept pool is also checked against the single median on its own later periods: under
/// contention a few pooled periods can look fast while the pipeline's queues still hold frames, and
/// the pool's waiting shows only once the decode and encode threads fall behind.
///
/// ```
///   measuring --(2 skipped + 4 single, 2 skipped + 4 pooled periods, or one pooled period
///                over 1.5x the single median; over 3x, the first pooled one, skipped or not)--> holding(faster way)
///   holding --(hold time passed, or 4 periods > 1.5x its median)--> measuring
///   holding(pool) --(median of its last 8 periods over the single median)--> holding(single)
/// ```
package struct ThreadChoice {
    package static let samplesPerWay = 4
    package static let skippedAfterSwitch = 2
    static let holdSeconds = (shortest: 5.0, longest: 40.0)
    /// Periods longer than this are pauses of the caller, not measurements.
    static let longestSample = 1.0
    /// A pooled period over this many single medians decides at once (see `record`).
    package static let hopelessPool = 3.0
    /// Periods of a kept pool whose median is compared with the single median.
    package static let checkedPooledPeriods = 8

    private var pooled: [Double] = []
    private var single: [Double] = []
    private var previous: (start: ContinuousClock.Instant, pooled: Bool)?
    private var holding: Hold?
    /// The way kept until the next measurement.
    private struct Hold {
        var pooled: Bool
        /// The kept way's median period when it was chosen.
        var typical: Double
        /// The single median of the same measurement.
        var singleTypical: Double
        var since: ContinuousClock.Instant
        /// Consecutive periods over 1.5x `typical`.
        var slow = 0
        /// The latest periods while the pool is kept (at most ``checkedPooledPeriods``).
        var recent: [Double] = []
    }
    private var lastChoice: Bool?
    private var skipped = 0
    private var hold = Self.holdSeconds.shortest

    /// Whether the invoke starting at `now` uses the pool; records the period since the last start.
    package init() {}

    package mutating func startInvoke(at now: ContinuousClock.Instant) -> Bool {
        if let previous {
            let period = (now - previous.start).components
            let seconds = Double(period.seconds) + Double(period.attoseconds) / 1e18
            if seconds < Self.longestSample { record(seconds, pooled: previous.pooled, now: now) }
        }
        let usePool = holding?.pooled ?? (single.count >= Self.samplesPerWay)
        previous = (now, usePool)
        return usePool
    }

    private mutating func record(_ seconds: Double, pooled wasPooled: Bool, now: ContinuousClock.Instant) {
        if var held = holding {
            held.slow = seconds > held.typical * 1.5 ? held.slow + 1 : 0
            if held.pooled {
                if held.recent.count == Self.checkedPooledPeriods { held.recent.removeFirst() }
                held.recent.append(seconds)
                if held.recent.count == Self.checkedPooledPeriods && Self.median(held.recent) > held.singleTypical {
                    // The pool loses over a longer run: keep the calling thread alone, for longer each time.
                    hold = lastChoice == false ? min(hold * 2, Self.holdSeconds.longest) : Self.holdSeconds.shortest
                    lastChoice = false
                    holding = Hold(pooled: false, typical: held.singleTypical, singleTypical: held.singleTypical, since: now)
                    return
                }
            }
            if held.slow >= 4 || now - held.since > .seconds(hold) {
                holding = nil
                pooled.removeAll(keepingCapacity: true)
                single.removeAll(keepingCapacity: true)
                skipped = 0
            } else {
                holding = held
            }
            return
        }
        // A pooled period many times the single median settles it at once, even among the periods
        // skipped after the switch: waking the workers costs far less, a core taken by another
        // program that much (and each such period costs several single ones).
        if wasPooled && single.count >= Self.samplesPerWay && seconds > Self.median(single) * Self.hopelessPool {
            settle(pooled: false, pooledTypical: seconds, singleTypical: Self.median(single), now: now)
            return
        }
        // Periods just after a switch (to single at the start of a measurement, to the pool after
        // the single block) show the previous way's workers, not this way.
        if skipped < Self.skippedAfterSwitch || (wasPooled && pooled.isEmpty && skipped < 2 * Self.skippedAfterSwitch) {
            skipped += 1
            return
        }
        if wasPooled { pooled.append(seconds) } else { single.append(seconds) }
        // A pooled period far slower than the single ones settles it at once: under contention
        // each such period costs several single ones.
        let clearlySlower = wasPooled && single.count >= Self.samplesPerWay && seconds > Self.median(single) * 1.5
        guard clearlySlower || (pooled.count >= Self.samplesPerWay && single.count >= Self.samplesPerWay) else { return }
        let pooledTypical = Self.median(pooled), singleTypical = Self.median(single)
        settle(pooled: !clearlySlower && pooledTypical < singleTypical * 0.95, pooledTypical: pooledTypical, singleTypical: singleTypical, now: now)
    }

    /// Keeps one way until the next measurement: for longer each time the same way wins.
    private mutating func settle(pooled choosePool: Bool, pooledTypical: Double, singleTypical: Double, now: ContinuousClock.Instant) {
        hold = choosePool == lastChoice ? min(hold * 2, Self.holdSeconds.longest) : Self.holdSeconds.shortest
        lastChoice = choosePool
        holding = Hold(pooled: choosePool, typical: choosePool ? pooledTypical : singleTypical, singleTypical: singleTypical, since: now)
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}
