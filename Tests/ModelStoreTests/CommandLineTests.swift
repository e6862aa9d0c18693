import Foundation
import ModelStore
import Testing
import TestSupport

/// `spotter models`, `--model NAME` and `--offline`, run as a user runs them, against the local server.
@Suite(.serialized) struct CommandLineTests {
    let server: TestServer
    let cache: URL
    let environment: [String: String]

    init() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Fixtures.spotter), "build spotter first (scripts/test.sh does)")
        server = try TestServer()
        cache = try temporaryCache("cli")
        // The default model's name, served by the local server.
        let catalog = [server.entry(Catalog.defaultModel, mode: "slow", file: "model.zip")]
        let catalogFile = cache.appendingPathComponent("catalog.json")
        try JSONEncoder().encode(catalog).write(to: catalogFile)
        environment = ["XDG_CACHE_HOME": cache.path, "SPOTTER_CATALOG": catalogFile.path, "SPOTTER_MODEL": "", "SPOTTER_OFFLINE": ""]
    }

    @Test func twoConcurrentPullsEndWithOneCompleteVerifiedCopy() throws {
        let first = try RunningProgram(Fixtures.spotter, ["models", "pull", Catalog.defaultModel], environment: environment)
        let second = try RunningProgram(Fixtures.spotter, ["models", "pull", Catalog.defaultModel], environment: environment)
        let results = [first.wait(), second.wait()]
        for result in results { #expect(result.status == 0, "\(result.errors)") }
        let paths = Set(results.map { $0.output.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(paths.count == 1)
        let model = URL(fileURLWithPath: try #require(paths.first))
        #expect(try sha256sum(model) == sha256sum(Fixtures.detectModel))
        #expect(try server.requests().map(\.path) == ["/slow/model.zip"], "one download, the other pull waited for it")
        let spotter = cache.appendingPathComponent("spotter")
        #expect(Fixtures.folders(spotter.appendingPathComponent("models")) == [Catalog.defaultModel])
        #expect(listing(spotter.appendingPathComponent("downloads")).isEmpty && listing(spotter.appendingPathComponent("staging")).isEmpty)
    }

    @Test func detectWithoutAModelFetchesTheDefaultOnceThenWorksOffline() throws {
        // A picture with something on it (LiteRT is sure of its top detection); the model served is the shared one.
        let picture = LiteRT.picturePath(try #require(LiteRT.surest?.name, "no shared picture with a clear LiteRT detection"))
        let online = try Fixtures.runSpotter(["detect", picture, "--json"], environment: environment)
        #expect(online.status == 0, "\(online.errors)")
        let offline = try Fixtures.runSpotter(["detect", picture, "--json", "--offline"], environment: environment)
        let local = try Fixtures.runSpotter(["detect", picture, "--json", "--model", Fixtures.detectModel.path], environment: environment)
        func detections(_ output: String) throws -> String {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
            let detections = try #require(object["detections"] as? [Any])
            return String(decoding: try JSONSerialization.data(withJSONObject: detections, options: .sortedKeys), as: UTF8.self)
        }
        #expect(offline.status == 0 && local.status == 0, "\(offline.errors) \(local.errors)")
        #expect(try detections(online.output) == detections(local.output) && detections(online.output) != "[]",
                "the fetched default model finds what the shared model file finds")
        #expect(try detections(offline.output) == detections(online.output))
        #expect(try server.requests().count == 1)
        let inspected = try Fixtures.runSpotter(["inspect", Catalog.defaultModel, "--json", "--offline"], environment: environment)
        #expect(inspected.status == 0 && inspected.output.contains("\"runnable\":true"), "\(inspected.errors)")

        let listed = try Fixtures.runSpotter(["models", "list", "--json"], environment: environment)
        let row = try #require(listed.output.split(separator: "\n").first { $0.contains(Catalog.defaultModel) })
        #expect(row.contains("\"cached\":true"))
        let removed = try Fixtures.runSpotter(["models", "rm", Catalog.defaultModel], environment: environment)
        #expect(removed.status == 0)
        #expect(try Fixtures.runSpotter(["models", "list", "--json"], environment: environment).output.contains("\"cached\":false"))
    }

    @Test(arguments: [["--offline"], []]) func offlineWithAnEmptyCacheNamesSpotterModelsPull(flags: [String]) throws {
        var environment = environment
        if flags.isEmpty { environment["SPOTTER_OFFLINE"] = "1" }
        let picture = LiteRT.picturePath(try #require(LiteRT.pictures.first, "no shared pictures"))
        for command in [["models", "path", Catalog.defaultModel], ["detect", picture]] {
            let result = try Fixtures.runSpotter(command + flags, environment: environment)
            #expect(result.status != 0)
            #expect(result.errors.contains("spotter models pull \(Catalog.defaultModel)"), "\(result.errors)")
        }
        #expect(try server.requests().isEmpty)
    }

    /// A file-size limit (`ulimit -f`) makes writes fail as a full disk does.
    @Test func aWriteFailureMidDownloadLosesNothingAndTheNextPullResumes() throws {
        let limited = try RunningProgram("/bin/bash", ["-c", "trap '' XFSZ; ulimit -f 1024; exec \"$0\" models pull \(Catalog.defaultModel)", Fixtures.spotter],
                                         environment: environment).wait()
        #expect(limited.status != 0)
        #expect(limited.errors.contains("File too large") && limited.errors.contains(".part"), "\(limited.errors)")
        let spotter = cache.appendingPathComponent("spotter")
        #expect(Fixtures.folders(spotter.appendingPathComponent("models")).isEmpty)
        let parts = listing(spotter.appendingPathComponent("downloads")).filter { $0.hasSuffix(".part") }
        #expect(parts.count == 1)

        let resumed = try Fixtures.runSpotter(["models", "pull", Catalog.defaultModel], environment: environment)
        #expect(resumed.status == 0, "\(resumed.errors)")
        #expect(try sha256sum(URL(fileURLWithPath: resumed.output.trimmingCharacters(in: .whitespacesAndNewlines))) == sha256sum(Fixtures.detectModel))
        #expect(try server.requests().last?.range == "bytes=1048576-")
    }

    @Test func aMissingModelFileIsNamed() throws {
        let picture = LiteRT.picturePath(try #require(LiteRT.pictures.first, "no shared pictures"))
        let result = try Fixtures.runSpotter(["detect", picture, "--model", "/nonexistent/detect.tflite"], environment: environment)
        #expect(result.status != 0 && result.errors.contains("no file at /nonexistent/detect.tflite"), "\(result.errors)")
    }
}
