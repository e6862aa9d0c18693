import Foundation
import ModelStore
import Testing
import TestSupport

/// Tests/Fixtures/http_server.py running on 127.0.0.1 for the life of this object.
final class TestServer {
    struct FileInfo: Decodable { var size: Int; var sha256: String }
    struct Request: Decodable, Equatable { var path: String; var range: String?; var if_range: String? }
    private struct Hello: Decodable { var port: Int; var files: [String: FileInfo] }

    let process = Process()
    let port: Int
    let files: [String: FileInfo]

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Fixtures.committed.appendingPathComponent("http_server.py").path, Fixtures.shared.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            line += chunk
        }
        let hello = try JSONDecoder().decode(Hello.self, from: line)
        port = hello.port
        files = hello.files
    }

    deinit {
        // SIGKILL: the child inherits the test thread's signal mask, in which SIGTERM may be blocked.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func url(_ mode: String, _ name: String) -> String { "http://127.0.0.1:\(port)/\(mode)/\(name)" }

    /// Requests the server has seen, oldest first (the `/log` request itself excluded).
    func requests() throws -> [Request] {
        let data = Data(try run("curl", ["-sf", "http://127.0.0.1:\(port)/log"]).utf8)
        return try JSONDecoder().decode([Request].self, from: data).filter { $0.path != "/log" }
    }

    /// A catalog entry for one of the server's files.
    func entry(_ name: String, mode: String = "files", file: String, packaging: CatalogEntry.Packaging = .zip,
               files: [String] = ["detect.tflite", "labelmap.txt"], sha256: String? = nil, size: Int? = nil) -> CatalogEntry {
        CatalogEntry(name: name, kind: .model, url: url(mode, file), packaging: packaging, files: files,
                     size: size ?? self.files[file]?.size, sha256: sha256 ?? self.files[file]?.sha256,
                     license: "Apache-2.0", summary: "test entry")
    }
}

func temporaryCache(_ name: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-\(name)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Every file under `root`, relative, sorted: what "the cache as it was" means in these tests.
func listing(_ root: URL) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: root.path) else { return [] }
    var paths: [String] = []
    while let path = enumerator.nextObject() as? String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isDirectory), !isDirectory.boolValue {
            paths.append(path)
        }
    }
    return paths.sorted()
}

/// SHA-256 as coreutils' sha256sum computes it.
func sha256sum(_ url: URL) throws -> String {
    String(try run("sha256sum", [url.path]).prefix(64))
}
