internal import CXNNPACK

/// A reference kernel whose output is made of independent rows.
protocol RowKernel: Kernel {
    var rowCount: Int { get }
    /// Work every row needs, done once before the rows (default: none).
    func prepare(_ memory: TensorMemory)
    /// Computes rows `range` only.
    func run(_ memory: TensorMemory, rows range: Range<Int>)
}

extension RowKernel {
    func prepare(_ memory: TensorMemory) {}
}

/// A reference kernel's rows split across the thread pool, for operators Debian's XNNPACK lacks or
/// runs slowly: int8 SOFTMAX (YOLOv8's 33,600 rows of 16), 8-bit CONCATENATION, TRANSPOSE,
/// STRIDED_SLICE, SLICE and PAD.
final class PooledRows: Kernel {
    let kernel: RowKernel
    private let pool: ThreadPool
    /// Rows per task: about 16 KiB of output.
    private let tile: Int

    init(_ kernel: RowKernel, rowBytes: Int, pool: ThreadPool) {
        self.kernel = kernel
        self.pool = pool
        tile = max(1, 16384 / max(1, rowBytes))
    }

    /// The wrapped kernel's own answer: it keeps no copy of its constants either way.
    var readsConstantInputs: Bool { kernel.readsConstantInputs }

    private struct Job {
        let kernel: RowKernel
        let memory: TensorMemory
    }

    func run(_ memory: TensorMemory) {
        kernel.prepare(memory)
        var job = Job(kernel: kernel, memory: memory)
        withUnsafeMutablePointer(to: &job) { job in
            pthreadpool_parallelize_1d_tile_1d(pool.active, { context, start, count in
                let job = context!.assumingMemoryBound(to: Job.self).pointee
                job.kernel.run(job.memory, rows: start..<start + count)
            }, job, kernel.rowCount, tile, 0)
        }
    }
}
