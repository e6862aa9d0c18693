internal import CZlib
import Foundation
import TFLiteFormat

/// Unpacks downloaded zip archives into a folder, refusing anything that could escape it or grow
/// without bound.
enum ArchiveExtractor {
    /// Writes every file of the zip `archive` under `folder` (which must exist and be empty).
    /// - Throws: `StoreError.invalidArchive`, `.unsafeArchiveEntry` (absolute paths, `..`,
    ///   backslashes, duplicates), `.archiveTooLarge` (declared or actual sizes over `limit`),
    ///   `.cache` when a file cannot be written.
    static func extract(_ archive: Data, from url: String, into folder: URL, limit: Int) throws {
        try archive.withUnsafeBytes { try extract($0, from: url, into: folder, limit: limit) }
    }

    private static func extract(_ bytes: UnsafeRawBufferPointer, from url: String, into folder: URL, limit: Int) throws {
        let entries: [ZipEntry]
        do {
            entries = try ZipArchive.entries(in: bytes)
        } catch {
            throw StoreError.invalidArchive(url: url, reason: String(describing: error))
        }
        guard !entries.isEmpty else { throw StoreError.invalidArchive(url: url, reason: "no zip directory") }

        var seen = Set<String>()
        var declared = 0
        for entry in entries {
            guard let components = safeComponents(entry.name) else { throw StoreError.unsafeArchiveEntry(url: url, entry: entry.name) }
            guard seen.insert(components.joined(separator: "/")).inserted else {
                throw StoreError.unsafeArchiveEntry(url: url, entry: entry.name)
            }
            declared += entry.size
            guard declared <= limit else { throw StoreError.archiveTooLarge(url: url, limit: limit) }
        }

        for entry in entries {
            let components = safeComponents(entry.name)!
            var directory = folder
            for part in components.dropLast() { directory.appendPathComponent(part, isDirectory: true) }
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw StoreError.cache(path: directory.path, reason: error.localizedDescription)
            }
            if entry.isDirectory { continue }
            let data = try contents(of: entry, in: bytes, url: url)
            let target = directory.appendingPathComponent(components.last!)
            try writeNew(data, to: target)
        }
    }

    /// The path components of an entry name that stays inside its folder, or nil.
    static func safeComponents(_ name: String) -> [String]? {
        guard !name.isEmpty, !name.hasPrefix("/"), !name.contains("\\"), !name.contains("\0") else { return nil }
        let components = name.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty else { return nil }
        for part in components {
            if part == "." || part == ".." || part.count > 255 { return nil }
            // A drive letter ("C:") means an absolute Windows path.
            if part.count == 2, part.hasSuffix(":") { return nil }
        }
        return components
    }

    /// An entry's uncompressed bytes, checked against its declared size and CRC-32.
    private static func contents(of entry: ZipEntry, in bytes: UnsafeRawBufferPointer, url: String) throws -> [UInt8] {
        let compressed = UnsafeRawBufferPointer(rebasing: bytes[entry.dataOffset..<(entry.dataOffset + entry.compressedSize)])
        var output: [UInt8]
        switch entry.method {
        case 0:
            guard entry.compressedSize == entry.size else {
                throw StoreError.invalidArchive(url: url, reason: "\"\(entry.name)\": stored sizes differ")
            }
            output = Array(compressed)
        case 8:
            output = try inflate(compressed, size: entry.size, name: entry.name, url: url)
        default:
            throw StoreError.invalidArchive(url: url, reason: "\"\(entry.name)\": compression method \(entry.method) (only stored and deflate are read)")
        }
        let crc = output.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
        guard crc == entry.crc32 else {
            throw StoreError.invalidArchive(url: url, reason: "\"\(entry.name)\": CRC-32 mismatch")
        }
        return output
    }

    /// Raw deflate into exactly `size` bytes; more output than declared is an error, not a
    /// bigger buffer.
    private static func inflate(_ input: UnsafeRawBufferPointer, size: Int, name: String, url: String) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: size + 1)
        var stream = z_stream()
        guard spotter_inflate_init_raw(&stream) == Z_OK else {
            throw StoreError.invalidArchive(url: url, reason: "zlib could not start")
        }
        defer { inflateEnd(&stream) }
        let status: Int32 = output.withUnsafeMutableBufferPointer { target in
            // zlib's next_in is not const, but zlib does not write through it.
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(input.count)
            stream.next_out = target.baseAddress
            stream.avail_out = uInt(target.count)
            return CZlib.inflate(&stream, Z_FINISH)
        }
        guard status == Z_STREAM_END else {
            let reason = status == Z_BUF_ERROR || status == Z_OK ? "it unpacks to more than the \(size) bytes it declares" : "corrupt deflate data (zlib \(status))"
            throw StoreError.invalidArchive(url: url, reason: "\"\(name)\": \(reason)")
        }
        guard Int(stream.total_out) == size else {
            throw StoreError.invalidArchive(url: url, reason: "\"\(name)\": \(stream.total_out) bytes instead of the declared \(size)")
        }
        output.removeLast()
        return output
    }

    /// Creates `target` (never following or replacing an existing file) with `data`.
    private static func writeNew(_ data: [UInt8], to target: URL) throws {
        let file = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw StoreError.cache(path: target.path, reason: String(cString: strerror(errno))) }
        defer { close(file) }
        var done = 0
        while done < data.count {
            let written = data.withUnsafeBytes { write(file, $0.baseAddress! + done, data.count - done) }
            if written < 0 {
                if errno == EINTR { continue }
                throw StoreError.cache(path: target.path, reason: String(cString: strerror(errno)))
            }
            done += written
        }
    }
}
