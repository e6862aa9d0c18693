internal import CXNNPACK

/// The reference SOFTMAX with its rows split across the thread pool (for types Debian's XNNPACK
/// lacks, int8: YOLOv8's distribution-focal softmax over 33,600 rows of 16).
final class PooledSoftmax: Kernel {
    private let softmax: Softmax
    private let rows: Int
    private let pool: ThreadPool

    init(_ softmax: Softmax, rows: Int, pool: ThreadPool) {
        self.softmax = softmax
        self.rows = rows
        self.pool = pool
    }

    private struct Job {
        let softmax: Softmax
        let memory: TensorMemory
    }

    func run(_ memory: TensorMemory) {
        var job = Job(softmax: softmax, memory: memory)
        withUnsafeMutablePointer(to: &job) { job in
            pthreadpool_parallelize_1d_tile_1d(pool.active, { context, start, count in
                let job = context!.assumingMemoryBound(to: Job.self).pointee
                job.softmax.run(job.memory, rows: start..<start + count)
            }, job, rows, 1024, 0)
        }
    }
}
