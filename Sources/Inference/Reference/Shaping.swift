import Foundation
import TFLiteFormat

/// The axis argument of an operator: negative counts from the end; an error outside the rank.
func resolvedAxis(_ ctx: PrepareContext, _ axis: Int, rank: Int) throws -> Int {
    let resolved = axis < 0 ? axis + rank : axis
    guard (0..<rank).contains(resolved) else { throw ctx.fail("axis \(axis) is outside rank \(rank)") }
    return resolved
}

/// SPLIT, SPLIT_V and UNPACK (any element type): the input cut along one axis into the outputs,
/// in order; UNPACK drops the axis from each output's shape.
final class AxisSplit: Kernel {
    let input: Int
    let outputs: [Int]
    /// Bytes of each output per outer step, and the bytes of one outer step of the input.
    let chunks: [Int]
    let outer: Int
    let stride: Int

    enum Mode { case split, splitV, unpack(axis: Int) }

    init(_ ctx: PrepareContext, mode: Mode) throws {
        let data: Int, axis: Int, sizes: [Int]
        outputs = ctx.op.outputs
        guard !outputs.isEmpty else { throw ctx.fail("has no outputs") }
        switch mode {
        case .split:
            // SPLIT(axis, input): equal parts.
            guard ctx.op.inputs.count == 2, ctx.isConstant(ctx.input(0)) else { throw ctx.fail("the axis must be constant") }
            data = ctx.input(1)
            let shape = ctx.shape(data)
            axis = try resolvedAxis(ctx, try ctx.integers(input: 0).first ?? 0, rank: shape.count)
            guard shape[axis] % outputs.count == 0 else { throw ctx.fail("\(shape[axis]) does not split into \(outputs.count) equal parts") }
            sizes = Array(repeating: shape[axis] / outputs.count, count: outputs.count)
        case .splitV:
            // SPLIT_V(input, size_splits, axis): one size may be -1, the rest.
            guard ctx.op.inputs.count == 3, ctx.isConstant(ctx.input(1)), ctx.isConstant(ctx.input(2)) else {
                throw ctx.fail("the sizes and the axis must be constant")
            }
            data = ctx.input(0)
            let shape = ctx.shape(data)
            axis = try resolvedAxis(ctx, try ctx.integers(input: 2).first ?? 0, rank: shape.count)
            var given = try ctx.integers(input: 1)
            guard given.count == outputs.count, given.filter({ $0 == -1 }).count <= 1, given.allSatisfy({ $0 >= -1 }) else {
                throw ctx.fail("sizes \(given) do not fit \(outputs.count) outputs")
            }
            if let open = given.firstIndex(of: -1) { given[open] = shape[axis] - given.filter { $0 >= 0 }.reduce(0, +) }
            guard given.allSatisfy({ $0 >= 0 }), given.reduce(0, +) == shape[axis] else {
                throw ctx.fail("sizes \(given) do not add up to \(shape[axis])")
            }
            sizes = given
        case .unpack(let unpackAxis):
            data = ctx.input(0)
            let shape = ctx.shape(data)
            axis = try resolvedAxis(ctx, unpackAxis, rank: shape.count)
            guard shape[axis] == outputs.count else { throw ctx.fail("axis \(axis) of \(shape) does not unpack into \(outputs.count) outputs") }
            sizes = Array(repeating: 1, count: outputs.count)
        }
        input = data
        let shape = ctx.shape(data)
        guard let elementSize = ctx.type(data).byteSize, outputs.allSatisfy({ ctx.type($0) == ctx.type(data) }) else { throw ctx.unsupported() }
        let inner = shape[(axis + 1)...].reduce(1, *) * elementSize
        for (output, size) in zip(outputs, sizes) {
            var outputShape = shape
            if case .unpack = mode { outputShape.remove(at: axis) } else { outputShape[axis] = size }
            try ctx.setShape(output, outputShape)
        }
        chunks = sizes.map { $0 * inner }
        outer = shape[..<axis].reduce(1, *)
        stride = shape[axis] * inner
    }

    func run(_ memory: TensorMemory) {
        let source = memory.raw(input)
        var offset = 0
        for (output, chunk) in zip(outputs, chunks) {
            let target = memory.raw(output)
            for k in 0..<outer { (target + k * chunk).copyMemory(from: source + k * stride + offset, byteCount: chunk) }
            offset += chunk
        }
    }
}

/// PACK (any element type): the inputs, all of one shape, stacked along a new axis.
final class Pack: Kernel {
    let inputs: [Int]
    let output: Int
    let chunk: Int
    let outer: Int

    init(_ ctx: PrepareContext, axis: Int) throws {
        inputs = ctx.op.inputs
        output = ctx.output(0)
        guard let first = inputs.first else { throw ctx.fail("has no inputs") }
        let shape = ctx.shape(first)
        guard let elementSize = ctx.type(first).byteSize,
              inputs.allSatisfy({ ctx.type($0) == ctx.type(first) && ctx.shape($0) == shape }), ctx.type(output) == ctx.type(first) else {
            throw ctx.fail("inputs must share one shape and type")
        }
        let axis = try resolvedAxis(ctx, axis, rank: shape.count + 1)
        var outputShape = shape
        outputShape.insert(inputs.count, at: axis)
        try ctx.setShape(output, outputShape)
        outer = shape[..<axis].reduce(1, *)
        chunk = shape[axis...].reduce(1, *) * elementSize
    }

    func run(_ memory: TensorMemory) {
        let target = memory.raw(output)
        for (index, input) in inputs.enumerated() {
            let source = memory.raw(input)
            for k in 0..<outer {
                (target + (k * inputs.count + index) * chunk).copyMemory(from: source + k * chunk, byteCount: chunk)
            }
        }
    }
}

/// GATHER (any element type; int32 or int64 indices, constant or not; batch_dims 0): slices of the
/// input along `axis` picked by the indices. An index outside the axis gives zeros (LiteRT refuses
/// it with an error at run time).
final class Gather: Kernel {
    let input, indices, output: Int
    let outer, axisSize, inner, count: Int
    let wideIndices: Bool

    init(_ ctx: PrepareContext, axis: Int, batchDims: Int) throws {
        input = ctx.input(0)
        indices = ctx.input(1)
        output = ctx.output(0)
        guard batchDims == 0 else { throw ctx.fail("batch_dims \(batchDims) is not supported") }
        guard [.int32, .int64].contains(ctx.type(indices)) else { throw ctx.fail("indices must be int32 or int64") }
        guard let elementSize = ctx.type(input).byteSize, ctx.type(output) == ctx.type(input) else { throw ctx.unsupported() }
        let shape = ctx.shape(input), indexShape = ctx.shape(indices)
        let axis = try resolvedAxis(ctx, axis, rank: shape.count)
        try ctx.setShape(output, Array(shape[..<axis]) + indexShape + Array(shape[(axis + 1)...]))
        outer = shape[..<axis].reduce(1, *)
        axisSize = shape[axis]
        inner = shape[(axis + 1)...].reduce(1, *) * elementSize
        count = indexShape.reduce(1, *)
        wideIndices = ctx.type(indices) == .int64
    }

    func run(_ memory: TensorMemory) {
        let source = memory.raw(input), target = memory.raw(output), picks = memory.raw(indices)
        for k in 0..<outer {
            for i in 0..<count {
                let index = wideIndices ? Int(picks.load(fromByteOffset: 8 * i, as: Int64.self)) : Int(picks.load(fromByteOffset: 4 * i, as: Int32.self))
                let destination = target + (k * count + i) * inner
                if (0..<axisSize).contains(index) {
                    destination.copyMemory(from: source + (k * axisSize + index) * inner, byteCount: inner)
                } else {
                    memset(destination, 0, inner)
                }
            }
        }
    }
}

/// DEPTH_TO_SPACE (NHWC, any element type): blocks of channels become block x block pixels, as
/// TensorFlow's DCR order: output[n, h*b + i, w*b + j, c] = input[n, h, w, (i*b + j)*C + c].
final class DepthToSpace: Kernel {
    let input, output: Int
    let batch, height, width, depth, block, elementSize: Int

    init(_ ctx: PrepareContext, blockSize: Int) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        try ctx.requireRank(input, 4)
        let shape = ctx.shape(input)
        guard let size = ctx.type(input).byteSize, ctx.type(output) == ctx.type(input) else { throw ctx.unsupported() }
        guard shape[3] % (blockSize * blockSize) == 0 else { throw ctx.fail("depth \(shape[3]) is not a multiple of \(blockSize * blockSize)") }
        (batch, height, width, block, elementSize) = (shape[0], shape[1], shape[2], blockSize, size)
        depth = shape[3] / (blockSize * blockSize)
        try ctx.setShape(output, [batch, height * blockSize, width * blockSize, depth])
    }

    func run(_ memory: TensorMemory) {
        let source = memory.raw(input), target = memory.raw(output)
        let run = depth * elementSize
        var read = 0
        for n in 0..<batch {
            for h in 0..<height {
                for w in 0..<width {
                    for i in 0..<block {
                        for j in 0..<block {
                            let y = h * block + i, x = w * block + j
                            let destination = ((n * height * block + y) * width * block + x) * run
                            (target + destination).copyMemory(from: source + read, byteCount: run)
                            read += run
                        }
                    }
                }
            }
        }
    }
}
