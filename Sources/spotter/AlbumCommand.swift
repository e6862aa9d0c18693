import ArgumentParser
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
            """,
        subcommands: [List.self, Repair.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the album's clips, oldest first.")

        @Argument(help: "The album folder.")
        var album: String

        @Flag(help: "One JSON object per clip per line.")
        var json = false

        func run() throws {
            let clips = try openAlbum(album).clips()
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
            abstract: "Index clips a killed or failed run left without an index row, remove unreadable ones.",
            discussion: """
                Clips that can be decoded are indexed as incomplete, with their real duration, frame \
                count and a thumbnail; files without a decodable frame are removed. Clips that a running \
                `spotter record` is writing are left alone. `spotter record` does this on start too.

                Example:
                  spotter album repair ~/Clips
                """)

        @Argument(help: "The album folder.")
        var album: String

        func run() throws {
            let report: AlbumRepair
            do { report = try openAlbum(album).repair() } catch { throw CommandFailure("\(error)") }
            for entry in report.adopted { print("indexed \(entry.clip) (\(entry.frames) frames, incomplete)") }
            for clip in report.removed { print("removed \(clip) (no decodable frame)") }
            if report.adopted.isEmpty && report.removed.isEmpty { print("\(album): every clip is indexed") }
        }
    }
}

/// Opens an existing album, refusing to create one where none is.
func openAlbum(_ path: String) throws -> Album {
    guard FileManager.default.fileExists(atPath: URL(fileURLWithPath: path).appendingPathComponent("index.sqlite").path) else {
        throw CommandFailure("\(path) is not an album (no index.sqlite); `spotter record INPUT --album \(path)` creates one")
    }
    do { return try Album(directory: URL(fileURLWithPath: path)) } catch { throw CommandFailure("\(error)") }
}
