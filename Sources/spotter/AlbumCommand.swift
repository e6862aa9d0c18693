import ArgumentParser
import Cluster
import Foundation
import Pipeline

struct AlbumCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "album",
        abstract: "Look after an album of recorded clips.",
        discussion: """
            Examples:
              spotter album list ~/Clips
              spotter album repair ~/Clips
              spotter album prune ~/Clips --keep-days 30 --keep-gib 20
              spotter album list /srv/clips --database postgres://spotter@db/spotter
            """,
        subcommands: [List.self, Repair.self, Prune.self])

    /// The option every album command takes for the shared album of `spotter serve --database` nodes.
    struct ClusterOption: ParsableArguments {
        @Option(help: ArgumentHelp("The album is the shared album of a cluster whose rows are in this database (postgres://USER@HOST:PORT/DB; a password in PGPASSWORD rather than the URL stays out of ps).",
                                   valueName: "url"))
        var database: String?

        func validate() throws {
            if let database { do { _ = try DatabaseURL(database) } catch { throw ValidationError("--database: \(error)") } }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune",
            abstract: "Delete clips by age or to bring the album under a size (oldest first).",
            discussion: """
                Each deleted clip goes with its thumbnail, snapshot and index row. Clips being recorded \
                are not indexed yet and are never touched. `spotter serve --keep-days/--keep-gib` does \
                this every minute.

                Example:
                  spotter album prune ~/Clips --keep-days 30 --keep-gib 20
                """)

        @Argument(help: "The album folder.")
        var album: String

        @OptionGroup var cluster: ClusterOption

        @Option(parsing: .unconditional, help: "Delete clips older than this many days.")
        var keepDays: Double?

        @Option(parsing: .unconditional, help: "Delete the oldest clips while the album takes more than this many GiB.")
        var keepGib: Double?

        func validate() throws {
            guard keepDays != nil || keepGib != nil else { throw ValidationError("give --keep-days, --keep-gib or both") }
            guard (keepDays ?? 1) > 0, (keepGib ?? 1) > 0 else { throw ValidationError("--keep-days and --keep-gib must be positive") }
        }

        func run() throws {
            let retention = Retention(maxAge: keepDays.map { $0 * 86400 }, maxBytes: keepGib.map { Int($0 * 1_073_741_824) })
            let deleted: [ClipEntry]
            do { deleted = try openAlbum(album, database: cluster.database).prune(retention) } catch { throw CommandFailure("\(error)") }
            for entry in deleted { print("deleted \(entry.clip) (\(entry.createdAt))") }
            print("\(album): \(deleted.count) clip(s) deleted")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Print the album's clips, oldest first.")

        @Argument(help: "The album folder.")
        var album: String

        @Flag(help: "One JSON object per clip per line.")
        var json = false

        @OptionGroup var cluster: ClusterOption

        func run() throws {
            let clips: [ClipEntry]
            do { clips = try openAlbum(album, reading: true, database: cluster.database).clips() } catch let error as AlbumError { throw CommandFailure("\(error)") }
            for clip in clips {
                if json {
                    let data = try JSONEncoder().encode(clip)
                    print(String(decoding: data, as: UTF8.self))
                } else {
                    print(String(format: "%@  %.1f-%.1f s  %d frames  %@%@  %@", clip.clip, clip.start, clip.end, clip.frames,
                                 clip.labels.isEmpty ? "-" : clip.labels, clip.incomplete ? " (incomplete)" : "", clip.source))
                }
            }
        }
    }

    struct Repair: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "repair",
            abstract: "Index clips a killed or failed run left without an index row, remove unreadable ones.",
            discussion: """
                Clips with their record beside them (clips/NAME.json, written when a clip ends) are \
                indexed from it, with labels and times; other clips that can be decoded are indexed as \
                incomplete, with their real duration, frame count and a thumbnail; files without a \
                decodable frame are removed, and rows whose file is gone are dropped. A damaged \
                index.sqlite is moved aside (index.sqlite.damaged-TIME) and rebuilt from the clips. \
                Clips that a running `spotter record` is writing are left alone. `spotter record` and \
                `spotter serve` do this on start too.

                Example:
                  spotter album repair ~/Clips
                """)

        @Argument(help: "The album folder.")
        var album: String

        @OptionGroup var cluster: ClusterOption

        func run() throws {
            let report: AlbumRepair
            do {
                let opened = try openAlbum(album, database: cluster.database)
                if let recovery = opened.recovery { print(describe(recovery, album: album)) }
                report = try opened.repair()
            } catch { throw CommandFailure("\(error)") }
            for entry in report.adopted { print("indexed \(entry.clip) (\(entry.frames) frames\(entry.incomplete ? ", incomplete" : ""))") }
            for clip in report.removed { print("removed \(clip) (no decodable frame)") }
            for clip in report.forgotten { print("dropped the row of \(clip) (its file is gone)") }
            if report.adopted.isEmpty && report.removed.isEmpty && report.forgotten.isEmpty { print("\(album): every clip is indexed") }
        }
    }
}

/// Opens an existing album, refusing to create one where none is. For reading only, a folder this
/// process may not write is read from a private copy of its index. With `database`, the shared
/// album of a cluster, whose rows are in that database.
func openAlbum(_ path: String, reading: Bool = false, database: String? = nil) throws -> Album {
    let url = URL(fileURLWithPath: path)
    if let database {
        guard FileManager.default.fileExists(atPath: url.appendingPathComponent("clips").path) else {
            throw CommandFailure("\(path) is not an album (no clips folder); `spotter serve --album \(path) --database URL` makes one")
        }
        let store = ClusterStore(url: try DatabaseURL(database))
        // The connection pool, for the rest of the command.
        Task.detached { await store.run() }
        do { return try Album(directory: url, index: ClusterAlbumIndex(store: store)) } catch { throw CommandFailure("\(error)") }
    }
    guard FileManager.default.fileExists(atPath: url.appendingPathComponent("index.sqlite").path) else {
        if let cluster = try? String(contentsOf: url.appendingPathComponent(Album.clusterMarker), encoding: .utf8) {
            throw CommandFailure("\(path) is the shared album of a cluster: its rows are in \(cluster.trimmingCharacters(in: .whitespacesAndNewlines)); "
                                 + "add --database URL")
        }
        throw CommandFailure("\(path) is not an album (no index.sqlite); `spotter record INPUT --album \(path)` creates one")
    }
    if reading, access(path, W_OK) != 0 || access(url.appendingPathComponent("index.sqlite").path, W_OK) != 0 {
        do { return try Album(readingOnly: url) } catch { throw CommandFailure("\(error)") }
    }
    let album: Album
    do { album = try Album(directory: url) } catch { throw CommandFailure("\(error)") }
    if let recovery = album.recovery, reading { warn(describe(recovery, album: path)) }
    return album
}

/// One line on a damaged index that was replaced.
func describe(_ recovery: IndexRecovery, album: String) -> String {
    "\(album): the index was damaged (\(recovery.reason)); it was kept as \(recovery.keptAs) and rebuilt from \(recovery.rebuilt) clip(s)"
}
