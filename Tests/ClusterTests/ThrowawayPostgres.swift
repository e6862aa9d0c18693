import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server of Debian's `postgresql` package, made with `initdb` in a temporary folder
/// and listening on 127.0.0.1 at a free port; stopped and deleted by ``stop()``. As root it runs
/// as the `postgres` user (PostgreSQL refuses root).
final class ThrowawayPostgres: @unchecked Sendable {  // immutable after init; stop() is idempotent
    let folder: URL
    let port: Int
    let binaries: URL

    var url: String { "postgres://spotter@127.0.0.1:\(port)/spotter" }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init() throws {
        guard let version = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.compactMap(Int.init).max() else {
            throw Failure(description: "PostgreSQL's server is not installed (Debian's postgresql package; scripts/setup.sh installs it)")
        }
        binaries = URL(fileURLWithPath: "/usr/lib/postgresql/\(version)/bin")
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        if getuid() == 0 { try FileManager.default.setAttributes([.ownerAccountName: "postgres"], ofItemAtPath: folder.path) }
        try Self.run(binaries: binaries, "initdb", ["-D", folder.appendingPathComponent("data").path, "-U", "spotter", "--auth=trust", "-E", "UTF8", "--no-sync"])
        var chosen = 0
        for _ in 0..<5 {
            let candidate = Int.random(in: 20000...40000)
            if (try? Self.start(binaries: binaries, folder: folder, port: candidate)) != nil {
                chosen = candidate
                break
            }
        }
        guard chosen > 0 else { throw Failure(description: "PostgreSQL did not start; see \(folder.path)/log") }
        port = chosen
        try run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "spotter", "spotter"])
    }

    /// Starts `postgres` in the foreground (not through `pg_ctl`: a server it daemonizes holds
    /// on to descriptors Foundation's `Process` waits on) and waits until it takes connections.
    private static func start(binaries: URL, folder: URL, port: Int) throws {
        let process = Process()
        let arguments = [binaries.appendingPathComponent("postgres").path, "-D", folder.appendingPathComponent("data").path, "-p", "\(port)",
                         "-k", folder.path, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"]
        if getuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", "postgres", "--"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
        }
        let log = folder.appendingPathComponent("log")
        if !FileManager.default.fileExists(atPath: log.path) { FileManager.default.createFile(atPath: log.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: log)
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<300 {
            guard process.isRunning else { throw Failure(description: "postgres exited: see \(log.path)") }
            // Asked through this server's own socket folder: on 127.0.0.1 the port may belong to
            // another test's server while ours is still finding out it cannot bind it.
            if (try? run(binaries: binaries, "pg_isready", ["-q", "-h", folder.path, "-p", "\(port)"])) != nil { return }
            usleep(100_000)
        }
        throw Failure(description: "postgres did not take connections within 30 s: see \(log.path)")
    }

    /// Stops the server at once (SIGQUIT: immediate shutdown, as a crash would), keeping its files.
    func kill() throws {
        let pidFile = folder.appendingPathComponent("data/postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            return
        }
        Glibc.kill(pid, SIGQUIT)
        for _ in 0..<300 where Glibc.kill(pid, 0) == 0 { usleep(100_000) }
    }

    /// Starts the server again on the same port after ``kill()``.
    func restart() throws { try Self.start(binaries: binaries, folder: folder, port: port) }

    /// A psql session reading statements as they are sent (a transaction can stay open).
    final class Session {
        let process = Process()
        let input = Pipe()

        fileprivate init(_ executable: URL, _ arguments: [String]) throws {
            process.executableURL = executable
            process.arguments = arguments
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        func send(_ statements: String) { input.fileHandleForWriting.write(Data(statements.utf8)) }

        /// Ends the input and waits for psql to exit.
        func finish() throws {
            try input.fileHandleForWriting.close()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw Failure(description: "psql session ended with \(process.terminationStatus)") }
        }
    }

    func session() throws -> Session {
        try Session(binaries.appendingPathComponent("psql"), ["-h", "127.0.0.1", "-p", "\(port)", "-U", "spotter", "-d", "spotter", "-q", "-v", "ON_ERROR_STOP=1"])
    }

    func stop() {
        try? kill()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Runs a PostgreSQL program (as `postgres` when we are root).
    @discardableResult
    func run(_ program: String, _ arguments: [String]) throws -> String {
        try Self.run(binaries: binaries, program, arguments)
    }

    @discardableResult
    static func run(binaries: URL, _ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        let path = binaries.appendingPathComponent(program).path
        if getuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", "postgres", "--", path] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
        }
        // Output goes to a file, read once the program has exited.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-pg-output-\(UUID().uuidString)")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        try handle.close()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(program) \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
        return text
    }
}
