internal import CKernels
import Foundation

/// The processors this process may actually use.
public enum Processors {
    /// Cores in the process's CPU affinity mask, lowered to a cgroup CPU quota (`cpu.max` of cgroup
    /// v2, `cpu.cfs_quota_us` of v1) rounded up; at least 1. Containers and `taskset` make this
    /// smaller than the machine's core count, and more threads than this only wait for each other.
    public static let available: Int = {
        var count = ProcessInfo.processInfo.activeProcessorCount
        let affinity = Int(spotter_affinity_cpu_count())
        if affinity > 0 { count = min(count, affinity) }
        if let quota = cgroupQuota() { count = min(count, quota) }
        return max(1, count)
    }()

    /// Whole cores allowed by the cgroup CPU quota, nil without one.
    static func cgroupQuota() -> Int? {
        func read(_ path: String) -> [Double]? {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
            return text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { Double($0) ?? -1 }
        }
        // cgroup v2: "max 100000" or "200000 100000".
        if let fields = read("/sys/fs/cgroup/cpu.max"), fields.count == 2, fields[0] > 0, fields[1] > 0 {
            return max(1, Int((fields[0] / fields[1]).rounded(.up)))
        }
        if let quota = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")?.first, let period = read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")?.first,
           quota > 0, period > 0 {
            return max(1, Int((quota / period).rounded(.up)))
        }
        return nil
    }
}

/// Instruction sets of this CPU that Spotter's own kernels need, read once per process.
enum CPU {
    /// AVX-512F (and the OS saving its registers).
    static let hasAVX512F = spotter_has_avx512f() != 0
}

/// Process-wide memory settings.
public enum HeapTuning {
    /// Keeps long runs from growing by fragmentation (glibc): two heaps serve all threads, and
    /// every 30 s the free pages inside them go back to the system. Call at start-up; later calls
    /// do nothing (one trimming thread per process).
    public static func keepCompact() { _ = started }

    private static let started: Void = {
        spotter_keep_heap_compact()
        let trimmer = Thread {
            while true {
                Thread.sleep(forTimeInterval: 30)
                spotter_release_free_memory()
            }
        }
        trimmer.name = "spotter.heap-trim"
        trimmer.start()
    }()
}
