import Foundation

/// An exclusive advisory lock on a file (`flock`), held until the object goes away. Serializes
/// pulls of the same item across threads and processes.
final class FileLock {
    private let file: Int32

    /// Takes the lock, calling `waiting` first if another holder has it.
    /// - Throws: `StoreError.cache` when the lock file cannot be opened.
    init(path: URL, waiting: () -> Void) throws {
        file = open(path.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw StoreError.cache(path: path.path, reason: String(cString: strerror(errno))) }
        if flock(file, LOCK_EX | LOCK_NB) != 0 {
            waiting()
            while flock(file, LOCK_EX) != 0 {
                guard errno == EINTR else {
                    let reason = String(cString: strerror(errno))
                    close(file)
                    throw StoreError.cache(path: path.path, reason: "cannot lock: \(reason)")
                }
            }
        }
    }

    deinit {
        flock(file, LOCK_UN)
        close(file)
    }
}
