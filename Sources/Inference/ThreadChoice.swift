/// Decides, from timed invokes, whether an interpreter's operators run on its thread pool or on the
/// calling thread alone.
///
/// On an idle machine the pool is faster. When another process keeps a core busy, every operator's
/// fork-join waits for a worker the scheduler has put aside, and one thread is several times
/// faster. So the choice is measured: a few invokes each way (interleaved), the faster way kept for
/// `holdSeconds`, then measured again; a run of invokes much slower than the kept way's best starts
/// a new measurement at once.
///
/// ```
///   measuring --(3 pooled + 3 single timed)--> holding(faster way)
///   holding --(holdSeconds passed, or 4 invokes > 1.5x its best)--> measuring
/// ```
struct ThreadChoice {
    static let samplesPerWay = 3
    static let holdSeconds = 3.0

    private var pooled: [Double] = []
    private var single: [Double] = []
    private var skipNext = true
    private var holding: (pooled: Bool, best: Double, since: ContinuousClock.Instant, slow: Int)?

    /// Whether the next invoke should use the pool.
    var usePool: Bool {
        if let holding { return holding.pooled }
        return pooled.count <= single.count
    }

    /// Records how long an invoke made the way `usePool` said took.
    mutating func record(seconds: Double, now: ContinuousClock.Instant) {
        if skipNext {
            // The first invoke after a switch wakes workers or warms caches: not representative.
            skipNext = false
            return
        }
        if var held = holding {
            held.slow = seconds > held.best * 1.5 ? held.slow + 1 : 0
            held.best = min(held.best, seconds)
            if held.slow >= 4 || now - held.since > .seconds(Self.holdSeconds) {
                holding = nil
                pooled.removeAll(keepingCapacity: true)
                single.removeAll(keepingCapacity: true)
                skipNext = true
            } else {
                holding = held
            }
            return
        }
        if usePool { pooled.append(seconds) } else { single.append(seconds) }
        guard pooled.count >= Self.samplesPerWay, single.count >= Self.samplesPerWay else { return }
        let pooledBest = pooled.min()!, singleBest = single.min()!
        let choosePool = pooledBest < singleBest * 0.95
        holding = (choosePool, choosePool ? pooledBest : singleBest, now, 0)
        skipNext = choosePool != usePool
    }
}
