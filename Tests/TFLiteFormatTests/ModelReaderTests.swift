import Foundation
import Testing
import TestSupport
import TFLiteFormat

@Suite struct ModelReaderTests {
    static let detect = try! Fixtures.bytes(Fixtures.detectModel)

    @Test func sharedModelMatchesItsPublishedAnatomy() throws {
        let model = try Model(bytes: Self.detect)
        let graph = model.subgraph
        #expect(model.version == 3)
        #expect(model.description == "TOCO Converted.")
        #expect(graph.tensors.count == 176)
        #expect(graph.operators.count == 64)
        #expect(graph.tensors.filter(\.isConstant).count == 108)
        let counts = Dictionary(grouping: graph.operators, by: { $0.code.name }).mapValues(\.count)
        #expect(counts == ["CONV_2D": 34, "DEPTHWISE_CONV_2D": 13, "RESHAPE": 13, "CONCATENATION": 2, "LOGISTIC": 1, "TFLite_Detection_PostProcess": 1])
        let input = graph.tensors[graph.inputs[0]]
        #expect(input.name == "normalized_input_image_tensor")
        #expect(input.shape == [1, 300, 300, 3] && input.type == .uint8)
        #expect(input.quantization == Quantization(scales: [0.0078125], zeroPoints: [128]))
        #expect(graph.outputs == [167, 168, 169, 170])
        let convs = graph.operators.filter { $0.code.builtin == .conv2D }
        #expect(convs.filter { if case .conv2D(let o) = $0.options { o.activation == .relu6 } else { false } }.count == 8)
        #expect(convs.filter { if case .conv2D(let o) = $0.options { o.strideWidth == 2 } else { false } }.count == 5)
    }

    @Test func postProcessCustomOptionsDecodeFromFlexBuffers() throws {
        let model = try Model(bytes: Self.detect)
        let op = try #require(model.subgraph.operators.first { $0.code.customName == "TFLite_Detection_PostProcess" })
        guard case .map(let options) = try FlexBuffers.decode(try #require(op.customOptions)) else {
            Issue.record("custom options are not a map")
            return
        }
        #expect(options["max_detections"]?.intValue == 10)
        #expect(options["num_classes"]?.intValue == 90)
        #expect(options["_output_quantized"]?.boolValue == true)
        #expect(options["y_scale"]?.doubleValue == 10 && options["h_scale"]?.doubleValue == 5)
        #expect(Float(options["nms_iou_threshold"]?.doubleValue ?? 0) == 0.6)
        #expect(options.count == 10)
    }

    @Test func metadataWrittenByTFLiteSupportIsRead() throws {
        let model = try Model(contentsOf: Fixtures.committed.appendingPathComponent("metadata/with_metadata.tflite"))
        let metadata = try #require(model.metadata)
        #expect(metadata.name == "Spotter metadata fixture")
        #expect(metadata.version == "v1.2")
        #expect(metadata.license == "Apache-2.0")
        #expect(metadata.inputNormalization == Normalization(mean: [127.5], std: [127.5]))
        #expect(metadata.outputs.first?.associatedFiles.first?.type == .tensorAxisLabels)
        #expect(model.embeddedLabels == ["background", "person", "bicycle", "car"])
    }

    @Test func modelWithoutMetadataHasNone() throws {
        let model = try Model(bytes: Self.detect)
        #expect(model.metadata == nil && model.associatedFiles.isEmpty && model.embeddedLabels == nil)
    }
}

/// Malformed files: each gives its own error, never a crash.
@Suite struct MalformedModelTests {
    static let detect = try! Fixtures.bytes(Fixtures.detectModel)
    static let small = try! Fixtures.bytes(Fixtures.committed.appendingPathComponent("ops/add_float32_relu/model.tflite"))

    static func error(_ bytes: [UInt8]) -> ModelFormatError? {
        do {
            _ = try Model(bytes: bytes)
            return nil
        } catch let error as ModelFormatError {
            return error
        } catch {
            return nil
        }
    }

    @Test("every truncation is an error", arguments: [0, 3, 7, 8, 16, 64, 1000, 100_000, 2_000_000, 4_180_000])
    func truncatedSharedModelThrows(_ length: Int) {
        let error = Self.error(Array(Self.detect.prefix(length)))
        #expect(error != nil, "truncated to \(length) bytes must fail")
    }

    @Test func everyTruncationOfASmallModelThrowsWithoutCrashing() {
        for length in 0..<Self.small.count {
            #expect(Self.error(Array(Self.small.prefix(length))) != nil, "truncated to \(length)")
        }
    }

    @Test func tinyFileIsTooSmall() {
        #expect(Self.error([1, 2, 3]) == .fileTooSmall(size: 3))
    }

    @Test func wrongFileIdentifierIsNamed() {
        var bytes = Self.small
        bytes.replaceSubrange(4..<8, with: Array("ABCD".utf8))
        #expect(Self.error(bytes) == .wrongFileIdentifier(found: "ABCD", expected: "TFL3"))
    }

    @Test func rootOffsetPastTheEndIsTruncation() {
        var bytes = Self.small
        bytes.replaceSubrange(0..<4, with: [0xff, 0xff, 0xff, 0x7f])
        guard case .truncated(let what, _, _, let size) = Self.error(bytes) else {
            Issue.record("expected truncated")
            return
        }
        #expect(what.contains("root offset") && size == bytes.count)
    }

    @Test func vtableOutsideTheFileIsInvalid() {
        var bytes = Self.small
        let root = Int(bytes[0]) | Int(bytes[1]) << 8
        bytes.replaceSubrange(root..<(root + 4), with: [0x00, 0x00, 0x00, 0x80])
        guard case .invalidVTable = Self.error(bytes) else {
            Issue.record("expected invalidVTable, got \(String(describing: Self.error(bytes)))")
            return
        }
    }

    @Test func tableThatIsItsOwnVTableIsRejectedNotLooped() {
        var bytes = Self.small
        let root = Int(bytes[0]) | Int(bytes[1]) << 8
        bytes.replaceSubrange(root..<(root + 4), with: [0, 0, 0, 0])
        #expect(Self.error(bytes) != nil)
    }

    @Test func hugeVectorLengthIsRejectedBeforeAllocating() throws {
        // A shape vector [1, 4, 4, 3]: its length field claims 2^31 - 1 elements.
        let pattern: [UInt8] = [4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0]
        let at = try #require(Fixtures.find(pattern, in: Self.small))
        var bytes = Self.small
        bytes.replaceSubrange(at..<(at + 4), with: [0xff, 0xff, 0xff, 0x7f])
        guard case .vectorTooLong(let what, let offset, let count, let size) = Self.error(bytes) else {
            Issue.record("expected vectorTooLong, got \(String(describing: Self.error(bytes)))")
            return
        }
        #expect(what.hasSuffix(".shape") && offset == at && count == 0x7fff_ffff && size == bytes.count)
    }

    @Test func tensorClaimingTwoToTheFortyElementsIsRefused() throws {
        let bytes = try Fixtures.bytes(Fixtures.committed.appendingPathComponent("invalid/huge_tensor.tflite"))
        #expect(Self.error(bytes) == .tensorTooLarge(tensor: "t0", elements: 1 << 40, limit: Model.maxTensorElements))
    }

    @Test func tensorNamingAMissingBufferIsRefused() throws {
        let bytes = try Fixtures.bytes(Fixtures.committed.appendingPathComponent("invalid/missing_buffer.tflite"))
        #expect(Self.error(bytes) == .indexOutOfRange(what: "tensor \"t0\" buffer", index: 7, count: 1))
    }

    @Test func constantShorterThanItsShapeIsRefused() throws {
        let bytes = try Fixtures.bytes(Fixtures.committed.appendingPathComponent("invalid/short_constant.tflite"))
        #expect(Self.error(bytes) == .bufferSizeMismatch(tensor: "t1", expected: 12, actual: 8))
    }

    @Test func randomByteFlipsNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var bytes = Self.small
            for _ in 0..<4 { bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            _ = Self.error(bytes)
        }
    }
}

@Suite struct FlexBufferTests {
    @Test func malformedFlexBuffersThrow() {
        #expect(throws: ModelFormatError.self) { try FlexBuffers.decode([1]) }
        #expect(throws: ModelFormatError.self) { try FlexBuffers.decode([0xff, 0x24, 0x01]) }
        #expect(throws: ModelFormatError.self) { try FlexBuffers.decode([9, 0x24, 3]) }
    }

    /// Found by scripts/fuzz-reader.sh: a map whose key-vector width field exceeds Int.max trapped.
    @Test func mapWithOversizedKeyWidthThrows() {
        func u64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        var bytes: [UInt8] = [UInt8(ascii: "a"), 0, 0, 0, 0, 0, 0, 0]
        bytes += u64(1) + u64(16)             // key vector: size 1, then the key at distance 16
        bytes += u64(8) + u64(.max) + u64(1)  // map header: keys at distance 8, key width 2^64-1, size 1
        bytes += u64(7) + [7]                 // one int value and its type byte
        bytes += [9, 39, 1]                   // root: map at distance 9, type MAP with 8-byte width, root width 1
        #expect(throws: ModelFormatError.self) { try FlexBuffers.decode(bytes) }
    }

    @Test func everyTruncationOfRealCustomOptionsThrowsOrDecodes() throws {
        let model = try Model(contentsOf: Fixtures.detectModel)
        let options = try #require(model.subgraph.operators.last?.customOptions)
        for length in 0..<options.count { _ = try? FlexBuffers.decode(Array(options.suffix(length))) }
        #expect(try FlexBuffers.decode(options) != .null)
    }
}
