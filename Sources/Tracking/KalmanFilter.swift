/// A constant-velocity Kalman filter on a box's centre, width and height (BoT-SORT's state, which
/// follows a box's size better than SORT's area and aspect ratio): the state is
/// `[cx, cy, w, h, vcx, vcy, vw, vh]`, velocities per reference frame. Noise scales with the box, as
/// in BoT-SORT: 1/20 of the size for positions, 1/160 for velocities.
///
/// Fixed-size storage, no allocation: one filter is a value of a few hundred bytes.
package struct BoxKalman: Sendable {
    typealias Vector8 = SIMD8<Double>

    /// The state mean.
    private(set) var mean: Vector8
    /// The state covariance, row by row.
    private(set) var covariance: InlineArray<8, Vector8>

    static let positionWeight = 1.0 / 20
    static let velocityWeight = 1.0 / 160

    /// A filter starting at `box` (centre x, centre y, width, height), at rest.
    package init(box: SIMD4<Double>) {
        mean = Vector8(box.x, box.y, box.z, box.w, 0, 0, 0, 0)
        let (w, h) = (box.z, box.w)
        let p = Self.positionWeight, v = Self.velocityWeight
        let deviations = Vector8(2 * p * w, 2 * p * h, 2 * p * w, 2 * p * h, 10 * v * w, 10 * v * h, 10 * v * w, 10 * v * h)
        covariance = InlineArray(repeating: Vector8())
        for i in 0..<8 { covariance[i][i] = deviations[i] * deviations[i] }
    }

    /// The box the state describes (centre x, centre y, width, height).
    package var box: SIMD4<Double> { SIMD4(mean[0], mean[1], mean[2], mean[3]) }

    /// Moves the state `steps` reference frames ahead (a fraction for a faster source, more than one
    /// for a gap), with process noise for that long.
    package mutating func predict(steps: Double) {
        let (w, h) = (mean[2], mean[3])
        let p = Self.positionWeight, v = Self.velocityWeight
        let noise = Vector8(p * w, p * h, p * w, p * h, v * w, v * h, v * w, v * h)
        // x' = F x with F = [I dt·I; 0 I]
        for i in 0..<4 { mean[i] += steps * mean[i + 4] }
        // P' = F P Fᵀ + Q·dt: rows first (F P), then columns (· Fᵀ).
        var rows = covariance
        for i in 0..<4 { rows[i] = covariance[i] + steps * covariance[i + 4] }
        for i in 0..<8 {
            var row = rows[i]
            for j in 0..<4 { row[j] += steps * row[j + 4] }
            rows[i] = row
        }
        for i in 0..<8 { rows[i][i] += noise[i] * noise[i] * max(steps, 0) }
        // Keep the size positive whatever the velocity did.
        mean[2] = max(mean[2], 1e-3)
        mean[3] = max(mean[3], 1e-3)
        covariance = rows
    }

    /// Corrects the state with an observed box (centre x, centre y, width, height).
    package mutating func update(observed: SIMD4<Double>) {
        let (w, h) = (mean[2], mean[3])
        let p = Self.positionWeight
        let measurementNoise = SIMD4<Double>(p * w, p * h, p * w, p * h)
        // S = H P Hᵀ + R: the top-left 4x4 block of P.
        var s = InlineArray<4, SIMD4<Double>>(repeating: SIMD4())
        for i in 0..<4 {
            s[i] = SIMD4(covariance[i][0], covariance[i][1], covariance[i][2], covariance[i][3])
            s[i][i] += measurementNoise[i] * measurementNoise[i]
        }
        guard let inverse = Self.invert(s) else { return }
        // K = P Hᵀ S⁻¹ (8x4): each row of P's first four columns times S⁻¹.
        var gain = InlineArray<8, SIMD4<Double>>(repeating: SIMD4())
        for i in 0..<8 {
            let ph = SIMD4(covariance[i][0], covariance[i][1], covariance[i][2], covariance[i][3])
            var row = SIMD4<Double>()
            for k in 0..<4 { row += ph[k] * inverse[k] }
            gain[i] = row
        }
        let innovation = observed - box
        for i in 0..<8 { mean[i] += (gain[i] * innovation).sum() }
        // P' = P - K H P: row i minus Σk K[i][k]·P[k] (H P is P's first four rows).
        let before = covariance
        for i in 0..<8 {
            var row = before[i]
            for k in 0..<4 { row -= gain[i][k] * before[k] }
            covariance[i] = row
        }
        mean[2] = max(mean[2], 1e-3)
        mean[3] = max(mean[3], 1e-3)
    }

    /// The inverse of a symmetric positive definite 4x4 matrix (Gauss-Jordan), nil when singular.
    static func invert(_ m: InlineArray<4, SIMD4<Double>>) -> InlineArray<4, SIMD4<Double>>? {
        var a = m
        var inverse = InlineArray<4, SIMD4<Double>>(repeating: SIMD4())
        for i in 0..<4 { inverse[i][i] = 1 }
        for column in 0..<4 {
            var pivot = column
            for row in (column + 1)..<4 where abs(a[row][column]) > abs(a[pivot][column]) { pivot = row }
            guard abs(a[pivot][column]) > 1e-12 else { return nil }
            if pivot != column {
                a.swapAt(pivot, column)
                inverse.swapAt(pivot, column)
            }
            let scale = 1 / a[column][column]
            a[column] *= scale
            inverse[column] *= scale
            for row in 0..<4 where row != column {
                let factor = a[row][column]
                if factor != 0 {
                    a[row] -= factor * a[column]
                    inverse[row] -= factor * inverse[column]
                }
            }
        }
        return inverse
    }
}
