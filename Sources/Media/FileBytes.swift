import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A regular file's bytes, mapped read-only. Opening never waits: a named pipe without a writer,
/// a socket or a device is refused with ``MediaError/notAFile(path:kind:)`` (open(2) on a FIFO
/// would block until someone writes, and no signal handler could end the wait).
struct FileBytes {
    let path: String
    private let data: Data

    /// - Throws: ``MediaError/cannotOpen(path:reason:)``, ``MediaError/notAFile(path:kind:)``.
    init(path: String) throws {
        self.path = path
        // O_NONBLOCK: open(2) returns at once on a FIFO; fstat then tells what was opened.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw MediaError.cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw MediaError.cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        if let kind = Self.kind(of: info.st_mode) { throw MediaError.notAFile(path: path, kind: kind) }
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: "/proc/self/fd/\(descriptor)"), options: .alwaysMapped)
        } catch {
            throw MediaError.cannotOpen(path: path, reason: (error as NSError).localizedDescription)
        }
    }

    /// What a file of this mode is when it is not a regular file ("a named pipe"), nil for a regular file.
    static func kind(of mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a folder"
        case S_IFIFO: return "a named pipe"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        default: return "not a regular file"
        }
    }

    /// What `path` is when it exists and is not a regular file (symbolic links followed), else nil.
    static func irregularKind(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return kind(of: info.st_mode)
    }

    /// The first bytes, as many as a picture header reader looks at.
    var head: Data { data.prefix(PictureHeader.scannedBytes) }

    func all() throws -> [UInt8] { [UInt8](data) }
}
