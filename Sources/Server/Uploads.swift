import Foundation
import Hummingbird

/// Videos people upload to process: streamed to a temporary file in the album's `uploads` folder,
/// bounded in size, checked by their first bytes, then renamed into place (never over another
/// file). A failed or refused upload leaves nothing behind.
struct Uploads: Sendable {
    let folder: URL
    let maxBytes: Int

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
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
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
            do { try handle.write(contentsOf: Data(buffer: buffer)) } catch {
                throw HTTPError(.init(code: 507, reasonPhrase: "Insufficient Storage"), message: "cannot store the upload: \(error.localizedDescription)")
            }
        }
        guard size > 0 else { throw HTTPError(.badRequest, message: "send the video as the request body") }
        guard let container = container ?? Self.sniffVideo(head) else { throw notVideo }
        try handle.synchronize()
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
