import TFLiteFormat

/// NumPy-style broadcasting of two shapes: the output shape and, per output element, the
/// element offsets into each input (precomputed once, so running needs no index arithmetic).
struct Broadcast {
    let outputShape: [Int]
    let leftOffsets: [Int32]
    let rightOffsets: [Int32]
    let isElementwise: Bool

    /// Output elements a broadcast table may cover (two Int32 tables: 512 MiB at most). A file's
    /// shapes can claim anything, so the size is checked before the tables are allocated.
    static let maxTableElements = 1 << 26

    /// Without `tables` only the output shape is computed (the offsets stay empty: checking only).
    init(_ left: [Int], _ right: [Int], tables: Bool = true) throws {
        let rank = max(left.count, right.count)
        let a = Array(repeating: 1, count: rank - left.count) + left
        let b = Array(repeating: 1, count: rank - right.count) + right
        var shape: [Int] = []
        for (x, y) in zip(a, b) {
            guard x == y || x == 1 || y == 1 else { throw BroadcastError(left: left, right: right) }
            shape.append(x == 1 ? y : x)
        }
        outputShape = shape
        isElementwise = a == b
        guard !isElementwise else {
            (leftOffsets, rightOffsets) = ([], [])
            return
        }
        // Checked also when only checking, so that a model checked as runnable prepares.
        var total = 1
        for dimension in shape {
            let (product, overflow) = total.multipliedReportingOverflow(by: dimension)
            guard !overflow, dimension >= 0, product <= Self.maxTableElements else {
                throw BroadcastError(left: left, right: right, tooLarge: true)
            }
            total = product
        }
        guard tables else {
            (leftOffsets, rightOffsets) = ([], [])
            return
        }
        func strides(_ dims: [Int]) -> [Int] {
            var result = Array(repeating: 0, count: rank)
            var step = 1
            for i in stride(from: rank - 1, through: 0, by: -1) {
                result[i] = dims[i] == 1 ? 0 : step
                step *= dims[i]
            }
            return result
        }
        let sa = strides(a), sb = strides(b)
        var la = [Int32](repeating: 0, count: total), lb = [Int32](repeating: 0, count: total)
        // Walks the output in order, moving both offsets with the index (a pass over millions of
        // elements for the broadcasts of a PReLU-heavy face model).
        var index = Array(repeating: 0, count: rank)
        var oa = 0, ob = 0
        la.withUnsafeMutableBufferPointer { la in
            lb.withUnsafeMutableBufferPointer { lb in
                for flat in 0..<total {
                    la[flat] = Int32(oa)
                    lb[flat] = Int32(ob)
                    var d = rank - 1
                    while d >= 0 {
                        index[d] += 1
                        oa += sa[d]
                        ob += sb[d]
                        if index[d] < shape[d] { break }
                        oa -= sa[d] * shape[d]
                        ob -= sb[d] * shape[d]
                        index[d] = 0
                        d -= 1
                    }
                }
            }
        }
        leftOffsets = la
        rightOffsets = lb
    }

    @inline(__always) func left(_ i: Int) -> Int { isElementwise ? i : Int(leftOffsets[i]) }
    @inline(__always) func right(_ i: Int) -> Int { isElementwise ? i : Int(rightOffsets[i]) }
}

struct BroadcastError: Error {
    let left: [Int]
    let right: [Int]
    /// The shapes broadcast, to more elements than ``Broadcast/maxTableElements``.
    var tooLarge = false

    var reason: String {
        tooLarge ? "shapes \(left) and \(right) broadcast to more than the \(Broadcast.maxTableElements) elements Spotter indexes"
            : "shapes \(left) and \(right) do not broadcast"
    }
}

extension Broadcast {
    /// The broadcast of a binary operator's two inputs; sets the output's shape.
    init(binary ctx: PrepareContext) throws {
        let left = ctx.shape(ctx.input(0)), right = ctx.shape(ctx.input(1))
        // The output's shape is checked (setShape) before any table is made for it.
        let checked = try Self(checking: ctx, left, right)
        try ctx.setShape(ctx.output(0), checked.outputShape)
        self = ctx.isCheckingOnly ? checked : try Self(tables: ctx, left, right)
    }

    /// The output shape of `left` and `right`, without tables.
    init(checking ctx: PrepareContext, _ left: [Int], _ right: [Int]) throws {
        do { try self.init(left, right, tables: false) } catch let error as BroadcastError { throw ctx.fail(error.reason) }
    }

    /// The broadcast with its tables (their size checked first).
    init(tables ctx: PrepareContext, _ left: [Int], _ right: [Int]) throws {
        do { try self.init(left, right) } catch let error as BroadcastError { throw ctx.fail(error.reason) }
    }
}

/// ADD, SUB and MUL.
final class Arithmetic<T: FixedWidthInteger & BitwiseCopyable>: Kernel {
    enum Operation {
        case add, sub, mul

        init<U>(_ other: Arithmetic<U>.Operation) {
            switch other {
            case .add: self = .add
            case .sub: self = .sub
            case .mul: self = .mul
            }
        }
    }

    let operation: Operation
    let left, right, output: Int
    let broadcast: Broadcast
    let count: Int
    // Quantized parameters (TFLite's add.cc / mul.cc preparation).
    var leftOffset: Int32 = 0, rightOffset: Int32 = 0, outputOffset: Int32 = 0
    var leftMultiplier = FixedPoint.Multiplier(0), rightMultiplier = FixedPoint.Multiplier(0)
    var outputMultiplier = FixedPoint.Multiplier(0)
    var range: (min: Int32, max: Int32) = (0, 0)
    static var leftShift: Int32 { 20 }

    init(_ ctx: PrepareContext, operation: Operation, activation: FusedActivation) throws {
        self.operation = operation
        left = ctx.input(0)
        right = ctx.input(1)
        output = ctx.output(0)
        broadcast = try Broadcast(binary: ctx)
        count = broadcast.outputShape.reduce(1, *)
        let l = try ctx.quantized(left), r = try ctx.quantized(right), o = try ctx.quantized(output)
        leftOffset = -l.zeroPoint
        rightOffset = -r.zeroPoint
        outputOffset = o.zeroPoint
        range = FixedPoint.activationRange(activation, scale: o.scale, zeroPoint: o.zeroPoint, type: ctx.type(output))
        switch operation {
        case .add, .sub:
            let twiceMax = 2 * Double(max(l.scale, r.scale))
            leftMultiplier = FixedPoint.Multiplier(Double(l.scale) / twiceMax)
            rightMultiplier = FixedPoint.Multiplier(Double(r.scale) / twiceMax)
            outputMultiplier = FixedPoint.Multiplier(twiceMax / (Double(1 << Self.leftShift) * Double(o.scale)))
            // TFLite's 8-bit SUB is its ADD with the second input's multiplier negated (sub.cc).
            if operation == .sub { rightMultiplier.significand = -rightMultiplier.significand }
        case .mul:
            outputMultiplier = FixedPoint.Multiplier(Double(l.scale) * Double(r.scale) / Double(o.scale))
        }
    }

    // A generic class's methods are not specialized where the class is instantiated; these entry
    // points dispatch to code compiled for the concrete element type (4x faster).
    @_specialize(where T == Int8)
    @_specialize(where T == UInt8)
    func run(_ memory: TensorMemory) {
        let a = memory.typed(left, T.self), b = memory.typed(right, T.self), dst = memory.typed(output, T.self)
        for i in 0..<count {
            let x = Int32(a[broadcast.left(i)]) &+ leftOffset
            let y = Int32(b[broadcast.right(i)]) &+ rightOffset
            var value: Int32
            switch operation {
            case .add, .sub:
                let sx = FixedPoint.multiply(x &* (1 << Self.leftShift), leftMultiplier)
                let sy = FixedPoint.multiply(y &* (1 << Self.leftShift), rightMultiplier)
                value = FixedPoint.multiply(sx &+ sy, outputMultiplier) &+ outputOffset
            case .mul:
                value = FixedPoint.multiply(x &* y, outputMultiplier) &+ outputOffset
            }
            dst[i] = T(truncatingIfNeeded: min(max(value, range.min), range.max))
        }
    }
}

/// ADD, SUB and MUL on float32.
final class FloatArithmetic: Kernel {
    let operation: Arithmetic<Int8>.Operation
    let left, right, output: Int
    let broadcast: Broadcast
    let count: Int
    let clamp: (min: Float, max: Float)

    init(_ ctx: PrepareContext, operation: Arithmetic<Int8>.Operation, activation: FusedActivation) throws {
        self.operation = operation
        left = ctx.input(0)
        right = ctx.input(1)
        output = ctx.output(0)
        broadcast = try Broadcast(binary: ctx)
        count = broadcast.outputShape.reduce(1, *)
        clamp = FixedPoint.activationRange(activation)
    }

    func run(_ memory: TensorMemory) {
        let a = memory.typed(left, Float.self), b = memory.typed(right, Float.self), dst = memory.typed(output, Float.self)
        for i in 0..<count {
            let x = a[broadcast.left(i)], y = b[broadcast.right(i)]
            let value: Float
            switch operation {
            case .add: value = x + y
            case .sub: value = x - y
            case .mul: value = x * y
            }
            dst[i] = min(max(value, clamp.min), clamp.max)
        }
    }
}
