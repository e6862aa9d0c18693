import TFLiteFormat

/// A float32 DEPTHWISE_CONV_2D whose filter covers its whole input (MobileFaceNet's global
/// depthwise layer: 7x7x512 to 1x1x512): one weighted sum per channel. Debian's XNNPACK took 80 us
/// for these 25,000 products (its many-tap kernel passes over the taps in groups through a buffer).
/// Sums are in another order than XNNPACK's, so outputs agree with LiteRT's default path to float
/// rounding, as XNNPACK's do.
final class GlobalDepthwise: Kernel {
    var readsConstantInputs: Bool { false }

    private let input, output: Int
    private let batches, taps, channels: Int
    /// Weights [taps][channels] (hybrid ones dequantized), then the bias.
    private let weights, bias: [Float]
    private let low, high: Float

    /// Returns nil unless the filter covers the input exactly (one output pixel, no padding, no
    /// dilation, depth multiplier 1) with float32 activations and constant weights.
    static func make(_ ctx: PrepareContext, options: Conv2DOptions) throws -> GlobalDepthwise? {
        let input = ctx.input(0), filter = ctx.input(1), inShape = ctx.shape(input), fShape = ctx.shape(filter)
        guard ctx.type(input) == .float32, !ctx.isConstant(input), ctx.type(ctx.output(0)) == .float32,
              ctx.type(filter) == .float32 || ctx.isHybrid(input: input, weights: filter), ctx.isConstant(filter),
              inShape.count == 4, fShape.count == 4, fShape[3] == inShape[3], fShape[1] == inShape[1], fShape[2] == inShape[2],
              options.dilationHeight == 1, options.dilationWidth == 1,
              !ctx.hasInput(2) || ctx.isConstant(ctx.input(2)) else { return nil }
        let g = try WindowGeometry(convolution: ctx, options: options, depthwise: true)
        guard g.outputHeight == 1, g.outputWidth == 1, g.padTop == 0, g.padLeft == 0 else { return nil }
        return try GlobalDepthwise(ctx, g, activation: options.activation)
    }

    private init(_ ctx: PrepareContext, _ g: WindowGeometry, activation: FusedActivation) throws {
        input = ctx.input(0)
        output = ctx.output(0)
        batches = g.batches
        taps = g.filterHeight * g.filterWidth
        channels = g.outputChannels
        weights = try ctx.floatWeights(ctx.input(1))
        guard ctx.isCheckingOnly || weights.count == taps * channels else {
            throw ctx.fail("filter has \(weights.count) values for \(channels) channels of \(taps) taps")
        }
        bias = ctx.hasInput(2) ? try ctx.constant(ctx.input(2), as: Float.self) : [Float](repeating: 0, count: channels)
        guard bias.count == channels else { throw ctx.fail("bias has \(bias.count) values for \(channels) channels") }
        (low, high) = FixedPoint.activationRange(activation)
    }

    func run(_ memory: TensorMemory) {
        let x = memory.typed(input, Float.self), y = memory.typed(output, Float.self)
        let (taps, channels, low, high) = (self.taps, self.channels, self.low, self.high)
        weights.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { bias in
                for b in 0..<batches {
                    let image = x + b * taps * channels, out = y + b * channels
                    for c in 0..<channels { out[c] = bias[c] }
                    // Tap by tap, so each inner loop runs over contiguous channels (vectorized).
                    for t in 0..<taps {
                        let row = image + t * channels, wr = w.baseAddress! + t * channels
                        for c in 0..<channels { out[c] += row[c] * wr[c] }
                    }
                    for c in 0..<channels { out[c] = Swift.min(Swift.max(out[c], low), high) }
                }
            }
        }
    }
}
