import Imaging

/// A projective map of the plane, `p' = H p` in homogeneous coordinates.
public struct Homography: Sendable, Equatable {
    /// Row-major 3 x 3 matrix.
    public var m: [Double]

    /// The map taking `from[i]` to `to[i]` for four points, no three collinear; nil when degenerate.
    public init?(from: [Point], to: [Point]) {
        precondition(from.count == 4 && to.count == 4, "a homography needs four point pairs")
        // Eight equations in h0...h7 (h8 = 1), solved by Gaussian elimination with partial pivoting.
        var a = [[Double]]()
        for (p, q) in zip(from, to) {
            a.append([p.x, p.y, 1, 0, 0, 0, -q.x * p.x, -q.x * p.y, q.x])
            a.append([0, 0, 0, p.x, p.y, 1, -q.y * p.x, -q.y * p.y, q.y])
        }
        for column in 0..<8 {
            let pivot = (column..<8).max { abs(a[$0][column]) < abs(a[$1][column]) }!
            guard abs(a[pivot][column]) > 1e-12 else { return nil }
            a.swapAt(column, pivot)
            for row in 0..<8 where row != column {
                let f = a[row][column] / a[column][column]
                if f != 0 { for k in column..<9 { a[row][k] -= f * a[column][k] } }
            }
        }
        m = (0..<8).map { a[$0][8] / a[$0][$0] } + [1]
    }

    public func apply(_ p: Point) -> Point {
        let w = m[6] * p.x + m[7] * p.y + m[8]
        return Point(x: (m[0] * p.x + m[1] * p.y + m[2]) / w, y: (m[3] * p.x + m[4] * p.y + m[5]) / w)
    }
}

extension RectangleObservation {
    /// The rectangle's content with the perspective removed (the document-scanner crop), RGB24.
    ///
    /// `image` is the upright picture the corners refer to, in any packed pixel format. The output's
    /// top edge runs from `topLeft` to `topRight`; its width is the longer of the top and bottom
    /// sides, its height the longer of the left and right sides. Sampling is bilinear; points
    /// outside the picture repeat its border.
    public func rectified(from image: Image) -> Image {
        precondition(image.size == imageSize, "rectify from the upright picture the corners refer to")
        let rgb = image.format == .rgb24 ? image : image.converted(to: .rgb24)
        let width = max(1, Int(max(topLeft.distance(to: topRight), bottomLeft.distance(to: bottomRight)).rounded()))
        let height = max(1, Int(max(topLeft.distance(to: bottomLeft), topRight.distance(to: bottomRight)).rounded()))
        var out = Image(width: width, height: height, format: .rgb24)
        let target = [Point(x: 0, y: 0), Point(x: Double(width), y: 0), Point(x: Double(width), y: Double(height)), Point(x: 0, y: Double(height))]
        guard let map = Homography(from: target, to: corners) else { return out }
        let stride = rgb.strides[0], maxX = rgb.width - 1, maxY = rgb.height - 1
        rgb.data.withUnsafeBufferPointer { src in
            out.data.withUnsafeMutableBufferPointer { dst in
                for v in 0..<height {
                    for u in 0..<width {
                        let p = map.apply(Point(x: Double(u) + 0.5, y: Double(v) + 0.5))
                        let fx = p.x - 0.5, fy = p.y - 0.5
                        let x0 = Rounding.floor(fx), y0 = Rounding.floor(fy)
                        let ax = fx - Double(x0), ay = fy - Double(y0)
                        let xa = min(max(x0, 0), maxX), xb = min(max(x0 + 1, 0), maxX)
                        let ya = min(max(y0, 0), maxY), yb = min(max(y0 + 1, 0), maxY)
                        let d = (v * width + u) * 3
                        for c in 0..<3 {
                            let top = Double(src[ya * stride + xa * 3 + c]) * (1 - ax) + Double(src[ya * stride + xb * 3 + c]) * ax
                            let bottom = Double(src[yb * stride + xa * 3 + c]) * (1 - ax) + Double(src[yb * stride + xb * 3 + c]) * ax
                            dst[d + c] = UInt8(min(255, max(0, (top * (1 - ay) + bottom * ay).rounded())))
                        }
                    }
                }
            }
        }
        return out
    }
}
