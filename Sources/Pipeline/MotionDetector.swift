import Imaging

/// Says whether anything moved in a frame, cheaply: a small grey copy of the frame (100 lines
/// high, each pixel the mean of a block of the frame) is compared with a running average of the
/// earlier ones; pixels that differ by more than ``Options/threshold`` are changed, changed pixels
/// that touch form regions, and regions of at least ``Options/minimumArea`` small pixels are
/// motion. Frigate's defaults (threshold 30, contour area 10, frame alpha 0.01, lightning
/// threshold 0.8) are the starting point; pixels that stopped changing join the average faster
/// (``Options/settleWeight``), so the place a person just left is not motion for seconds.
///
/// A change over most of the frame (lights switched on, the camera moved) resets the average and
/// counts as motion once. Masks (polygons where motion is ignored: a clock, trees) are given in
/// the frame's pixels.
///
/// Not thread-safe; one detector per source. No allocation per frame once the first frame sized
/// its buffers.
public struct MotionDetector: Sendable {
    public struct Options: Sendable, Equatable {
        /// Difference from the running average (0...255 grey levels) that marks a pixel changed. Default 30.
        public var threshold: Int = 30
        /// Least area of a region, in pixels of the 100-line copy, that counts as motion. Default 10.
        public var minimumArea: Int = 10
        /// Weight of each new frame in the running average where the picture is changing from
        /// frame to frame. Default 0.02 (Frigate's frame alpha is 0.01).
        public var averageWeight: Float = 0.02
        /// Weight where a pixel is the same as in the frame before (within a third of the
        /// threshold): what someone left behind or uncovered, once still, joins the average
        /// within a few frames instead of counting as motion for seconds. Default 0.25.
        public var settleWeight: Float = 0.25
        /// Share of the copy that, changed at once, is a lighting change rather than motion. Default 0.8.
        public var lightingChange: Double = 0.8
        /// Lines of the grey copy. Default 100.
        public var height = 100
        /// Polygons, in the frame's pixels, where motion is ignored.
        public var masks: [[Point]] = []

        public init() {}
    }

    /// What one frame showed.
    public struct Result: Sendable, Equatable {
        public var hasMotion: Bool
        /// The moving regions, in the frame's pixels.
        public var regions: [Rect]
        /// Share of the copy that changed (0...1).
        public var changed: Double
    }

    public let options: Options
    private var width = 0, height = 0
    private var frameSize = Size(width: 0, height: 0)
    private var average: [Float] = []
    private var grey: [UInt8] = []
    private var previous: [UInt8] = []
    /// Per small pixel, the two frame columns (and rows) sampled for it.
    private var columns: [Int] = []
    private var rows: [Int] = []
    private var changed: [Bool] = []
    private var ignored: [Bool] = []
    private var stack: [Int] = []

    public init(options: Options = Options()) {
        self.options = options
    }

    /// Compares `image` (RGB24 or grey) with the frames before it.
    public mutating func detect(in image: Image) -> Result {
        let size = image.size
        if size != frameSize { reset(for: size) }
        shrink(image)
        let threshold = Float(options.threshold)
        defer { swap(&grey, &previous) }
        if average.isEmpty {
            average = grey.map(Float.init)
            return Result(hasMotion: true, regions: [Rect(minX: 0, minY: 0, maxX: Double(size.width), maxY: Double(size.height))], changed: 1)
        }
        var count = 0
        for i in 0..<grey.count {
            let moved = !ignored[i] && abs(Float(grey[i]) - average[i]) > threshold
            changed[i] = moved
            if moved { count += 1 }
        }
        let share = Double(count) / Double(max(1, grey.count))
        let weight = options.averageWeight
        if share > options.lightingChange {
            for i in 0..<grey.count { average[i] = Float(grey[i]) }
            return Result(hasMotion: true, regions: [Rect(minX: 0, minY: 0, maxX: Double(size.width), maxY: Double(size.height))], changed: share)
        }
        let still = threshold / 3, settle = options.settleWeight
        for i in 0..<grey.count {
            let value = Float(grey[i])
            average[i] += (value - average[i]) * (abs(value - Float(previous[i])) <= still ? settle : weight)
        }
        guard count >= options.minimumArea else { return Result(hasMotion: false, regions: [], changed: share) }
        let regions = self.regions()
        return Result(hasMotion: !regions.isEmpty, regions: regions, changed: share)
    }

    /// Sizes the buffers for frames of `size` and forgets the average.
    private mutating func reset(for size: Size) {
        frameSize = size
        height = max(1, min(options.height, size.height))
        width = max(1, Int((Double(size.width) * Double(height) / Double(max(1, size.height))).rounded()))
        average = []
        grey = Array(repeating: 0, count: width * height)
        previous = grey
        // Two samples a quarter and three quarters into each block, clamped to the frame.
        func samples(_ count: Int, _ full: Int) -> [Int] {
            (0..<count).flatMap { i -> [Int] in
                let a = Double(i) * Double(full) / Double(count), b = Double(i + 1) * Double(full) / Double(count)
                return [min(full - 1, Int(a + (b - a) * 0.25)), min(full - 1, Int(a + (b - a) * 0.75))]
            }
        }
        columns = samples(width, size.width)
        rows = samples(height, size.height)
        changed = Array(repeating: false, count: width * height)
        ignored = Array(repeating: false, count: width * height)
        let scaleX = Double(size.width) / Double(width), scaleY = Double(size.height) / Double(height)
        for polygon in options.masks where polygon.count >= 3 {
            for y in 0..<height {
                for x in 0..<width where Self.inside(polygon, Point(x: (Double(x) + 0.5) * scaleX, y: (Double(y) + 0.5) * scaleY)) {
                    ignored[y * width + x] = true
                }
            }
        }
    }

    /// The grey copy: each small pixel the mean luma of 2x2 samples spread over its block (as a
    /// bilinear shrink samples, Frigate's `cv2.resize`), from the columns and rows ``reset(for:)``
    /// chose.
    private mutating func shrink(_ image: Image) {
        let channels = image.format == .gray8 ? 1 : 3
        let source = image.format == .gray8 || image.format == .rgb24 ? image : image.converted(to: .rgb24)
        let stride = source.strides[0]
        let w = width, h = height, rows = self.rows
        source.data.withUnsafeBufferPointer { pixels in
            guard let base = pixels.baseAddress else { return }
            grey.withUnsafeMutableBufferPointer { out in
                columns.withUnsafeBufferPointer { columns in
                    for y in 0..<h {
                        let top = base + rows[2 * y] * stride, bottom = base + rows[2 * y + 1] * stride
                        for x in 0..<w {
                            let left = columns[2 * x] * channels, right = columns[2 * x + 1] * channels
                            let sum: Int
                            if channels == 1 {
                                sum = (Int(top[left]) + Int(top[right]) + Int(bottom[left]) + Int(bottom[right])) * 256
                            } else {
                                func luma(_ p: UnsafePointer<UInt8>) -> Int { 77 * Int(p[0]) + 150 * Int(p[1]) + 29 * Int(p[2]) }
                                sum = luma(top + left) + luma(top + right) + luma(bottom + left) + luma(bottom + right)
                            }
                            out[y * w + x] = UInt8(truncatingIfNeeded: min(255, sum >> 10))
                        }
                    }
                }
            }
        }
    }

    /// Regions of changed pixels (8-connected) of at least the minimum area, in frame pixels.
    private mutating func regions() -> [Rect] {
        var found: [Rect] = []
        let scaleX = Double(frameSize.width) / Double(width), scaleY = Double(frameSize.height) / Double(height)
        for start in 0..<changed.count where changed[start] {
            changed[start] = false
            stack.removeAll(keepingCapacity: true)
            stack.append(start)
            var area = 0
            var minX = width, minY = height, maxX = 0, maxY = 0
            while let index = stack.popLast() {
                area += 1
                let x = index % width, y = index / width
                minX = min(minX, x); maxX = max(maxX, x); minY = min(minY, y); maxY = max(maxY, y)
                for dy in -1...1 {
                    for dx in -1...1 {
                        let nx = x + dx, ny = y + dy
                        guard nx >= 0, ny >= 0, nx < width, ny < height else { continue }
                        let next = ny * width + nx
                        if changed[next] {
                            changed[next] = false
                            stack.append(next)
                        }
                    }
                }
            }
            if area >= options.minimumArea {
                found.append(Rect(minX: Double(minX) * scaleX, minY: Double(minY) * scaleY, maxX: Double(maxX + 1) * scaleX, maxY: Double(maxY + 1) * scaleY))
            }
        }
        return found
    }

    /// Even-odd rule.
    private static func inside(_ polygon: [Point], _ p: Point) -> Bool {
        var inside = false
        var j = polygon.count - 1
        for i in polygon.indices {
            let a = polygon[i], b = polygon[j]
            if (a.y > p.y) != (b.y > p.y), p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y) { inside.toggle() }
            j = i
        }
        return inside
    }
}
