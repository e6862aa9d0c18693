import Foundation
import Imaging
import Inference
import Media
import Testing
import TestSupport

/// fixtures-generated/jpeg (scripts/make_jpeg_fixtures.py) holds JPEG variants written by OpenCV and
/// Pillow and the RGB pixels OpenCV's imread decodes from them, EXIF orientation applied.
@Suite struct JPEGTests {
    static let variants = ["baseline-420", "baseline-422", "baseline-444", "progressive-420", "progressive-444", "grayscale", "cmyk",
                           "restart-markers", "odd-size-420", "tiny-3x5", "phone-photo"] + (1...8).map { "exif-orientation-\($0)" }

    @Test("decoded JPEG pixels equal OpenCV's imread", arguments: variants)
    func decodedPixelsEqualOpenCV(_ name: String) throws {
        let folder = Fixtures.generated.appendingPathComponent("jpeg")
        let picture = try ImageFile.decode(folder.appendingPathComponent("\(name).jpg").path).upright
        let expected = try Fixtures.npy(folder.appendingPathComponent("\(name).npy"))
        #expect([picture.height, picture.width, 3] == expected.shape, "\(name): \(picture.width)x\(picture.height) against \(expected.shape)")
        let differing = zip(picture.data, expected.data).filter { $0 != $1 }.count
        #expect(picture.data == expected.data, "\(name): \(differing) bytes differ")
    }

    @Test func truncatedJPEGDecodesWhatIsThereAndGarbageIsAnError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-jpeg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let whole = try Fixtures.bytes(Fixtures.generated.appendingPathComponent("jpeg/baseline-420.jpg"))
        let truncated = folder.appendingPathComponent("truncated.jpg")
        try Data(whole.prefix(whole.count / 2)).write(to: truncated)
        // As OpenCV: a premature end is a warning, the rest of the picture is filled in.
        #expect(try ImageFile.decode(truncated.path).stored.width == 451)
        let header = folder.appendingPathComponent("header.jpg")
        try Data(whole.prefix(40)).write(to: header)
        #expect(throws: MediaError.self) { try ImageFile.decode(header.path) }
        let garbage = folder.appendingPathComponent("garbage.jpg")
        try Data([0xFF, 0xD8, 0xFF] + [UInt8](repeating: 0x42, count: 500)).write(to: garbage)
        #expect(throws: MediaError.self) { try ImageFile.decode(garbage.path) }
    }

    @Test func hugeDeclaredSizeIsRefusedBeforeDecoding() throws {
        // A baseline header declaring 60000x60000 pixels, nothing after it.
        var bytes = try Fixtures.bytes(Fixtures.generated.appendingPathComponent("jpeg/tiny-3x5.jpg"))
        let sof = try #require(Fixtures.find([0xFF, 0xC0], in: bytes))
        bytes[sof + 5] = 0xEA; bytes[sof + 6] = 0x60; bytes[sof + 7] = 0xEA; bytes[sof + 8] = 0x60
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spotter-huge-\(UUID().uuidString.prefix(8)).jpg")
        try Data(bytes).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }
        #expect(throws: MediaError.self) { try ImageFile.decode(path.path) }
    }
}
