import Imaging

/// Aligns faces for a recognition network: the similarity transform (rotation, uniform scale,
/// translation) that best maps a face's eyes, nose tip and mouth centre onto ArcFace's 112x112
/// template, and the crop it cuts.
public enum FaceAlignment {
    /// The crop size recognition networks such as MobileFaceNet take.
    public static let cropSize = Size(width: 112, height: 112)

    /// ArcFace's landmarks in the 112x112 crop: the eye on the picture's left (the person's right
    /// eye), the other eye, the nose tip, and the mouth centre (the mean of its two mouth corners).
    public static let template = [
        Point(x: 38.2946, y: 51.6963), Point(x: 73.5318, y: 51.5014), Point(x: 56.0252, y: 71.7366), Point(x: 56.1396, y: 92.2848),
    ]

    /// The least-squares similarity transform taking `source` points onto `target` points
    /// (Umeyama's solution, as scikit-image's `SimilarityTransform.estimate`; never a reflection).
    /// Needs two distinct source points at least.
    public static func similarity(from source: [Point], to target: [Point]) -> AffineMap {
        precondition(source.count == target.count && source.count >= 2, "needs matching point lists of two or more")
        let n = Double(source.count)
        let sx = source.map(\.x).reduce(0, +) / n, sy = source.map(\.y).reduce(0, +) / n
        let tx = target.map(\.x).reduce(0, +) / n, ty = target.map(\.y).reduce(0, +) / n
        var dot = 0.0, cross = 0.0, norm = 0.0
        for (s, t) in zip(source, target) {
            let (px, py, qx, qy) = (s.x - sx, s.y - sy, t.x - tx, t.y - ty)
            dot += px * qx + py * qy
            cross += px * qy - py * qx
            norm += px * px + py * py
        }
        // x' = a x - b y + ..., y' = b x + a y + ...: scale sqrt(a² + b²), angle atan2(b, a).
        let a = norm > 0 ? dot / norm : 1, b = norm > 0 ? cross / norm : 0
        return AffineMap(a: a, b: -b, c: b, d: a, tx: tx - (a * sx - b * sy), ty: ty - (b * sx + a * sy))
    }

    /// The transform from the picture to the template for a face's keypoints (BlazeFace's order:
    /// right eye, left eye, nose tip, mouth centre, ...; the first four are used).
    public static func transform(keypoints: [Point]) -> AffineMap {
        similarity(from: Array(keypoints.prefix(4)), to: Array(template.prefix(min(4, keypoints.count))))
    }

    /// The aligned 112x112 RGB crop: `picture` warped by `transform` as OpenCV's `warpAffine` does
    /// (bilinear, black outside the picture).
    public static func crop(_ picture: Image, transform: AffineMap) -> Image {
        picture.converted(to: .rgb24).warpedAffine(transform, to: cropSize)
    }
}
