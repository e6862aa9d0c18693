import Foundation
import Testing
import TestSupport
import TFLiteFormat

@Suite struct ModelReaderTests {
    static let detect = try! Fixtures.bytes(Fixtures.detectModel)

    /// Every model in ../shared (and the committed test models) as the `tflite` package, the
    /// schema's generated Python reader, reads it (scripts/make_anatomy_fixtures.py): tensors,
    /// operators, the option fields Spotter interprets, custom options decoded from FlexBuffers.
    @Test func everyModelReadsAsTheSchemasOwnReaderReadsIt() throws {
        let folder = Fixtures.generated.appendingPathComponent("anatomy")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
        // The seed apps' SSD is among them: the fixtures were made from ../shared.
        #expect(files.contains("shared__models__coco-ssd-mobilenet-v1__detect.tflite.json"))
        for file in files {
            let anatomy = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(file))) as? [String: Any])
            let base = anatomy["root"] as? String == "shared" ? Fixtures.shared : Fixtures.root
            let model = try Model(contentsOf: base.appendingPathComponent(try #require(anatomy["path"] as? String)))
            try Anatomy.compare(model, with: anatomy, file: file)
        }
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

/// Spotter's reading of a model against the `tflite` package's (a JSON object of
/// scripts/make_anatomy_fixtures.py).
enum Anatomy {
    static func compare(_ model: Model, with anatomy: [String: Any], file: String) throws {
        let graph = model.subgraph
        #expect(model.version == anatomy["version"] as? Int, "\(file): version")
        #expect(model.description == anatomy["description"] as? String, "\(file): description")
        #expect(graph.inputs == anatomy["inputs"] as? [Int] && graph.outputs == anatomy["outputs"] as? [Int], "\(file): inputs and outputs")
        let tensors = try #require(anatomy["tensors"] as? [[String: Any]])
        try #require(graph.tensors.count == tensors.count, "\(file): \(graph.tensors.count) tensors, the schema's reader \(tensors.count)")
        for (tensor, expected) in zip(graph.tensors, tensors) {
            let what = "\(file): tensor \(tensor.index) \"\(tensor.name)\""
            #expect(tensor.name == expected["name"] as? String, "\(what): name")
            #expect(tensor.shape == expected["shape"] as? [Int], "\(what): shape")
            #expect(tensor.type.rawValue == expected["type"] as? Int, "\(what): type")
            #expect(tensor.isConstant == expected["constant"] as? Bool, "\(what): constant")
            let scales = (expected["scales"] as? [Double] ?? []).map(Float.init)
            let zeroPoints = (expected["zero_points"] as? [Int] ?? []).map(Int64.init)
            #expect((tensor.quantization?.scales ?? []) == scales, "\(what): scales")
            #expect((tensor.quantization?.zeroPoints ?? []) == zeroPoints, "\(what): zero points")
            if !scales.isEmpty {
                #expect(tensor.quantization?.quantizedDimension == expected["quantized_dimension"] as? Int, "\(what): quantized dimension")
            }
        }
        let operators = try #require(anatomy["operators"] as? [[String: Any]])
        try #require(graph.operators.count == operators.count, "\(file): \(graph.operators.count) operators, the schema's reader \(operators.count)")
        for (op, expected) in zip(graph.operators, operators) {
            let what = "\(file): operator \(op.index) \(op.code.name)"
            #expect(Int(op.code.builtin.rawValue) == expected["builtin"] as? Int, "\(what): code")
            #expect(op.code.customName == expected["custom"] as? String, "\(what): custom code")
            #expect(op.inputs == expected["inputs"] as? [Int] && op.outputs == expected["outputs"] as? [Int], "\(what): tensors")
            let type = expected["options_type"] as? Int ?? -1
            if case .other(let code) = op.options { #expect(code == type, "\(what): options type") }
            if case .none = op.options { #expect(type == 0 || expected["options"] is NSNull, "\(what): options type") }
            if let fields = expected["options"] as? [String: Any] {
                for (name, value) in optionFields(op.options) {
                    #expect(same(value, fields[name]), "\(what): \(name) is \(value), the schema's reader \(String(describing: fields[name]))")
                }
            }
            if let custom = op.customOptions, !custom.isEmpty, let decoded = expected["custom_options"], !(decoded is NSNull) {
                let value = try FlexBuffers.decode(custom)
                #expect(same(value, decoded), "\(what): custom options \(value), the schema's reader \(decoded)")
            }
        }
    }

    /// The option fields Spotter interprets, named as the `tflite` package's accessors: numbers
    /// (flags as 0 and 1) or lists of integers.
    static func optionFields(_ options: BuiltinOptions) -> [String: Any] {
        func conv(_ o: Conv2DOptions) -> [String: Any] {
            ["Padding": o.padding.rawValue, "StrideW": o.strideWidth, "StrideH": o.strideHeight,
             "FusedActivationFunction": o.activation.rawValue, "DilationWFactor": o.dilationWidth, "DilationHFactor": o.dilationHeight]
        }
        func resize(_ o: ResizeOptions) -> [String: Any] { ["AlignCorners": o.alignCorners, "HalfPixelCenters": o.halfPixelCenters] }
        switch options {
        case .none, .other: return [:]
        case .conv2D(let o): return conv(o)
        case .depthwiseConv2D(let o): return conv(o).merging(["DepthMultiplier": o.depthMultiplier]) { $1 }
        case .pool2D(let o):
            return ["Padding": o.padding.rawValue, "StrideW": o.strideWidth, "StrideH": o.strideHeight, "FilterWidth": o.filterWidth,
                    "FilterHeight": o.filterHeight, "FusedActivationFunction": o.activation.rawValue]
        case .fullyConnected(let a, let keep, let format):
            return ["FusedActivationFunction": a.rawValue, "KeepNumDims": keep, "WeightsFormat": format]
        case .softmax(let beta): return ["Beta": Double(beta)]
        case .concatenation(let axis, let a): return ["Axis": axis, "FusedActivationFunction": a.rawValue]
        case .add(let a), .mul(let a), .sub(let a): return ["FusedActivationFunction": a.rawValue]
        case .reshape(let shape): return shape.map { ["NewShape": $0] } ?? [:]
        case .resizeBilinear(let o), .resizeNearestNeighbor(let o): return resize(o)
        case .squeeze(let dimensions): return ["SqueezeDims": dimensions]
        case .stridedSlice(let o):
            return ["BeginMask": o.beginMask, "EndMask": o.endMask, "EllipsisMask": o.ellipsisMask, "NewAxisMask": o.newAxisMask,
                    "ShrinkAxisMask": o.shrinkAxisMask, "Offset": o.offset]
        case .pack(let axis), .unpack(let axis): return ["Axis": axis]
        case .gather(let axis, let batchDims): return ["Axis": axis, "BatchDims": batchDims]
        case .reducer(let keep): return ["KeepDims": keep]
        case .depthToSpace(let size): return ["BlockSize": size]
        case .batchMatMul(let x, let y): return ["AdjX": x, "AdjY": y]
        }
    }

    /// Whether a value of Spotter's equals one read from JSON (numbers exactly, flags as 0 and 1).
    static func same(_ value: Any, _ json: Any?) -> Bool {
        switch value {
        case let flag as Bool: return (json as? NSNumber)?.doubleValue == (flag ? 1 : 0)
        case let number as Int: return (json as? NSNumber)?.doubleValue == Double(number)
        case let number as Double: return (json as? NSNumber)?.doubleValue == number
        case let list as [Int]: return (json as? [Int]) == list
        case let flex as FlexValue: return same(flex, json)
        default: return false
        }
    }

    static func same(_ flex: FlexValue, _ json: Any?) -> Bool {
        switch flex {
        case .null: return json is NSNull
        case .int(let v): return (json as? NSNumber)?.doubleValue == Double(v)
        case .uint(let v): return (json as? NSNumber)?.doubleValue == Double(v)
        case .float(let v): return (json as? NSNumber)?.doubleValue == v
        case .bool(let v): return (json as? NSNumber)?.doubleValue == (v ? 1 : 0)
        case .string(let v), .key(let v): return json as? String == v
        case .blob(let v): return (json as? [Int]) == v.map(Int.init)
        case .vector(let items):
            guard let list = json as? [Any], list.count == items.count else { return false }
            return zip(items, list).allSatisfy { same($0, $1) }
        case .map(let entries):
            guard let dictionary = json as? [String: Any], dictionary.count == entries.count else { return false }
            return entries.allSatisfy { same($0.value, dictionary[$0.key]) }
        }
    }
}
