import Detection
import Foundation

/// A clip as every output shows it (the album API, `clip_finished` events and webhooks,
/// `record --json`, `album list --json`): `id`, `source`, `start`, `end`, `duration` (seconds, 3
/// decimals), `frames`, `labels` [...], `best_score` (4 decimals), `incomplete`, `created_at`,
/// `started_at`, `ended_at` (wall clock) and `objects` [{`track`, `label`, `first_t`, `last_t`,
/// `best_score`, `best_t`}]; on the server `url`, `thumbnail_url`, `snapshot_url` (under its
/// public address), on the command line `path` and `thumbnail` (absolute file paths).
public struct ClipReport: Sendable, Encodable {
    public var entry: ClipEntry
    /// Where URLs start (`https://cams.example.com`, or "" for paths on this server); nil: no URLs.
    public var base: String?
    /// The album folder, for absolute `path` and `thumbnail`; nil: no paths.
    public var album: URL?

    public init(_ entry: ClipEntry, base: String? = nil, album: URL? = nil) {
        self.entry = entry
        self.base = base
        self.album = album
    }

    enum CodingKeys: String, CodingKey {
        case id, source, start, end, duration, frames, labels, incomplete, objects, url, path, thumbnail
        case bestScore = "best_score"
        case createdAt = "created_at"
        case startedAt = "started_at"
        case endedAt = "ended_at"
        case thumbnailURL = "thumbnail_url"
        case snapshotURL = "snapshot_url"
        case sourceID = "source_id"
        case node, generation
    }

    private struct Object: Encodable {
        let track: Int, label: String, first_t: Double, last_t: Double, best_score: Double, best_t: Double
    }

    public func encode(to encoder: any Encoder) throws {
        let clip = entry
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(clip.id ?? 0, forKey: .id)
        try container.encode(clip.source, forKey: .source)
        try container.encode(ResultEncoding.round3(clip.start), forKey: .start)
        try container.encode(ResultEncoding.round3(clip.end), forKey: .end)
        try container.encode(ResultEncoding.round3(clip.duration), forKey: .duration)
        try container.encode(clip.frames, forKey: .frames)
        try container.encode(clip.labels.split(separator: ",").map(String.init), forKey: .labels)
        try container.encode(ResultEncoding.round4(clip.bestScore), forKey: .bestScore)
        try container.encode(clip.incomplete, forKey: .incomplete)
        try container.encode(clip.createdAt, forKey: .createdAt)
        try container.encode(clip.startedAt, forKey: .startedAt)
        try container.encode(clip.endedAt, forKey: .endedAt)
        try container.encodeIfPresent(clip.sourceID, forKey: .sourceID)
        try container.encodeIfPresent(clip.node, forKey: .node)
        try container.encodeIfPresent(clip.generation, forKey: .generation)
        try container.encode(clip.objects.map {
            Object(track: $0.track, label: $0.label, first_t: ResultEncoding.round3($0.firstSeen), last_t: ResultEncoding.round3($0.lastSeen),
                   best_score: ResultEncoding.round4($0.bestScore), best_t: ResultEncoding.round3($0.bestTime))
        }, forKey: .objects)
        if let base {
            let name = URL(fileURLWithPath: clip.clip).lastPathComponent
            try container.encode(base + "/media/clips/\(name)", forKey: .url)
            if let thumbnail = clip.thumbnail {
                let file = URL(fileURLWithPath: thumbnail)
                try container.encode(base + "/media/thumbnails/\(file.lastPathComponent)", forKey: .thumbnailURL)
                try container.encode(base + "/media/thumbnails/\(file.deletingPathExtension().lastPathComponent)-full.jpg", forKey: .snapshotURL)
            }
        }
        if let album {
            try container.encode(album.appendingPathComponent(clip.clip).path, forKey: .path)
            try container.encodeIfPresent(clip.thumbnail.map { album.appendingPathComponent($0).path }, forKey: .thumbnail)
        }
    }
}
