/// Rounding without libm for per-pixel loops: on x86-64 without SSE4.1 (Swift's baseline), every
/// `rounded(...)` is a call to floorf, rintf or floor.
package enum Rounding {
    /// The largest integer not above `v`, for |v| < 2^62.
    @inline(__always) package static func floor(_ v: Float) -> Int {
        let i = Int(v)
        return Float(i) > v ? i - 1 : i
    }

    /// The largest integer not above `v`, for |v| < 2^62.
    @inline(__always) package static func floor(_ v: Double) -> Int {
        let i = Int(v)
        return Double(i) > v ? i - 1 : i
    }

    /// `v` rounded half to even, for |v| < 2^22: adding 1.5 * 2^23 leaves no fraction bits, so the
    /// addition itself rounds (to even).
    @inline(__always) package static func nearestEven(_ v: Float) -> Float { (v + 12_582_912) - 12_582_912 }
}
