/// A bounds-checked reader of FlatBuffers data.
///
/// Every read checks its range against the data; a bad offset or length is a thrown
/// ``ModelFormatError``, never a trap. The reader borrows its bytes: create it inside a
/// `withUnsafeBytes` scope and do not let it escape.
struct FlatBufferReader {
    let bytes: UnsafeRawBufferPointer
    /// Absolute offset of `bytes[0]` in the model file, so errors name file offsets.
    let baseOffset: Int

    init(_ bytes: UnsafeRawBufferPointer, baseOffset: Int = 0) {
        self.bytes = bytes
        self.baseOffset = baseOffset
    }

    var count: Int { bytes.count }

    func check(_ offset: Int, _ size: Int, _ what: @autoclosure () -> String) throws {
        guard offset >= 0, size >= 0, offset <= bytes.count, size <= bytes.count - offset else {
            throw ModelFormatError.truncated(
                what: what(), offset: baseOffset + offset, needed: size, fileSize: baseOffset + bytes.count)
        }
    }

    func load<T: FixedWidthInteger>(_ type: T.Type, at offset: Int, _ what: @autoclosure () -> String) throws -> T {
        try check(offset, MemoryLayout<T>.size, what())
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    func loadFloat(at offset: Int, _ what: @autoclosure () -> String) throws -> Float {
        Float(bitPattern: try load(UInt32.self, at: offset, what()))
    }

    func loadDouble(at offset: Int, _ what: @autoclosure () -> String) throws -> Double {
        Double(bitPattern: try load(UInt64.self, at: offset, what()))
    }

    /// Follows the unsigned 32-bit offset stored at `offset`.
    func follow(_ offset: Int, _ what: @autoclosure () -> String) throws -> Int {
        let relative = Int(try load(UInt32.self, at: offset, what()))
        let target = offset + relative
        try check(target, 0, what())
        return target
    }

    /// The four identifier bytes at offset 4.
    func fileIdentifier() throws -> String {
        try check(0, 8, "file header")
        let raw = (4..<8).map { bytes[$0] }
        return String(decoding: raw.map { (0x20...0x7e).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    /// The root table, after checking the file identifier when one is expected.
    func root(identifier: String?, what: String) throws -> FlatTable {
        guard bytes.count >= 8 else { throw ModelFormatError.fileTooSmall(size: bytes.count) }
        if let identifier {
            let found = try fileIdentifier()
            guard found == identifier else {
                throw ModelFormatError.wrongFileIdentifier(found: found, expected: identifier)
            }
        }
        return try FlatTable(reader: self, position: try follow(0, "root offset of \(what)"), what: what)
    }
}

/// One table inside a FlatBuffer: its position and validated vtable.
struct FlatTable {
    let reader: FlatBufferReader
    let position: Int
    let vtable: Int
    let vtableSize: Int
    let what: String

    init(reader: FlatBufferReader, position: Int, what: String) throws {
        self.reader = reader
        self.position = position
        self.what = what
        let soffset = Int(try reader.load(Int32.self, at: position, "\(what) vtable offset"))
        let vtable = position - soffset
        guard vtable >= 0, vtable <= reader.count - 4 else {
            throw ModelFormatError.invalidVTable(what: what, offset: reader.baseOffset + position)
        }
        let size = Int(try reader.load(UInt16.self, at: vtable, "\(what) vtable"))
        let tableSize = Int(try reader.load(UInt16.self, at: vtable + 2, "\(what) vtable"))
        guard size >= 4, size % 2 == 0 else {
            throw ModelFormatError.invalidVTable(what: what, offset: reader.baseOffset + vtable)
        }
        try reader.check(vtable, size, "\(what) vtable")
        try reader.check(position, tableSize, "\(what) inline fields")
        self.vtable = vtable
        self.vtableSize = size
    }

    /// Absolute position of field `index`, or nil when the field is absent.
    func fieldPosition(_ index: Int) throws -> Int? {
        let slot = 4 + 2 * index
        guard slot + 2 <= vtableSize else { return nil }
        let offset = Int(try reader.load(UInt16.self, at: vtable + slot, "\(what) vtable"))
        return offset == 0 ? nil : position + offset
    }

    func scalar<T: FixedWidthInteger>(_ index: Int, default value: T, _ name: String) throws -> T {
        guard let at = try fieldPosition(index) else { return value }
        return try reader.load(T.self, at: at, "\(what).\(name)")
    }

    func float(_ index: Int, default value: Float, _ name: String) throws -> Float {
        guard let at = try fieldPosition(index) else { return value }
        return try reader.loadFloat(at: at, "\(what).\(name)")
    }

    func bool(_ index: Int, default value: Bool, _ name: String) throws -> Bool {
        try scalar(index, default: UInt8(value ? 1 : 0), name) != 0
    }

    func table(_ index: Int, _ name: String) throws -> FlatTable? {
        guard let at = try fieldPosition(index) else { return nil }
        let label = "\(what).\(name)"
        return try FlatTable(reader: reader, position: try reader.follow(at, label), what: label)
    }

    func vector(_ index: Int, elementSize: Int, _ name: String) throws -> FlatVector? {
        guard let at = try fieldPosition(index) else { return nil }
        let label = "\(what).\(name)"
        return try FlatVector(reader: reader, position: try reader.follow(at, label), elementSize: elementSize, what: label)
    }

    func string(_ index: Int, _ name: String) throws -> String? {
        guard let vector = try vector(index, elementSize: 1, name) else { return nil }
        return vector.string()
    }

    func tables(_ index: Int, _ name: String) throws -> [FlatTable] {
        guard let vector = try vector(index, elementSize: 4, name) else { return [] }
        return try (0..<vector.count).map { try vector.table(at: $0) }
    }

    func int32s(_ index: Int, _ name: String) throws -> [Int32]? {
        try vector(index, elementSize: 4, name)?.map { try $0.reader.load(Int32.self, at: $1, $0.what) }
    }

    func floats(_ index: Int, _ name: String) throws -> [Float]? {
        try vector(index, elementSize: 4, name)?.map { try $0.reader.loadFloat(at: $1, $0.what) }
    }

    func int64s(_ index: Int, _ name: String) throws -> [Int64]? {
        try vector(index, elementSize: 8, name)?.map { try $0.reader.load(Int64.self, at: $1, $0.what) }
    }
}

/// A vector inside a FlatBuffer whose whole extent has been checked against the data.
struct FlatVector {
    let reader: FlatBufferReader
    /// Position of the first element.
    let start: Int
    let count: Int
    let elementSize: Int
    let what: String

    init(reader: FlatBufferReader, position: Int, elementSize: Int, what: String) throws {
        let count = Int(try reader.load(UInt32.self, at: position, "\(what) length"))
        let available = reader.count - position - 4
        guard count <= available / max(elementSize, 1) else {
            throw ModelFormatError.vectorTooLong(
                what: what, offset: reader.baseOffset + position, count: count,
                fileSize: reader.baseOffset + reader.count)
        }
        self.reader = reader
        self.start = position + 4
        self.count = count
        self.elementSize = elementSize
        self.what = what
    }

    /// Absolute byte range of the vector's elements.
    var byteRange: Range<Int> { start..<(start + count * elementSize) }

    func map<T>(_ transform: (FlatVector, Int) throws -> T) rethrows -> [T] {
        var result: [T] = []
        result.reserveCapacity(count)
        for i in 0..<count { result.append(try transform(self, start + i * elementSize)) }
        return result
    }

    func table(at index: Int) throws -> FlatTable {
        let label = "\(what)[\(index)]"
        return try FlatTable(reader: reader, position: try reader.follow(start + index * 4, label), what: label)
    }

    func string() -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: reader.bytes[byteRange]), as: UTF8.self)
    }

    func strings() throws -> [String] {
        try (0..<count).map { index in
            let label = "\(what)[\(index)]"
            let at = try reader.follow(start + index * 4, label)
            return try FlatVector(reader: reader, position: at, elementSize: 1, what: label).string()
        }
    }
}
