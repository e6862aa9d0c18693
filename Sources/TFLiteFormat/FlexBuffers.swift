/// A decoded FlexBuffers value, as custom operators store their options.
public enum FlexValue: Equatable, Sendable {
    case null
    case int(Int64)
    case uint(UInt64)
    case float(Double)
    case bool(Bool)
    case string(String)
    case key(String)
    case blob([UInt8])
    case vector([FlexValue])
    case map([String: FlexValue])

    /// The value as a number, for options that may be stored as int, uint, float or bool.
    public var doubleValue: Double? {
        switch self {
        case .int(let v): return Double(v)
        case .uint(let v): return Double(v)
        case .float(let v): return v
        case .bool(let v): return v ? 1 : 0
        default: return nil
        }
    }

    /// The value as an integer, for options that may be stored as int, uint or bool.
    public var intValue: Int? {
        switch self {
        case .int(let v): return Int(exactly: v)
        case .uint(let v): return Int(exactly: v)
        case .bool(let v): return v ? 1 : 0
        case .float(let v): return v.rounded() == v ? Int(exactly: v) : nil
        default: return nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .bool(let v): return v
        case .int(let v): return v != 0
        case .uint(let v): return v != 0
        default: return nil
        }
    }
}

/// Decodes FlexBuffers (the schemaless format TFLite uses for custom options).
///
/// Every offset is checked; nesting is limited to ``maxDepth`` and the number of decoded values to
/// ``maxValues`` so that shared or cyclic references in hostile data cannot blow up.
public enum FlexBuffers {
    public static let maxDepth = 32
    public static let maxValues = 100_000

    /// Decodes the root value of `bytes`.
    ///
    /// - Throws: ``ModelFormatError/invalidFlexBuffer(reason:offset:)``,
    ///   ``ModelFormatError/nestingTooDeep(what:limit:)``.
    public static func decode(_ bytes: [UInt8]) throws -> FlexValue {
        try bytes.withUnsafeBytes { raw in
            var decoder = FlexDecoder(bytes: raw)
            return try decoder.root()
        }
    }
}

private struct FlexDecoder {
    let bytes: UnsafeRawBufferPointer
    var decoded = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    func fail(_ reason: String, _ offset: Int) -> ModelFormatError {
        .invalidFlexBuffer(reason: reason, offset: offset)
    }

    func check(_ offset: Int, _ size: Int) throws {
        guard offset >= 0, size >= 0, offset <= bytes.count, size <= bytes.count - offset else {
            throw fail("read of \(size) bytes past the end (\(bytes.count) bytes)", offset)
        }
    }

    func readUInt(_ offset: Int, width: Int) throws -> UInt64 {
        try check(offset, width)
        switch width {
        case 1: return UInt64(bytes[offset])
        case 2: return UInt64(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self)))
        case 4: return UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        case 8: return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        default: throw fail("byte width \(width)", offset)
        }
    }

    func readInt(_ offset: Int, width: Int) throws -> Int64 {
        let raw = try readUInt(offset, width: width)
        let shift = UInt64(64 - width * 8)
        return Int64(bitPattern: raw << shift) >> Int64(shift)
    }

    func readFloat(_ offset: Int, width: Int) throws -> Double {
        switch width {
        case 4: return Double(Float(bitPattern: UInt32(try readUInt(offset, width: 4))))
        case 8: return Double(bitPattern: try readUInt(offset, width: 8))
        default: throw fail("float of byte width \(width)", offset)
        }
    }

    /// Follows the backward offset stored at `offset`.
    func indirect(_ offset: Int, width: Int) throws -> Int {
        let distance = try readUInt(offset, width: width)
        guard distance <= UInt64(offset) else { throw fail("offset points before the start", offset) }
        return offset - Int(distance)
    }

    func length(before offset: Int, width: Int) throws -> Int {
        let size = try readUInt(offset - width, width: width)
        guard size <= UInt64(bytes.count) else { throw fail("length \(size) exceeds the data", offset - width) }
        return Int(size)
    }

    func keyString(at offset: Int) throws -> String {
        try check(offset, 0)
        var end = offset
        while end < bytes.count, bytes[end] != 0 { end += 1 }
        guard end < bytes.count else { throw fail("key without terminator", offset) }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), as: UTF8.self)
    }

    mutating func root() throws -> FlexValue {
        guard bytes.count >= 3 else { throw fail("shorter than 3 bytes", 0) }
        let width = Int(bytes[bytes.count - 1])
        let packed = bytes[bytes.count - 2]
        guard [1, 2, 4, 8].contains(width) else { throw fail("root byte width \(width)", bytes.count - 1) }
        return try value(at: bytes.count - 2 - width, parentWidth: width, packed: packed, depth: 0)
    }

    mutating func value(at offset: Int, parentWidth: Int, packed: UInt8, depth: Int) throws -> FlexValue {
        guard depth < FlexBuffers.maxDepth else {
            throw ModelFormatError.nestingTooDeep(what: "FlexBuffer", limit: FlexBuffers.maxDepth)
        }
        decoded += 1
        guard decoded <= FlexBuffers.maxValues else { throw fail("more than \(FlexBuffers.maxValues) values", offset) }
        let type = Int(packed >> 2)
        let childWidth = 1 << Int(packed & 3)
        switch type {
        case 0: return .null
        case 1: return .int(try readInt(offset, width: parentWidth))
        case 2: return .uint(try readUInt(offset, width: parentWidth))
        case 3: return .float(try readFloat(offset, width: parentWidth))
        case 26: return .bool(try readUInt(offset, width: parentWidth) != 0)
        case 6: return .int(try readInt(try indirect(offset, width: parentWidth), width: childWidth))
        case 7: return .uint(try readUInt(try indirect(offset, width: parentWidth), width: childWidth))
        case 8: return .float(try readFloat(try indirect(offset, width: parentWidth), width: childWidth))
        case 4: return .key(try keyString(at: try indirect(offset, width: parentWidth)))
        case 5, 25:
            let target = try indirect(offset, width: parentWidth)
            let size = try length(before: target, width: childWidth)
            try check(target, size)
            let slice = UnsafeRawBufferPointer(rebasing: bytes[target..<(target + size)])
            return type == 5 ? .string(String(decoding: slice, as: UTF8.self)) : .blob(Array(slice))
        case 9:
            return try map(at: try indirect(offset, width: parentWidth), width: childWidth, depth: depth)
        case 10:
            let target = try indirect(offset, width: parentWidth)
            let size = try length(before: target, width: childWidth)
            try check(target, size * childWidth + size)
            var items: [FlexValue] = []
            for i in 0..<size {
                let itemType = bytes[target + size * childWidth + i]
                items.append(try value(at: target + i * childWidth, parentWidth: childWidth, packed: itemType, depth: depth + 1))
            }
            return .vector(items)
        case 11...15, 36:
            let target = try indirect(offset, width: parentWidth)
            let size = try length(before: target, width: childWidth)
            return try typedVector(at: target, count: size, elementType: type == 36 ? 26 : type - 11 + 1, width: childWidth, depth: depth)
        case 16...24:
            let target = try indirect(offset, width: parentWidth)
            let count = (type - 16) / 3 + 2
            return try typedVector(at: target, count: count, elementType: (type - 16) % 3 + 1, width: childWidth, depth: depth)
        default:
            throw fail("unknown value type \(type)", offset)
        }
    }

    mutating func typedVector(at target: Int, count: Int, elementType: Int, width: Int, depth: Int) throws -> FlexValue {
        try check(target, count * width)
        var items: [FlexValue] = []
        for i in 0..<count {
            items.append(try value(at: target + i * width, parentWidth: width, packed: UInt8(elementType << 2), depth: depth + 1))
        }
        return .vector(items)
    }

    mutating func map(at target: Int, width: Int, depth: Int) throws -> FlexValue {
        let size = try length(before: target, width: width)
        try check(target, size * width + size)
        let keysField = target - 3 * width
        let keys = try indirect(keysField, width: width)
        let keysWidth = Int(clamping: try readUInt(target - 2 * width, width: width))
        guard [1, 2, 4, 8].contains(keysWidth) else { throw fail("key vector byte width \(keysWidth)", target - 2 * width) }
        let keyCount = try length(before: keys, width: keysWidth)
        guard keyCount == size else { throw fail("map has \(size) values but \(keyCount) keys", target) }
        try check(keys, size * keysWidth)
        var result: [String: FlexValue] = [:]
        for i in 0..<size {
            let key = try keyString(at: try indirect(keys + i * keysWidth, width: keysWidth))
            let itemType = bytes[target + size * width + i]
            result[key] = try value(at: target + i * width, parentWidth: width, packed: itemType, depth: depth + 1)
        }
        return .map(result)
    }
}
