/// Reads one field of a `multipart/form-data` body (what HTML forms and DeepStack clients send).
/// Every index is checked against the body.
enum Multipart {
    /// The `boundary` parameter of a `multipart/form-data` content type.
    static func boundary(contentType: String) -> String? {
        guard contentType.lowercased().hasPrefix("multipart/form-data") else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].lowercased() == "boundary" {
                let value = String(pair[1]).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return value.isEmpty || value.count > 200 ? nil : value
            }
        }
        return nil
    }

    /// The content of the part named `name`, nil when there is none.
    static func field(_ name: String, in body: [UInt8], boundary: String) -> ArraySlice<UInt8>? {
        let delimiter = Array("--\(boundary)".utf8)
        var position = 0
        while let start = find(delimiter, in: body, from: position) {
            var cursor = start + delimiter.count
            // The closing delimiter ends with "--".
            if cursor + 2 <= body.count, body[cursor] == UInt8(ascii: "-"), body[cursor + 1] == UInt8(ascii: "-") { return nil }
            guard let headerEnd = find(Array("\r\n\r\n".utf8), in: body, from: cursor) else { return nil }
            let headers = String(decoding: body[cursor..<headerEnd], as: UTF8.self).lowercased()
            cursor = headerEnd + 4
            guard let next = find(Array("\r\n".utf8) + delimiter, in: body, from: cursor) else { return nil }
            if headers.contains("name=\"\(name.lowercased())\"") { return body[cursor..<next] }
            position = next + 2
        }
        return nil
    }

    private static func find(_ pattern: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard !pattern.isEmpty, start >= 0, bytes.count >= pattern.count else { return nil }
        var index = start
        while index + pattern.count <= bytes.count {
            if bytes[index] == pattern[0], bytes[index..<(index + pattern.count)].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }
}

import Foundation
