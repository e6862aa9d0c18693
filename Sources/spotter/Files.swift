import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A file's identity (device and inode), nil when it does not exist.
struct FileID: Hashable {
    var device: UInt64
    var inode: UInt64

    init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// A message about `subject` that names it once: as given when it already mentions it (library
/// errors name their file or URL), else after `subject: `.
func mentioning(_ subject: String, _ message: String) -> String {
    message.contains(subject) ? message : "\(subject): \(message)"
}

/// What `path` is when it exists and is not a regular file ("a named pipe", "a folder"), else nil
/// (symbolic links are followed).
func irregularKind(_ path: String) -> String? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    switch info.st_mode & S_IFMT {
    case S_IFREG: return nil
    case S_IFDIR: return "a folder"
    case S_IFIFO: return "a named pipe"
    case S_IFSOCK: return "a socket"
    default: return "a device"
    }
}

/// Whether two paths name one file: the same device and inode when both exist (hard links,
/// symbolic links, `./x` and `x`), else the same absolute path.
func sameFile(_ a: String, _ b: String) -> Bool {
    if let first = FileID(a), let second = FileID(b) { return first == second }
    return URL(fileURLWithPath: a).standardizedFileURL.resolvingSymlinksInPath().path
        == URL(fileURLWithPath: b).standardizedFileURL.resolvingSymlinksInPath().path
}

/// Refuses an output path that names one of the inputs, so no command ever writes over its input.
func refuseOverwriting(inputs: [String], with output: String, flag: String) throws {
    for input in inputs where sameFile(input, output) {
        throw CommandFailure("\(flag) \(output) is the input \(input); choose another file (the input is never overwritten)")
    }
}

/// Checks that a file can be created at `path` (its folder exists and is writable, the path is not
/// a folder) before any long work starts.
func checkWritable(_ path: String, flag: String) throws {
    let url = URL(fileURLWithPath: path)
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
        throw CommandFailure("\(flag) \(path) is a folder; give a file name")
    }
    let folder = url.deletingLastPathComponent().path
    guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
        throw CommandFailure("\(flag) \(path): the folder \(folder) does not exist")
    }
    guard access(folder, W_OK) == 0 else { throw CommandFailure("\(flag) \(path): the folder \(folder) is not writable") }
}

/// A file written under a temporary name beside its destination and renamed into place when
/// complete, so the destination never holds a half-written file (a killed run leaves only the
/// hidden temporary, which the next run's writer does not reuse).
struct StagedFile {
    let destination: String
    let temporary: String

    init(_ destination: String) {
        self.destination = destination
        let url = URL(fileURLWithPath: destination)
        temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).partial-\(getpid())").path
        Self.removeAbandoned(besides: url)
    }

    /// Removes `.NAME.partial-PID` files a killed run left beside `destination`: those whose
    /// process no longer runs (another run's live partial is left alone).
    static func removeAbandoned(besides destination: URL) {
        let folder = destination.deletingLastPathComponent()
        let prefix = ".\(destination.lastPathComponent).partial-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] where name.hasPrefix(prefix) {
            guard let pid = Int32(name.dropFirst(prefix.count)), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            unlink(folder.appendingPathComponent(name).path)
        }
    }

    /// Moves the finished temporary file onto the destination (one `rename`).
    func commit() throws {
        guard rename(temporary, destination) == 0 else {
            throw CommandFailure("cannot move \(temporary) to \(destination): \(String(cString: strerror(errno)))")
        }
    }

    func discard() { unlink(temporary) }
}

/// A regular file's bytes, at most `limit` of them.
///
/// - Throws: `CommandFailure` for a missing file, a pipe or folder, or one larger than `limit`.
func readFile(_ path: String, limit: Int, flag: String? = nil) throws -> Data {
    let name = flag.map { "\($0) \(path)" } ?? path
    if let kind = irregularKind(path) { throw CommandFailure("\(name) is \(kind), not a file") }
    guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int else {
        throw CommandFailure("\(name): no such file")
    }
    guard size <= limit else { throw CommandFailure("\(name) is \(size) bytes; at most \(limit) are read") }
    do { return try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
        throw CommandFailure("\(name): \(error.localizedDescription)")
    }
}
