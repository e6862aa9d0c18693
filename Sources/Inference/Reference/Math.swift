internal import CKernels
import Foundation
import TFLiteFormat

/// CAST between float32, int32, int64, int16, uint8, int8 and bool, as C++'s `static_cast`
/// (floats truncated toward zero, bool as 0 or 1, anything non-zero to true).
final class Cast: Kernel {
    let input, output: Int
    let count: Int
    let from, to: TensorType
    static let types: Set<TensorType> = [.float32, .int32, .int64, .int16, .uint8, .int8, .bool]

    init(_ ctx: PrepareContext) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        (from, to) = (ctx.type(input), ctx.type(output))
        guard Self.types.contains(from), Self.types.contains(to) else { throw ctx.unsupported() }
        try ctx.setShape(output, ctx.shape(input))
        count = ctx.shape(input).reduce(1, *)
    }

    func run(_ memory: TensorMemory) {
        let source = memory.raw(input), target = memory.raw(output)
        for i in 0..<count {
            // Every value of these types is exact in a Double.
            let value: Double
            switch from {
            case .float32: value = Double(source.load(fromByteOffset: 4 * i, as: Float.self))
            case .int32: value = Double(source.load(fromByteOffset: 4 * i, as: Int32.self))
            case .int64: value = Double(source.load(fromByteOffset: 8 * i, as: Int64.self))
            case .int16: value = Double(source.load(fromByteOffset: 2 * i, as: Int16.self))
            case .uint8: value = Double(source.load(fromByteOffset: i, as: UInt8.self))
            case .int8: value = Double(source.load(fromByteOffset: i, as: Int8.self))
            default: value = source.load(fromByteOffset: i, as: UInt8.self) != 0 ? 1 : 0
            }
            // Out-of-range conversions are undefined in C++; here they wrap like the integer bits.
            let integer = value.isFinite ? Int64(max(min(value.rounded(.towardZero), 9.2e18), -9.2e18)) : 0
            switch to {
            case .float32: target.storeBytes(of: Float(value), toByteOffset: 4 * i, as: Float.self)
            case .int32: target.storeBytes(of: Int32(truncatingIfNeeded: integer), toByteOffset: 4 * i, as: Int32.self)
            case .int64: target.storeBytes(of: integer, toByteOffset: 8 * i, as: Int64.self)
            case .int16: target.storeBytes(of: Int16(truncatingIfNeeded: integer), toByteOffset: 2 * i, as: Int16.self)
            case .uint8: target.storeBytes(of: UInt8(truncatingIfNeeded: integer), toByteOffset: i, as: UInt8.self)
            case .int8: target.storeBytes(of: Int8(truncatingIfNeeded: integer), toByteOffset: i, as: Int8.self)
            default: target.storeBytes(of: value != 0 ? UInt8(1) : 0, toByteOffset: i, as: UInt8.self)
            }
        }
    }
}

/// MINIMUM and MAXIMUM with broadcasting: float32, int32, and 8-bit inputs sharing the output's
/// quantization (compared as stored, as LiteRT does).
final class MinimumMaximum: Kernel {
    let left, right, output: Int
    let broadcast: Broadcast
    let count: Int
    let maximum: Bool
    let type: TensorType

    init(_ ctx: PrepareContext, maximum: Bool) throws {
        left = ctx.input(0)
        right = ctx.input(1)
        output = ctx.output(0)
        type = ctx.type(output)
        guard [.float32, .int32, .uint8, .int8].contains(type), ctx.type(left) == type, ctx.type(right) == type else { throw ctx.unsupported() }
        if type == .uint8 || type == .int8 {
            let o = try ctx.quantized(output)
            for input in [left, right] {
                let q = try ctx.quantized(input)
                guard q.scale == o.scale, q.zeroPoint == o.zeroPoint else { throw ctx.fail("8-bit inputs must share the output's scale and zero point") }
            }
        }
        broadcast = try Broadcast(binary: ctx)
        count = broadcast.outputShape.reduce(1, *)
        self.maximum = maximum
    }

    func run(_ memory: TensorMemory) {
        switch type {
        case .float32: apply(Float.self, memory)
        case .int32: apply(Int32.self, memory)
        case .uint8: apply(UInt8.self, memory)
        default: apply(Int8.self, memory)
        }
    }

    private func apply<T: Comparable>(_: T.Type, _ memory: TensorMemory) {
        let a = memory.typed(left, T.self), b = memory.typed(right, T.self), dst = memory.typed(output, T.self)
        for i in 0..<count {
            let x = a[broadcast.left(i)], y = b[broadcast.right(i)]
            dst[i] = maximum ? max(x, y) : min(x, y)
        }
    }
}

/// PRELU on float32: x where x >= 0, alpha * x elsewhere, alpha broadcast against x.
final class PRelu: Kernel {
    let input, alpha, output: Int
    let broadcast: Broadcast
    let count: Int

    init(_ ctx: PrepareContext) throws {
        input = ctx.input(0)
        alpha = ctx.input(1)
        output = ctx.output(0)
        guard ctx.type(input) == .float32, ctx.type(alpha) == .float32, ctx.type(output) == .float32 else { throw ctx.unsupported() }
        broadcast = try Broadcast(binary: ctx)
        count = broadcast.outputShape.reduce(1, *)
    }

    func run(_ memory: TensorMemory) {
        let x = memory.typed(input, Float.self), a = memory.typed(alpha, Float.self), dst = memory.typed(output, Float.self)
        for i in 0..<count {
            let value = x[broadcast.left(i)]
            dst[i] = value >= 0 ? value : value * a[broadcast.right(i)]
        }
    }
}

/// MEAN and SUM on float32 over constant axes (keep_dims or not): each output element sums its
/// inputs in order in float, as TFLite's reference `ReduceGeneric`; MEAN divides once at the end.
final class Reduce: Kernel {
    /// Input elements a MEAN or SUM may cover (its index table takes 4 bytes each): 2^27, over
    /// 100 times a 640x640 RGB picture.
    static let maxElements = 1 << 27
    let input, output: Int
    let mean: Bool
    /// For each input element, the output element it adds to.
    let targets: [Int32]
    let outputCount: Int
    let divisor: Float

    init(_ ctx: PrepareContext, mean: Bool, keepDims: Bool) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        self.mean = mean
        guard ctx.type(input) == .float32, ctx.type(output) == .float32 else { throw ctx.unsupported() }
        guard ctx.isConstant(ctx.input(1)) else { throw ctx.fail("the axes must be constant") }
        let shape = ctx.shape(input)
        let axes = Set(try ctx.integers(input: 1).map { try resolvedAxis(ctx, $0, rank: shape.count) })
        let kept = shape.enumerated().map { axes.contains($0.offset) ? 1 : $0.element }
        try ctx.setShape(output, keepDims ? kept : shape.enumerated().filter { !axes.contains($0.offset) }.map(\.element))
        outputCount = kept.reduce(1, *)
        divisor = Float(axes.map { shape[$0] }.reduce(1, *))
        // Output element of every input element (kept axes index, reduced axes 0): a table as
        // long as the input, so its length is checked before it is allocated.
        let total = shape.reduce(1, *)
        guard total <= Self.maxElements else {
            throw ctx.fail("reduces \(total) elements; Spotter prepares at most \(Self.maxElements)")
        }
        guard !ctx.isCheckingOnly else {
            targets = []
            return
        }
        let reduced = shape.indices.map(axes.contains)
        var targets = [Int32](repeating: 0, count: total)
        var index = [Int](repeating: 0, count: shape.count)
        for flat in 0..<total {
            var offset = 0
            for d in shape.indices { offset = offset * kept[d] + (reduced[d] ? 0 : index[d]) }
            targets[flat] = Int32(offset)
            var d = shape.count - 1
            while d >= 0 {
                index[d] += 1
                if index[d] < shape[d] { break }
                index[d] = 0
                d -= 1
            }
        }
        self.targets = targets
    }

    func run(_ memory: TensorMemory) {
        let src = memory.typed(input, Float.self), dst = memory.typed(output, Float.self)
        for i in 0..<outputCount { dst[i] = 0 }
        for (i, target) in targets.enumerated() { dst[Int(target)] += src[i] }
        if mean { for i in 0..<outputCount { dst[i] /= divisor } }
    }
}

/// `rows` x `columns` 8-bit values (row-major), written transposed as int16 less `zero`: weights held
/// [N][K] laid out [K][N], as ``spotter_matmul_rows_s8`` reads its right-hand side.
func widenTransposed<T: FixedWidthInteger>(_ source: UnsafePointer<T>, rows: Int, columns: Int, zero: Int32,
                                           into target: UnsafeMutablePointer<Int16>) {
    for j in 0..<rows {
        for p in 0..<columns { target[p * rows + j] = Int16(truncatingIfNeeded: Int32(source[j * columns + p]) - zero) }
    }
}

/// BATCH_MATMUL on float32 and int8 (per-tensor, zero points on both sides): `[..., M, K] x
/// [..., K, N]` (either side transposed by adj_x / adj_y), batch dimensions broadcast. A is read in
/// place in either layout; B is laid out as [K][N] (int8: as int16 less its zero point), so each
/// output row is a sum of B's rows scaled by A's values (``spotter_matmul_rows_s8``: exact int32
/// sums; floats summed over K in order). Output rows are independent: the fast path splits them
/// across its threads.
final class BatchMatMul: RowKernel {
    let left, right, output: Int
    let m, k, n: Int
    let adjointX, adjointY: Bool
    let batches: Broadcast
    let type: TensorType
    /// int8: the zero points of both sides and the output's requantization.
    let leftZero, rightZero: Int32
    let requant: Requantization?
    /// Batches of B before broadcasting.
    private let rightBatches: Int
    /// B as [batch][K][N], made by `prepare`: int16 less its zero point (int8), or floats when the
    /// file holds B as [N][K] (adj_y); empty when B is read in place.
    private var rightInt16: [Int16] = []
    private var rightFloat: [Float] = []

    init(_ ctx: PrepareContext, adjointX: Bool, adjointY: Bool) throws {
        left = ctx.input(0)
        right = ctx.input(1)
        output = ctx.output(0)
        let type = ctx.type(left)
        self.type = type
        guard [.float32, .int8].contains(type), [left, right, output].allSatisfy({ ctx.type($0) == type }) else { throw ctx.unsupported() }
        let a = ctx.shape(left), b = ctx.shape(right)
        guard a.count >= 2, b.count >= 2 else { throw ctx.fail("inputs \(a) and \(b) need rank 2 or more") }
        let (am, ak) = adjointX ? (a[a.count - 1], a[a.count - 2]) : (a[a.count - 2], a[a.count - 1])
        let (bk, bn) = adjointY ? (b[b.count - 1], b[b.count - 2]) : (b[b.count - 2], b[b.count - 1])
        guard ak == bk else { throw ctx.fail("inner dimensions \(ak) and \(bk) differ (\(a) x \(b))") }
        (m, k, n, self.adjointX, self.adjointY) = (am, ak, bn, adjointX, adjointY)
        guard k < 1 << 15 else { throw ctx.fail("inner dimension \(k) is beyond the 32,767 an exact int32 sum allows") }
        // The output's shape is checked before the batch tables are made (only to run).
        let (aBatch, bBatch) = (Array(a.dropLast(2)), Array(b.dropLast(2)))
        let checked = try Broadcast(checking: ctx, aBatch, bBatch)
        try ctx.setShape(output, checked.outputShape + [m, n])
        batches = ctx.isCheckingOnly ? checked : try Broadcast(tables: ctx, aBatch, bBatch)
        rightBatches = b.dropLast(2).reduce(1, *)
        if type == .int8 {
            let (leftScale, leftZero) = try ctx.quantized(left), (rightScale, rightZero) = try ctx.quantized(right)
            let (outputScale, outputZero) = try ctx.quantized(output)
            guard ctx.quantization(left)?.scales.count == 1, ctx.quantization(right)?.scales.count == 1 else {
                throw ctx.fail("8-bit inputs need one scale each (per-tensor quantization)")
            }
            let range = FixedPoint.activationRange(.none, scale: outputScale, zeroPoint: outputZero, type: .int8)
            requant = Requantization(multipliers: [FixedPoint.Multiplier(Double(leftScale) * Double(rightScale) / Double(outputScale))],
                                     outputZeroPoint: outputZero, min: range.min, max: range.max)
            (self.leftZero, self.rightZero) = (leftZero, rightZero)
        } else {
            (requant, leftZero, rightZero) = (nil, 0, 0)
        }
        // The copy of B is checked before it is allocated (a file's shapes can claim anything).
        guard rightBatches * k * n <= 1 << 27 else { throw ctx.fail("B of \(rightBatches * k * n) elements is beyond the 2^27 Spotter lays out") }
        if !ctx.isCheckingOnly {
            if type == .int8 { rightInt16 = [Int16](repeating: 0, count: rightBatches * k * n) }
            else if adjointY { rightFloat = [Float](repeating: 0, count: rightBatches * k * n) }
        }
    }

    var rowCount: Int { batches.outputShape.reduce(1, *) * m }

    func run(_ memory: TensorMemory) {
        prepare(memory)
        run(memory, rows: 0..<rowCount)
    }

    /// B as [batch][K][N]: int8 widened less its zero point, floats transposed when stored [N][K].
    func prepare(_ memory: TensorMemory) {
        let size = k * n
        if type == .int8 {
            let src = memory.typed(right, Int8.self), zero = rightZero
            rightInt16.withUnsafeMutableBufferPointer { dst in
                for batch in 0..<rightBatches {
                    let s = src + batch * size, d = dst.baseAddress! + batch * size
                    if adjointY {
                        widenTransposed(s, rows: n, columns: k, zero: zero, into: d)
                    } else {
                        for index in 0..<size { d[index] = Int16(truncatingIfNeeded: Int32(s[index]) - zero) }
                    }
                }
            }
        } else if adjointY {
            let src = memory.typed(right, Float.self)
            rightFloat.withUnsafeMutableBufferPointer { dst in
                for batch in 0..<rightBatches {
                    let s = src + batch * size, d = dst.baseAddress! + batch * size
                    for j in 0..<n { for p in 0..<k { d[p * n + j] = s[j * k + p] } }
                }
            }
        }
    }

    func run(_ memory: TensorMemory, rows range: Range<Int>) {
        // A(i, p) in place: rows of K, or (adj_x) columns of M.
        let (aRow, aColumn) = adjointX ? (1, m) : (k, 1)
        if let requant {
            let a = memory.typed(left, Int8.self), dst = memory.typed(output, Int8.self)
            rightInt16.withUnsafeBufferPointer { b in
                withUnsafeTemporaryAllocation(of: Int32.self, capacity: n) { sums in
                    for row in range {
                        let batch = row / m, i = row % m
                        spotter_matmul_rows_s8(a + batches.left(batch) * m * k + i * aRow, aRow, aColumn, leftZero,
                                               b.baseAddress! + batches.right(batch) * k * n, sums.baseAddress!, 1, n, k)
                        for j in 0..<n {
                            let value = FixedPoint.multiply(sums[j], requant.multipliers[0]) &+ requant.outputZeroPoint
                            dst[row * n + j] = Int8(truncatingIfNeeded: min(max(value, requant.min), requant.max))
                        }
                    }
                }
            }
        } else {
            let a = memory.typed(left, Float.self), dst = memory.typed(output, Float.self)
            rightFloat.withUnsafeBufferPointer { prepared in
                let b = adjointY ? prepared.baseAddress! : UnsafePointer(memory.typed(right, Float.self))
                for row in range {
                    let batch = row / m, i = row % m
                    spotter_matmul_rows_f32(a + batches.left(batch) * m * k + i * aRow, aRow, aColumn,
                                            b + batches.right(batch) * k * n, dst + row * n, 1, n, k)
                }
            }
        }
    }
}
