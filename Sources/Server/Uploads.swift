import Foundation
import Hummingbird
import Media

/// Videos people upload to process: streamed to a temporary file in the album's `uploads` folder,
/// bounded in size (each, and all uploads together), checked by their first bytes and then by
/// opening them as FFmpeg would (a demuxer of that container, a decodable video stream), then
/// renamed into place (never over another file). A failed or refused upload leaves nothing behind.
struct Uploads: Sendable {
    let folder: URL
    let maxBytes: Int
    /// Most bytes the uploads folder may hold with this upload.
    let maxTotalBytes: Int

    /// FFmpeg's demuxer for each container ``sniffVideo(_:)`` names.
    static let demuxers = ["mp4": "mov", "mkv": "matroska", "avi": "avi", "ts": "mpegts"]

    /// Bytes of the regular files in the uploads folder.
    func storedBytes() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.reduce(0) { total, name in
            let attributes = try? FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)
            return total + ((attributes?[.type] as? FileAttributeType) == .typeRegular ? (attributes?[.size] as? Int ?? 0) : 0)
        }
    }

    /// The container a video's first bytes name, or nil.
    static func sniffVideo(_ head: [UInt8]) -> String? {
        func starts(_ signature: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + signature.count && Array(head[offset..<(offset + signature.count)]) == signature
        }
        if starts(Array("ftyp".utf8), at: 4) { return "mp4" }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return "mkv" }
        if starts(Array("RIFF".utf8)) && starts(Array("AVI ".utf8), at: 8) { return "avi" }
        if head.count >= 189 && head[0] == 0x47 && head[188] == 0x47 { return "ts" }
        return nil
    }

    /// Names an upload may keep: letters, digits, `._-`; anything else becomes `_`.
    static func safeStem(_ name: String) -> String {
        let stem = ((name as NSString).lastPathComponent as NSString).deletingPathExtension
        let cleaned = String(stem.unicodeScalars.prefix(80).map { CharacterSet.alphanumerics.contains($0) || "-_".unicodeScalars.contains($0) ? Character($0) : "_" })
        return cleaned.isEmpty || cleaned.hasPrefix(".") ? "video" : cleaned
    }

    /// `POST /api/v1/uploads?name=clip.mp4` with the video as the raw body: 201 and
    /// `{"path", "name", "size", "container"}`; 413 past the limit, 415 for anything not a video.
    func receive(_ request: Request, _ context: ServerContext) async throws -> Response {
        // A declared length is checked before a byte of the body is read.
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        if let declared, declared > maxBytes { throw HTTPError(.contentTooLarge, message: "the video is larger than \(maxBytes) bytes") }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let stored = storedBytes()
        let full = HTTPError(.init(code: 507, reasonPhrase: "Insufficient Storage"),
                             message: "the album's uploads hold \(stored) bytes; with this video they would pass \(maxTotalBytes) bytes: delete uploads first")
        if let declared, stored + declared > maxTotalBytes { throw full }
        let temporary = folder.appendingPathComponent(".upload-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil),
              let handle = FileHandle(forWritingAtPath: temporary.path) else {
            throw HTTPError(.internalServerError, message: "cannot write to \(folder.path)")
        }
        // The kept upload is a second link to the temporary file; the temporary name always goes.
        defer {
            try? handle.close()
            try? FileManager.default.removeItem(at: temporary)
        }
        var size = 0
        var head: [UInt8] = []
        var container: String?
        let notVideo = HTTPError(.unsupportedMediaType, message: "the body is not an MP4, MOV, Matroska/WebM, AVI or MPEG-TS video")
        for try await buffer in request.body {
            size += buffer.readableBytes
            if container == nil {
                head += buffer.getBytes(at: buffer.readerIndex, length: min(512 - head.count, buffer.readableBytes)) ?? []
                if head.count >= 512 {
                    guard let sniffed = Self.sniffVideo(head) else { throw notVideo }
                    container = sniffed
                }
            }
            guard size <= maxBytes else { throw HTTPError(.contentTooLarge, message: "the video is larger than \(maxBytes) bytes") }
            guard stored + size <= maxTotalBytes else { throw full }
            do { try handle.write(contentsOf: Data(buffer: buffer)) } catch {
                throw HTTPError(.init(code: 507, reasonPhrase: "Insufficient Storage"), message: "cannot store the upload: \(error.localizedDescription)")
            }
        }
        guard size > 0 else { throw HTTPError(.badRequest, message: "send the video as the request body") }
        guard let container = container ?? Self.sniffVideo(head) else { throw notVideo }
        try handle.synchronize()
        // The first bytes only say what the file claims to be: it must open as that container,
        // with a video stream FFmpeg can decode.
        let path = temporary.path, format = Self.demuxers[container]
        do {
            _ = try await offCooperativeThreads {
                var options = VideoReader.Options(openTimeout: 10, readTimeout: 10)
                options.allowedProtocols = "file"
                options.allowedFormats = format
                return try VideoReader(path: path, options: options).info.codec
            }
        } catch {
            throw HTTPError(.unsupportedMediaType, message: "the body is not a playable \(container) video: \("\(error)".replacingOccurrences(of: path, with: "the upload"))")
        }
        let stem = Self.safeStem(request.uri.queryParameters["name"].map(String.init) ?? "video")
        // link(2) fails on an existing name, so no upload ever replaces another file.
        for attempt in 0..<1000 {
            let name = attempt == 0 ? "\(stem).\(container)" : "\(stem)-\(attempt).\(container)"
            let target = folder.appendingPathComponent(name)
            if link(temporary.path, target.path) == 0 {
                var response = jsonResponse(["path": target.path, "name": name, "size": size, "container": container], status: .created)
                response.headers[.location] = "/api/v1/uploads/\(name)"
                return response
            }
            guard errno == EEXIST else { throw HTTPError(.internalServerError, message: "cannot keep the upload: \(String(cString: strerror(errno)))") }
        }
        throw HTTPError(.conflict, message: "too many uploads named \(stem)")
    }
}
