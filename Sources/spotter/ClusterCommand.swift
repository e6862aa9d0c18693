import ArgumentParser
import Cluster
import Foundation
import Pipeline

struct ClusterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Look at a cluster of `spotter serve --database` nodes.",
        discussion: """
            Examples:
              spotter cluster status --database postgres://spotter@db/spotter
              spotter cluster status --database postgres://spotter@db/spotter --json
            """,
        subcommands: [Status.self])

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "List the cluster's nodes (heartbeat, sources, load) and sources (owner, lease generation, state).",
            discussion: """
                A node is live while its heartbeat is younger than a lease (5 s); a source's node is \
                the one holding an unexpired lease on it (none while it waits to be claimed).

                Example:
                  spotter cluster status --database postgres://spotter@127.0.0.1:5432/spotter
                """)

        @Option(help: ArgumentHelp("The cluster's database (postgres://USER@HOST:PORT/DB; a password in PGPASSWORD rather than the URL stays out of ps).", valueName: "url"))
        var database: String

        @Flag(help: "One JSON object: {\"nodes\": [...], \"sources\": [...]}.")
        var json = false

        func validate() throws {
            do { _ = try DatabaseURL(database) } catch { throw ValidationError("--database: \(error)") }
        }

        struct Answer: Codable {
            var nodes: [NodeStatus]
            var sources: [SourceStatus]
        }

        func run() async throws {
            let store = ClusterStore(url: try DatabaseURL(database))
            let pool = Task { await store.run() }
            defer { pool.cancel() }
            let answer: Answer
            do {
                answer = Answer(nodes: try await store.nodes(within: LeaseKeeper.Options().leaseSeconds), sources: try await store.sources())
            } catch {
                throw CommandFailure("\(error) (is this the database the nodes were started with --database?)")
            }
            if json {
                let encoder = JSONEncoder()
                encoder.keyEncodingStrategy = .convertToSnakeCase
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(answer), as: UTF8.self))
                return
            }
            print("nodes (\(answer.nodes.filter(\.live).count) live of \(answer.nodes.count)):")
            for node in answer.nodes {
                print("  \(node.name)  \(node.live ? "live" : "silent")  heartbeat \(String(format: "%.1f", node.heartbeatAge)) s ago  "
                      + "\(node.sources) sources  \(node.cores) cores (capacity \(String(format: "%.1f", node.capacity)))  load \(String(format: "%.2f", node.load))  "
                      + "claims \(node.claims) (takeovers \(node.takeovers))  \(node.address)")
            }
            print("sources (\(answer.sources.count)):")
            for source in answer.sources {
                let input = (try? JSONDecoder().decode(Input.self, from: Data(source.settings.utf8)))?.input ?? "?"
                print("  \(source.id)  \(source.node ?? "-")  generation \(source.generation)  \(source.desired == "paused" ? "paused" : source.state)  \(Album.redactingPassword(input))")
            }
        }

        private struct Input: Decodable { var input: String }
    }
}
