/// Reads the zip archive that TFLite Metadata appends to a model to carry its associated files.
///
/// Only stored (uncompressed) entries are returned, which is how the metadata populator writes
/// them. Offsets are bounds-checked; the archive may start anywhere in the file (its stored offsets
/// are relative to the archive start, which is found from the central directory's position).
struct ZipReader {
    static let maxEntries = 4096
    let reader: FlatBufferReader

    /// The stored files by name; empty when the file has no zip archive at its end.
    func storedFiles() throws -> [String: [UInt8]] {
        guard let end = try findEndRecord() else { return [:] }
        let entries = Int(try reader.load(UInt16.self, at: end + 10, "zip end record"))
        let directorySize = Int(try reader.load(UInt32.self, at: end + 12, "zip end record"))
        let directoryOffset = Int(try reader.load(UInt32.self, at: end + 16, "zip end record"))
        guard entries <= Self.maxEntries else { throw ModelFormatError.invalidZip(reason: "\(entries) entries", offset: end) }
        // Bytes before the archive (the model itself) shift every stored offset.
        let shift = end - directorySize - directoryOffset
        guard shift >= 0 else { throw ModelFormatError.invalidZip(reason: "central directory outside the file", offset: end) }
        var position = directoryOffset + shift
        var files: [String: [UInt8]] = [:]
        for _ in 0..<entries {
            guard try reader.load(UInt32.self, at: position, "zip central directory") == 0x0201_4b50 else {
                throw ModelFormatError.invalidZip(reason: "bad central directory signature", offset: position)
            }
            let method = Int(try reader.load(UInt16.self, at: position + 10, "zip entry"))
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
            guard method == 0 else {
                if name.hasSuffix("/") { continue }
                throw ModelFormatError.unsupportedZipCompression(file: name, method: method)
            }
            guard compressedSize == size else {
                throw ModelFormatError.invalidZip(reason: "stored entry \"\(name)\" with differing sizes", offset: position)
            }
            try reader.check(dataStart, size, "zip entry \"\(name)\"")
            files[name] = Array(UnsafeRawBufferPointer(rebasing: reader.bytes[dataStart..<(dataStart + size)]))
        }
        return files
    }

    /// Position of the end-of-central-directory record, searched in the last 64 KiB + 22 bytes.
    private func findEndRecord() throws -> Int? {
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
}
