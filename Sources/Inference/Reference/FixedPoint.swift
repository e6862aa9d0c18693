import Foundation
import TFLiteFormat

/// TensorFlow Lite's fixed-point requantization arithmetic (gemmlowp's rounding rules), bit-exact.
enum FixedPoint {
    /// A real multiplier as a Q0.31 significand and a power-of-two exponent (positive: left shift).
    struct Multiplier: Equatable {
        var significand: Int32
        var shift: Int

        /// `QuantizeMultiplier`: `frexp`, round half away from zero, renormalise 2^31, flush tiny values.
        init(_ real: Double) {
            guard real != 0, !real.isNaN else {
                significand = 0
                shift = 0
                return
            }
            // A ratio of hostile scales can overflow to infinity: the largest multiplier instead.
            guard real.isFinite else {
                significand = real > 0 ? Int32.max : -Int32.max
                shift = 30
                return
            }
            let (fraction, exponent) = frexp(real)
            var fixed = Int64((fraction * Double(Int64(1) << 31)).rounded(.toNearestOrAwayFromZero))
            var shift = exponent
            if fixed == Int64(1) << 31 {
                fixed /= 2
                shift += 1
            }
            if shift < -31 {
                shift = 0
                fixed = 0
            }
            if shift > 30 {
                shift = 30
                fixed = (Int64(1) << 31) - 1
            }
            self.significand = Int32(fixed)
            self.shift = shift
        }
    }

    /// gemmlowp `SaturatingRoundingDoublingHighMul`.
    @inline(__always)
    static func doublingHighMul(_ a: Int32, _ b: Int32) -> Int32 {
        if a == b && a == Int32.min { return Int32.max }
        let product = Int64(a) * Int64(b)
        let nudge: Int64 = product >= 0 ? (1 << 30) : (1 - (1 << 30))
        // C++ integer division truncates toward zero, as Swift's does.
        return Int32(truncatingIfNeeded: (product + nudge) / (Int64(1) << 31))
    }

    /// gemmlowp `RoundingDivideByPOT`: divide by 2^exponent, halves rounded away from zero.
    @inline(__always)
    static func roundingDivideByPOT(_ x: Int32, _ exponent: Int) -> Int32 {
        let mask = (Int32(1) << exponent) &- 1
        let remainder = x & mask
        let threshold = (mask >> 1) &+ (x < 0 ? 1 : 0)
        return (x >> exponent) &+ (remainder > threshold ? 1 : 0)
    }

    /// TFLite `MultiplyByQuantizedMultiplier` (the double-rounding form).
    @inline(__always)
    static func multiply(_ x: Int32, _ m: Multiplier) -> Int32 {
        let left = m.shift > 0 ? m.shift : 0
        let right = m.shift > 0 ? 0 : -m.shift
        return roundingDivideByPOT(doublingHighMul(x &* (Int32(1) << left), m.significand), right)
    }

    /// TFLite `CalculateActivationRangeQuantized`: the fused activation's clamp in quantized units.
    static func activationRange(_ activation: FusedActivation, scale: Float, zeroPoint: Int32, type: TensorType) -> (min: Int32, max: Int32) {
        let (qmin, qmax) = type.integerRange
        func quantize(_ value: Float) -> Int32 { Int32(saturating: Int64(Int32(saturating: value / scale)) + Int64(zeroPoint)) }
        switch activation {
        case .relu: return (max(qmin, quantize(0)), qmax)
        case .relu6: return (max(qmin, quantize(0)), min(qmax, quantize(6)))
        case .reluN1To1: return (max(qmin, quantize(-1)), min(qmax, quantize(1)))
        default: return (qmin, qmax)
        }
    }

    /// The float clamp of a fused activation.
    static func activationRange(_ activation: FusedActivation) -> (min: Float, max: Float) {
        switch activation {
        case .relu: return (0, .greatestFiniteMagnitude)
        case .relu6: return (0, 6)
        case .reluN1To1: return (-1, 1)
        default: return (-.greatestFiniteMagnitude, .greatestFiniteMagnitude)
        }
    }
}

extension TensorType {
    /// The representable range of an integer element type.
    var integerRange: (min: Int32, max: Int32) {
        switch self {
        case .uint8: return (0, 255)
        case .int8: return (-128, 127)
        case .int16: return (-32768, 32767)
        default: return (Int32.min, Int32.max)
        }
    }
}

extension Int32 {
    /// `value` rounded half away from zero and clamped to Int32's range, NaN as 0: quantized
    /// values computed from a file's scales, which a hostile file can make huge or infinite.
    init(saturating value: Float) {
        let rounded = value.rounded(.toNearestOrAwayFromZero)
        if rounded.isNaN {
            self = 0
        } else if rounded >= 2_147_483_648 {
            self = .max
        } else if rounded < -2_147_483_648 {
            self = .min
        } else {
            self = Int32(rounded)
        }
    }

    /// `value` clamped to Int32's range.
    init(saturating value: Int64) {
        self = Int32(clamping: value)
    }
}

/// How a hybrid convolution quantizes its float input at each run (per batch): int8 with one
/// asymmetric scale over the range widened to hold 0, its zero point taken from whichever end rounds
/// better, as XNNPACK's dynamic quantization computes it; LiteRT's reference hybrid convolution
/// quantizes to the same values. 0.0 is exact, so padding stays zero.
struct DynamicQuantization {
    /// Steps per unit (1 / scale) and the zero point.
    let inverseScale: Float
    let zeroPoint: Int32
    var scale: Float { 1 / inverseScale }

    init(min low: Float, max high: Float) {
        let (low, high) = (Swift.min(low, 0), Swift.max(high, 0))
        let inverse: Float = high > low && (high - low).isFinite ? 255 / (high - low) : 1
        let fromLow = -128 - low * inverse, fromHigh = 127 - high * inverse
        let zero = (-128 + low * inverse) + (127 + high * inverse) > 0 ? fromLow : fromHigh
        inverseScale = inverse
        zeroPoint = Int32(Swift.max(-128, Swift.min(127, zero)).rounded(.toNearestOrEven))
    }

    /// `value` quantized: rounded to nearest even, clamped to int8 (what spotter_quantize_s8 computes).
    func quantize(_ value: Float) -> Int32 {
        let scaled = (value * inverseScale).rounded(.toNearestOrEven)
        guard scaled.isFinite, abs(scaled) < 1e9 else { return scaled > 0 ? 127 : -128 }
        return Swift.max(-128, Swift.min(127, Int32(scaled) &+ zeroPoint))
    }
}
