import Imaging

/// Zones (polygons) and lines of one source, as a zones file holds them:
///
/// ```json
/// {"zones": [{"name": "door", "polygon": [[100, 400], [300, 400], [300, 480], [100, 480]]}],
///  "lines": [{"name": "gate", "from": [320, 0], "to": [320, 480]}]}
/// ```
///
/// Coordinates are source pixels, or fractions of the frame's width and height with
/// `"normalized": true`. A zone may set `inertia` (observations in a row that enter or leave it,
/// default 3) and `loitering_seconds` (continuous presence that raises a `loitering` event).
public struct ZoneLayout: Codable, Sendable, Equatable {
    public struct Zone: Codable, Sendable, Equatable {
        public var name: String
        public var polygon: [Point]
        /// Consecutive observations inside (outside) that make a track enter (leave). Default 3.
        public var inertia: Int?
        /// Seconds of continuous presence after which a `loitering` event is raised. Default: never.
        public var loiteringSeconds: Double?

        enum CodingKeys: String, CodingKey {
            case name, polygon, inertia
            case loiteringSeconds = "loitering_seconds"
        }

        public init(name: String, polygon: [Point], inertia: Int? = nil, loiteringSeconds: Double? = nil) {
            self.name = name
            self.polygon = polygon
            self.inertia = inertia
            self.loiteringSeconds = loiteringSeconds
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            polygon = try container.decode([PointPair].self, forKey: .polygon).map(\.point)
            inertia = try container.decodeIfPresent(Int.self, forKey: .inertia)
            loiteringSeconds = try container.decodeIfPresent(Double.self, forKey: .loiteringSeconds)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(polygon.map(PointPair.init), forKey: .polygon)
            try container.encodeIfPresent(inertia, forKey: .inertia)
            try container.encodeIfPresent(loiteringSeconds, forKey: .loiteringSeconds)
        }
    }

    public struct Line: Codable, Sendable, Equatable {
        public var name: String
        public var from: Point
        public var to: Point

        enum CodingKeys: String, CodingKey { case name, from, to }

        public init(name: String, from: Point, to: Point) {
            self.name = name
            self.from = from
            self.to = to
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            from = try container.decode(PointPair.self, forKey: .from).point
            to = try container.decode(PointPair.self, forKey: .to).point
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(PointPair(from), forKey: .from)
            try container.encode(PointPair(to), forKey: .to)
        }
    }

    public var zones: [Zone]
    public var lines: [Line]
    /// Coordinates are fractions (0...1) of the frame's width and height. Default false: pixels.
    public var normalized: Bool?

    enum CodingKeys: String, CodingKey { case zones, lines, normalized }

    public init(zones: [Zone] = [], lines: [Line] = [], normalized: Bool? = nil) {
        self.zones = zones
        self.lines = lines
        self.normalized = normalized
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        zones = try container.decodeIfPresent([Zone].self, forKey: .zones) ?? []
        lines = try container.decodeIfPresent([Line].self, forKey: .lines) ?? []
        normalized = try container.decodeIfPresent(Bool.self, forKey: .normalized)
    }

    public var isEmpty: Bool { zones.isEmpty && lines.isEmpty }

    /// Most zones plus lines, and most points of one polygon.
    public static let maximumShapes = 64
    public static let maximumPoints = 256

    /// Checks names (non-empty, at most 100 characters, unique among zones and among lines),
    /// polygons (3 to 256 finite points), lines (two different finite points), inertia (1...1000),
    /// loitering (positive) and, when normalized, coordinates within 0...1.
    ///
    /// - Throws: ``ZoneError/invalid(_:)`` naming the zone or line.
    public func validate() throws {
        guard zones.count + lines.count <= Self.maximumShapes else {
            throw ZoneError.invalid("at most \(Self.maximumShapes) zones and lines, not \(zones.count + lines.count)")
        }
        let fractions = normalized ?? false
        func check(_ point: Point, _ what: String) throws {
            guard point.x.isFinite, point.y.isFinite else { throw ZoneError.invalid("\(what): coordinates must be finite numbers") }
            if fractions, !(0...1).contains(point.x) || !(0...1).contains(point.y) {
                throw ZoneError.invalid("\(what): normalized coordinates must be between 0 and 1")
            }
        }
        func checkName(_ name: String, _ kind: String, _ seen: inout Set<String>) throws {
            guard !name.isEmpty, name.count <= 100 else { throw ZoneError.invalid("a \(kind) needs a name of 1 to 100 characters") }
            guard seen.insert(name).inserted else { throw ZoneError.invalid("two \(kind)s are named \"\(name)\"") }
        }
        var zoneNames = Set<String>(), lineNames = Set<String>()
        for zone in zones {
            try checkName(zone.name, "zone", &zoneNames)
            guard (3...Self.maximumPoints).contains(zone.polygon.count) else {
                throw ZoneError.invalid("zone \"\(zone.name)\": a polygon needs 3 to \(Self.maximumPoints) points, not \(zone.polygon.count)")
            }
            for point in zone.polygon { try check(point, "zone \"\(zone.name)\"") }
            if let inertia = zone.inertia, !(1...1000).contains(inertia) { throw ZoneError.invalid("zone \"\(zone.name)\": inertia must be 1 to 1000") }
            if let seconds = zone.loiteringSeconds, !(seconds > 0 && seconds.isFinite) {
                throw ZoneError.invalid("zone \"\(zone.name)\": loitering_seconds must be positive")
            }
        }
        for line in lines {
            try checkName(line.name, "line", &lineNames)
            try check(line.from, "line \"\(line.name)\"")
            try check(line.to, "line \"\(line.name)\"")
            guard line.from != line.to else { throw ZoneError.invalid("line \"\(line.name)\": from and to must differ") }
        }
    }

    /// The layout in pixels of a `width` x `height` frame (unchanged when already in pixels).
    public func inPixels(width: Int, height: Int) -> ZoneLayout {
        guard normalized ?? false else { return self }
        let scale = { (p: Point) in Point(x: p.x * Double(width), y: p.y * Double(height)) }
        var layout = self
        layout.normalized = nil
        for index in layout.zones.indices { layout.zones[index].polygon = layout.zones[index].polygon.map(scale) }
        for index in layout.lines.indices {
            layout.lines[index].from = scale(layout.lines[index].from)
            layout.lines[index].to = scale(layout.lines[index].to)
        }
        return layout
    }
}

/// A point as zones files write it: `[x, y]`.
private struct PointPair: Codable {
    var point: Point

    init(_ point: Point) { self.point = point }

    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        let x = try container.decode(Double.self), y = try container.decode(Double.self)
        guard container.isAtEnd else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "a point is [x, y]")
        }
        point = Point(x: x, y: y)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(point.x)
        try container.encode(point.y)
    }
}

public enum ZoneError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalid(String)

    public var description: String {
        switch self {
        case .invalid(let message): return message
        }
    }
}

/// What happened to a track in a zone or at a line.
public enum ZoneEvent: Sendable, Equatable {
    case enter(track: Int, zone: String)
    case exit(track: Int, zone: String)
    /// `in`: from the line's left to its right (walking from `from` to `to`, y down); `out`: back.
    case cross(track: Int, line: String, direction: CrossingDirection)
    /// The track has been in the zone for its `loitering_seconds` without leaving.
    case loitering(track: Int, zone: String)

    public var track: Int {
        switch self {
        case .enter(let track, _), .exit(let track, _), .cross(let track, _, _), .loitering(let track, _): return track
        }
    }
}

public enum CrossingDirection: String, Codable, Sendable {
    case `in`, out
}

/// Follows tracks through a source's zones and over its lines, and says when they enter, leave,
/// loiter and cross. The contract (tests implement it independently):
///
/// - A track's observations are the boxes the tracker reports for it, in frame order; frames in
///   which it is not reported neither count nor reset anything. Its anchor point is the box's
///   bottom centre.
/// - A point is in a zone when it lies inside the polygon or on its boundary (self-intersecting
///   polygons by the even-odd rule). Per track and zone the state starts outside; `inertia`
///   consecutive observations inside make it enter (at the inertia-th); while inside, `inertia`
///   consecutive observations outside make it leave. A track that stops being reported emits no
///   exit. `loitering` once per stay, at the first observation `loitering_seconds` after entering.
/// - For a line a → b, c(p) = (b.x - a.x)(p.y - a.y) - (b.y - a.y)(p.x - a.x); c > 0 is side R,
///   c ≤ 0 side L. A track's committed side is that of its first observation. When an observation
///   lands on the other side, whether the step from the previous observation (a closed segment)
///   touches the closed segment a-b is remembered; if the next observation is on the new side too,
///   that side is committed and, if the step touched a-b, a crossing is counted there: `in` for
///   L → R, `out` for R → L. Going back first counts nothing.
///
/// ```
///  zone, per track:   outside ──inertia observations inside──▶ inside ──inertia outside──▶ outside
///  line, per track:   committed ──other side──▶ pending ──other side again──▶ committed (count if the step touched a-b)
///                                                  └──────back──────▶ committed (nothing)
/// ```
///
/// Not thread-safe; one monitor per source.
public struct ZoneMonitor: Sendable {
    public let layout: ZoneLayout

    private struct ZoneState: Sendable {
        var inside = false
        /// Observations in a row that disagree with `inside`.
        var streak = 0
        var enteredAt = 0.0
        var loitered = false
    }

    private struct LineState: Sendable {
        var committedRight: Bool
        /// The other side was seen once; whether that step touched the line.
        var pendingTouch: Bool?
    }

    private struct TrackState: Sendable {
        var last: Point
        var zones: [ZoneState]
        var lines: [LineState]
    }

    private var tracks: [Int: TrackState] = [:]

    /// - Parameter layout: in pixels (see ``ZoneLayout/inPixels(width:height:)``).
    public init(layout: ZoneLayout) {
        self.layout = layout
    }

    /// The anchor point of a box: its bottom centre.
    public static func anchor(of box: Rect) -> Point { Point(x: (box.minX + box.maxX) / 2, y: box.maxY) }

    /// Feeds one observation of `track` (in frame order; `time` in seconds) and returns what it
    /// caused, zones first (in the layout's order), then lines.
    public mutating func observe(track: Int, box: Rect, time: Double) -> [ZoneEvent] {
        let point = Self.anchor(of: box)
        var events: [ZoneEvent] = []
        guard var state = tracks[track] else {
            var state = TrackState(last: point, zones: Array(repeating: ZoneState(), count: layout.zones.count),
                                   lines: layout.lines.map { LineState(committedRight: Self.side(point, $0) > 0) })
            step(&state, track: track, point: point, time: time, events: &events, first: true)
            tracks[track] = state
            return events
        }
        step(&state, track: track, point: point, time: time, events: &events, first: false)
        tracks[track] = state
        return events
    }

    private func step(_ state: inout TrackState, track: Int, point: Point, time: Double, events: inout [ZoneEvent], first: Bool) {
        for (index, zone) in layout.zones.enumerated() {
            var z = state.zones[index]
            let inertia = zone.inertia ?? 3
            let inside = Self.contains(zone.polygon, point)
            if inside != z.inside {
                z.streak += 1
                if z.streak >= inertia {
                    z.inside = inside
                    z.streak = 0
                    if inside {
                        z.enteredAt = time
                        z.loitered = false
                        events.append(.enter(track: track, zone: zone.name))
                    } else {
                        events.append(.exit(track: track, zone: zone.name))
                    }
                }
            } else {
                z.streak = 0
            }
            if z.inside, !z.loitered, let seconds = zone.loiteringSeconds, time - z.enteredAt >= seconds {
                z.loitered = true
                events.append(.loitering(track: track, zone: zone.name))
            }
            state.zones[index] = z
        }
        if !first {
            for (index, line) in layout.lines.enumerated() {
                var l = state.lines[index]
                let right = Self.side(point, line) > 0
                if let touched = l.pendingTouch {
                    if right != l.committedRight {
                        l.committedRight = right
                        if touched { events.append(.cross(track: track, line: line.name, direction: right ? .in : .out)) }
                    }
                    l.pendingTouch = nil
                } else if right != l.committedRight {
                    l.pendingTouch = Self.segmentsTouch(state.last, point, line.from, line.to)
                }
                state.lines[index] = l
            }
        }
        state.last = point
    }

    /// Forgets a track that ended (no event).
    public mutating func forget(track: Int) {
        tracks[track] = nil
    }

    /// The zones `track` is in now, by name, in the layout's order.
    public func zones(of track: Int) -> [String] {
        guard let state = tracks[track] else { return [] }
        return zip(layout.zones, state.zones).filter { $0.1.inside }.map { $0.0.name }
    }

    /// c(p) for a line: positive on its right-hand side (walking from `from` to `to`, y down).
    static func side(_ p: Point, _ line: ZoneLayout.Line) -> Double {
        cross(line.from, line.to, p)
    }

    /// (b - a) x (p - a).
    static func cross(_ a: Point, _ b: Point, _ p: Point) -> Double {
        (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
    }

    /// Whether `p` lies on the closed segment a-b.
    static func onSegment(_ p: Point, _ a: Point, _ b: Point) -> Bool {
        cross(a, b, p) == 0 && min(a.x, b.x) <= p.x && p.x <= max(a.x, b.x) && min(a.y, b.y) <= p.y && p.y <= max(a.y, b.y)
    }

    /// Whether the closed segments p1-p2 and q1-q2 have a point in common.
    static func segmentsTouch(_ p1: Point, _ p2: Point, _ q1: Point, _ q2: Point) -> Bool {
        let d1 = cross(q1, q2, p1), d2 = cross(q1, q2, p2), d3 = cross(p1, p2, q1), d4 = cross(p1, p2, q2)
        if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) { return true }
        return onSegment(p1, q1, q2) || onSegment(p2, q1, q2) || onSegment(q1, p1, p2) || onSegment(q2, p1, p2)
    }

    /// Whether `p` is inside `polygon` or on its boundary (even-odd rule).
    static func contains(_ polygon: [Point], _ p: Point) -> Bool {
        var inside = false
        var j = polygon.count - 1
        for i in polygon.indices {
            let a = polygon[i], b = polygon[j]
            if onSegment(p, a, b) { return true }
            if (a.y > p.y) != (b.y > p.y), p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y) { inside.toggle() }
            j = i
        }
        return inside
    }
}

extension ZoneEvent: Encodable {
    enum CodingKeys: String, CodingKey { case type, track, zone, line, direction }

    /// The event's name in JSON: `zone_enter`, `zone_exit`, `line_cross`, `loitering`.
    public var type: String {
        switch self {
        case .enter: return "zone_enter"
        case .exit: return "zone_exit"
        case .cross: return "line_cross"
        case .loitering: return "loitering"
        }
    }

    /// `{"type": ..., "track": ID, "zone": NAME}` or `{"type": "line_cross", "track": ID, "line": NAME, "direction": "in"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(track, forKey: .track)
        switch self {
        case .enter(_, let zone), .exit(_, let zone), .loitering(_, let zone):
            try container.encode(zone, forKey: .zone)
        case .cross(_, let line, let direction):
            try container.encode(line, forKey: .line)
            try container.encode(direction, forKey: .direction)
        }
    }
}

extension Image {
    /// Outlines a layout's zones (closed polygons) and lines (with a dot at `from`), in the
    /// picture's pixels; RGB24 (converted first otherwise).
    public mutating func draw(_ layout: ZoneLayout) {
        if format != .rgb24 { self = converted(to: .rgb24) }
        let width = max(2, Double(min(self.width, height)) / 240)
        for (index, zone) in layout.zones.enumerated() {
            strokePolygon(zone.polygon, lineWidth: width, color: Color.forClass(index + 11))
        }
        for (index, line) in layout.lines.enumerated() {
            let color = Color.forClass(index + 23)
            strokePolyline([line.from, line.to], lineWidth: width, color: color)
            fill(x: Int(line.from.x - 1.5 * width), y: Int(line.from.y - 1.5 * width), width: Int(3 * width), height: Int(3 * width), color: color)
        }
    }
}
