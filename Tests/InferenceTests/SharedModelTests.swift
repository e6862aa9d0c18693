import Foundation
import Inference
import Testing
import TestSupport
import TFLiteFormat

/// The shared models beyond the SSD detector against LiteRT's own outputs
/// (fixtures-generated/models, made by scripts/make_model_fixtures.py).
@Suite struct SharedModelTests {
    static let cases = ["yolov5n/coffee", "yolov5n/astronaut", "yolov8n/coffee", "yolov8n/astronaut",
                        "attention-yolo-int8/coffee", "attention-yolo-int8/astronaut"]
    /// YOLO11's attention patterns (BATCH_MATMUL and FULLY_CONNECTED on two activations, int8
    /// SOFTMAX over the attention) in a whole graph: scripts/make_attention_yolo.py.
    static let models = ["yolov5n": Fixtures.shared.appendingPathComponent("models/yolov5n/yolov5n-int8.tflite"),
                         "yolov8n": Fixtures.shared.appendingPathComponent("models/yolov8n/yolov8n_full_integer_quant.tflite"),
                         "attention-yolo-int8": Fixtures.committed.appendingPathComponent("models/attention-yolo/attention-yolo-int8.tflite")]

    static func run(_ name: String, backend: Interpreter.Options.Backend) throws -> (output: [UInt8], ref: [UInt8], xnnpack: [UInt8]) {
        let model = String(name.split(separator: "/")[0])
        let folder = Fixtures.generated.appendingPathComponent("models/\(name)")
        let interpreter = try Interpreter(model: try Model(contentsOf: models[model]!),
                                          options: .init(threadCount: 2, backend: backend))
        try interpreter.copy(try Fixtures.npy(folder.appendingPathComponent("input.npy")).data, toInputAt: 0)
        try interpreter.invoke()
        return (try interpreter.output(at: 0).data, try Fixtures.npy(folder.appendingPathComponent("ref.npy")).data,
                try Fixtures.npy(folder.appendingPathComponent("xnnpack.npy")).data)
    }

    /// Models whose int8 SOFTMAX LiteRT computes in float (a float exp table and a float sum, summed
    /// in its compiled order): a probability landing on a rounding boundary can come out one step
    /// apart. yolov8n's distribution-focal-loss head has 537,600 of them; 4 differ by one step.
    static let floatSoftmax: Set<String> = ["yolov8n"]

    @Test("reference backend equals LiteRT's reference kernels", arguments: cases)
    func referenceBackendEqualsLiteRT(_ name: String) throws {
        let (output, ref, _) = try Self.run(name, backend: .reference)
        #expect(output.count == ref.count)
        let differences = zip(output, ref).map { abs(Int($0) - Int($1)) }.filter { $0 > 0 }
        if Self.floatSoftmax.contains(String(name.split(separator: "/")[0])) {
            #expect(differences.count <= ref.count / 10_000 && differences.allSatisfy { $0 <= 1 },
                    "\(differences.count) of \(ref.count) bytes differ, by up to \(differences.max() ?? 0)")
        } else {
            #expect(differences.isEmpty, "\(differences.count) of \(ref.count) bytes differ")
        }
    }

    @Test("XNNPACK backend differs from the reference kernels no more than LiteRT's XNNPACK does", arguments: cases)
    func xnnpackBackendIsWithinLiteRTsBound(_ name: String) throws {
        let (output, ref, xnnpack) = try Self.run(name, backend: .xnnpack)
        #expect(output.count == ref.count)
        // Single outputs of a 281-operator model can move by tens of steps on either fast path (a
        // rounding difference early on, amplified), so the distributions are compared: the mean and
        // the 99.9th percentile of the difference from the reference kernels.
        func stats(_ a: [UInt8], _ b: [UInt8]) -> (mean: Double, p999: Int) {
            let differences = zip(a, b).map { abs(Int($0) - Int($1)) }.sorted()
            return (Double(differences.reduce(0, +)) / Double(max(1, differences.count)), differences[Int(Double(differences.count - 1) * 0.999)])
        }
        let spotter = stats(output, ref), litert = stats(xnnpack, ref)
        #expect(spotter.mean <= litert.mean * 1.5 + 0.05 && spotter.p999 <= litert.p999 + 2,
                "from the reference: Spotter mean \(spotter.mean), p99.9 \(spotter.p999); LiteRT XNNPACK mean \(litert.mean), p99.9 \(litert.p999)")
    }
}

/// MobileFaceNet (hybrid: float activations, int8 weights; ABS, L2_NORMALIZATION) against LiteRT's
/// embeddings of the shared face photos. Both of Spotter's backends quantize each hybrid
/// convolution's input at every run as LiteRT's reference kernel does (the single-layer fixtures
/// `conv2d_hybrid_*` agree with it to float rounding); over a whole model a rounding that differs by
/// one ulp in one layer moves a value across a quantization step in the next, so whole embeddings
/// differ by such steps, as LiteRT's own two paths (reference and XNNPACK) differ from each other.
@Suite struct EmbeddingModelTests {
    static let faces = Fixtures.facePhotos()

    /// The angle between two vectors, in radians.
    static func angle(_ a: [Float], _ b: [Float]) -> Double {
        let dot = zip(a, b).reduce(0) { $0 + Double($1.0) * Double($1.1) }
        let norms = (a.reduce(0) { $0 + Double($1) * Double($1) } * b.reduce(0) { $0 + Double($1) * Double($1) }).squareRoot()
        return acos(min(1, max(-1, dot / max(norms, 1e-12))))
    }

    @Test("embeddings are as close to LiteRT's as LiteRT's two paths are to each other", arguments: faces)
    func embeddingsMatchLiteRT(_ face: String) throws {
        let folder = Fixtures.generated.appendingPathComponent("models/mobilefacenet/\(face)")
        let model = try Model(contentsOf: Fixtures.shared.appendingPathComponent("models/mobilefacenet/mobile_face_net.tflite"))
        let ref = try Fixtures.npy(folder.appendingPathComponent("ref.npy")).values(as: Float.self)
        let fast = try Fixtures.npy(folder.appendingPathComponent("xnnpack.npy")).values(as: Float.self)
        let litert = Self.angle(ref, fast)
        for backend in [Interpreter.Options.Backend.reference, .xnnpack] {
            let interpreter = try Interpreter(model: model, options: .init(threadCount: 2, backend: backend))
            try interpreter.copy(try Fixtures.npy(folder.appendingPathComponent("input.npy")).data, toInputAt: 0)
            try interpreter.invoke()
            let output = try interpreter.output(at: 0).values(as: Float.self)
            #expect(output.count == 128)
            let length = output.reduce(0) { $0 + $1 * $1 }.squareRoot()
            #expect(abs(length - 1) < 1e-4, "L2_NORMALIZATION gives unit length, got \(length)")
            let toFast = Self.angle(output, fast), toRef = Self.angle(output, ref)
            // Spotter's steps are an error of the same kind as the one between LiteRT's paths: its
            // angle to each path is at most twice theirs (0.02-0.04 rad on these faces; a face
            // recogniser's match threshold is about 1 rad).
            #expect(toFast <= 2 * litert + 1e-3 && toRef <= 2 * litert + 1e-3 && litert < 0.05,
                    "\(backend): \(toFast) rad from LiteRT XNNPACK, \(toRef) from LiteRT reference (LiteRT's paths: \(litert))")
        }
    }
}

/// BlazeFace short range (float32, float16 weights folded at load) against LiteRT's raw outputs
/// on the face photos: box and keypoint regressors and score logits.
@Suite struct FaceDetectorModelTests {
    static let faces = Fixtures.facePhotos()

    /// Largest difference between `a` and `b`, relative to the largest magnitude in `b`.
    static func relativeDifference(_ a: [Float], _ b: [Float]) -> Float {
        let scale = max(b.map(abs).max() ?? 1, 1e-6)
        return zip(a, b).map { abs($0 - $1) }.max().map { $0 / scale } ?? .infinity
    }

    @Test("raw outputs match LiteRT's on both backends", arguments: faces)
    func rawOutputsMatchLiteRT(_ face: String) throws {
        let folder = Fixtures.generated.appendingPathComponent("models/blazeface/\(face)")
        let model = try Model(contentsOf: Fixtures.shared.appendingPathComponent("models/blazeface-short-range/face_detection_short_range.tflite"))
        #expect(model.subgraph.operators.contains { $0.code.builtin == .dequantize })
        #expect(!model.foldingFloat16Constants().subgraph.operators.contains { $0.code.builtin == .dequantize })
        func load(_ name: String) throws -> [Float] { try Fixtures.npy(folder.appendingPathComponent(name)).values(as: Float.self) }
        let ref = (try load("ref.npy"), try load("ref-scores.npy")), fast = (try load("xnnpack.npy"), try load("xnnpack-scores.npy"))
        // LiteRT's own two paths differ by this much (different summation orders and fused kernels).
        let litert = max(Self.relativeDifference(fast.0, ref.0), Self.relativeDifference(fast.1, ref.1))
        for backend in [Interpreter.Options.Backend.reference, .xnnpack] {
            let interpreter = try Interpreter(model: model, options: .init(threadCount: 2, backend: backend))
            try interpreter.copy(try Fixtures.npy(folder.appendingPathComponent("input.npy")).data, toInputAt: 0)
            try interpreter.invoke()
            let boxes = try interpreter.output(at: 0).values(as: Float.self), scores = try interpreter.output(at: 1).values(as: Float.self)
            #expect(boxes.count == 896 * 16 && scores.count == 896)
            let toRef = max(Self.relativeDifference(boxes, ref.0), Self.relativeDifference(scores, ref.1))
            let toFast = max(Self.relativeDifference(boxes, fast.0), Self.relativeDifference(scores, fast.1))
            // The reference backend sums as LiteRT's reference kernels do: float rounding only.
            let bound: Float = backend == .reference ? 1e-5 : max(2 * litert, 1e-5)
            #expect(backend == .reference ? toRef <= bound : min(toRef, toFast) <= bound,
                    "\(backend): \(toRef) from LiteRT's reference, \(toFast) from its XNNPACK path (LiteRT's paths: \(litert))")
        }
    }
}

/// Two models taking turns on one ``SharedThreads`` (as the face pipeline runs BlazeFace, BlazeFace
/// again and MobileFaceNet on each picture) compute exactly what each computes on one thread: the
/// kernels split pixels and channels across threads, never a sum.
@Suite struct SharedThreadsTests {
    @Test func modelsTakingTurnsOnSharedWorkersMatchOneThreadExactly() throws {
        let detector = try Model(contentsOf: Fixtures.shared.appendingPathComponent("models/blazeface-short-range/face_detection_short_range.tflite"))
        let embedder = try Model(contentsOf: Fixtures.shared.appendingPathComponent("models/mobilefacenet/mobile_face_net.tflite"))
        let face = try #require(Fixtures.facePhotos().first, "no face photo")
        let detectorInput = try Fixtures.npy(Fixtures.generated.appendingPathComponent("models/blazeface/\(face)/input.npy")).data
        let embedderInput = try Fixtures.npy(Fixtures.generated.appendingPathComponent("models/mobilefacenet/\(face)/input.npy")).data
        func outputs(_ interpreter: Interpreter, _ input: [UInt8]) throws -> [Float] {
            try interpreter.copy(input, toInputAt: 0)
            try interpreter.invoke()
            return try (0..<interpreter.outputCount).flatMap { try interpreter.output(at: $0).values(as: Float.self) }
        }
        let alone = (try outputs(try Interpreter(model: detector, options: .init(threadCount: 1)), detectorInput),
                     try outputs(try Interpreter(model: embedder, options: .init(threadCount: 1)), embedderInput))
        let threads = SharedThreads(count: 2)
        threads.adaptsToLoad = false
        #expect(threads.count == min(2, Processors.available))
        let finder = try Interpreter(model: detector, options: .init(threadCount: 2), threads: threads)
        let embed = try Interpreter(model: embedder, options: .init(threadCount: 2), threads: threads)
        #expect(finder.threadCount == threads.count && embed.threadCount == threads.count)
        for _ in 0..<3 {
            threads.begin()
            #expect(try outputs(finder, detectorInput) == alone.0)
            #expect(try outputs(finder, detectorInput) == alone.0)
            #expect(try outputs(embed, embedderInput) == alone.1)
            threads.end()
        }
    }
}
