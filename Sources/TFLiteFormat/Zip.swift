/// One file in a zip archive's central directory.
public struct ZipEntry: Sendable, Equatable {
    /// The name as stored (may contain `/`; never trust it as a path without checking).
    public var name: String
    /// Compression method: 0 stored, 8 deflate.
    public var method: Int
    public var compressedSize: Int
    /// Uncompressed size as the central directory claims it.
    public var size: Int
    public var crc32: UInt32
    /// Where the entry's (compressed) bytes start, relative to the start of the bytes given.
    public var dataOffset: Int

    public var isDirectory: Bool { name.hasSuffix("/") }
}

/// Reads a zip archive's central directory: the archive TFLite Metadata appends to a model, or a
/// downloaded model archive.
///
/// Offsets are bounds-checked; the archive may start anywhere in the bytes (its stored offsets are
/// relative to the archive start, found from the central directory's position). Zip64 archives
/// are refused.
public enum ZipArchive {
    public static let maxEntries = 4096

    /// The entries of the archive at the end of `bytes`; empty when there is none.
    /// - Throws: `ModelFormatError.invalidZip` or `.truncated` naming the offset.
    public static func entries(in bytes: UnsafeRawBufferPointer) throws -> [ZipEntry] {
        try entries(FlatBufferReader(bytes))
    }

    static func entries(_ reader: FlatBufferReader) throws -> [ZipEntry] {
        guard let end = try findEndRecord(reader) else { return [] }
        let count = Int(try reader.load(UInt16.self, at: end + 10, "zip end record"))
        let directorySize = Int(try reader.load(UInt32.self, at: end + 12, "zip end record"))
        let directoryOffset = Int(try reader.load(UInt32.self, at: end + 16, "zip end record"))
        guard count <= maxEntries else { throw ModelFormatError.invalidZip(reason: "\(count) entries", offset: end) }
        guard count != 0xFFFF, directoryOffset != 0xFFFF_FFFF else {
            throw ModelFormatError.invalidZip(reason: "zip64 archives are not supported", offset: end)
        }
        // Bytes before the archive (a model, say) shift every stored offset.
        let shift = end - directorySize - directoryOffset
        guard shift >= 0 else { throw ModelFormatError.invalidZip(reason: "central directory outside the file", offset: end) }
        var position = directoryOffset + shift
        var entries: [ZipEntry] = []
        for _ in 0..<count {
            guard try reader.load(UInt32.self, at: position, "zip central directory") == 0x0201_4b50 else {
                throw ModelFormatError.invalidZip(reason: "bad central directory signature", offset: position)
            }
            let method = Int(try reader.load(UInt16.self, at: position + 10, "zip entry"))
            let crc = try reader.load(UInt32.self, at: position + 16, "zip entry")
            let compressedSize = Int(try reader.load(UInt32.self, at: position + 20, "zip entry"))
            let size = Int(try reader.load(UInt32.self, at: position + 24, "zip entry"))
            let nameLength = Int(try reader.load(UInt16.self, at: position + 28, "zip entry"))
            let extraLength = Int(try reader.load(UInt16.self, at: position + 30, "zip entry"))
            let commentLength = Int(try reader.load(UInt16.self, at: position + 32, "zip entry"))
            let localOffset = Int(try reader.load(UInt32.self, at: position + 42, "zip entry")) + shift
            try reader.check(position + 46, nameLength, "zip entry name")
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: reader.bytes[(position + 46)..<(position + 46 + nameLength)]), as: UTF8.self)
            position += 46 + nameLength + extraLength + commentLength

            guard try reader.load(UInt32.self, at: localOffset, "zip local header") == 0x0403_4b50 else {
                throw ModelFormatError.invalidZip(reason: "bad local header signature for \"\(name)\"", offset: localOffset)
            }
            let localName = Int(try reader.load(UInt16.self, at: localOffset + 26, "zip local header"))
            let localExtra = Int(try reader.load(UInt16.self, at: localOffset + 28, "zip local header"))
            let dataStart = localOffset + 30 + localName + localExtra
            try reader.check(dataStart, compressedSize, "zip entry \"\(name)\"")
            entries.append(ZipEntry(name: name, method: method, compressedSize: compressedSize, size: size,
                                    crc32: crc, dataOffset: dataStart))
        }
        return entries
    }

    /// Position of the end-of-central-directory record, searched in the last 64 KiB + 22 bytes.
    private static func findEndRecord(_ reader: FlatBufferReader) throws -> Int? {
        let count = reader.count
        guard count >= 22 else { return nil }
        let lowest = max(0, count - 22 - 65_535)
        var position = count - 22
        while position >= lowest {
            if reader.bytes[position] == 0x50, try reader.load(UInt32.self, at: position, "zip end record") == 0x0605_4b50 {
                let commentLength = Int(try reader.load(UInt16.self, at: position + 20, "zip end record"))
                if position + 22 + commentLength == count { return position }
            }
            position -= 1
        }
        return nil
    }

    /// The stored (uncompressed) files by name, as the TFLite metadata populator writes them.
    /// - Throws: `ModelFormatError.unsupportedZipCompression` for a compressed file.
    static func storedFiles(_ reader: FlatBufferReader) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for entry in try entries(reader) where !entry.isDirectory {
            guard entry.method == 0 else { throw ModelFormatError.unsupportedZipCompression(file: entry.name, method: entry.method) }
            guard entry.compressedSize == entry.size else {
                throw ModelFormatError.invalidZip(reason: "stored entry \"\(entry.name)\" with differing sizes", offset: entry.dataOffset)
            }
            files[entry.name] = Array(UnsafeRawBufferPointer(rebasing: reader.bytes[entry.dataOffset..<(entry.dataOffset + entry.size)]))
        }
        return files
    }
}
