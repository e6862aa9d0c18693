import Foundation
import Imaging
import Inference
import TFLiteFormat

/// Turns aligned face crops into embeddings with a recognition network such as MobileFaceNet:
/// input `[1, H, W, 3]` float32, output `[1, D]` floats; two crops of one person give nearby
/// embeddings.
///
/// Not thread-safe: one embedder per thread (or behind an actor).
public final class FaceEmbedder {
    public struct Options: Sendable {
        /// Pixels are fed as `(p - mean) / std`. Default 128 and 128 (MobileFaceNet's).
        public var mean: Float = 128
        public var std: Float = 128
        /// Default: all cores.
        public var threadCount: Int = Processors.available
        /// Default: `.xnnpack`.
        public var backend: Interpreter.Options.Backend = .xnnpack
        /// Let inference threads sleep after each crop (see `Interpreter.Options`), for pipelines that
        /// run other models in turn. Default false.
        public var parksThreadsAfterInvoke = false

        public init(mean: Float = 128, std: Float = 128, threadCount: Int = Processors.available, backend: Interpreter.Options.Backend = .xnnpack) {
            self.mean = mean
            self.std = std
            self.threadCount = threadCount
            self.backend = backend
        }
    }

    public let options: Options
    /// The crop size the network takes.
    public let inputSize: Size
    /// Numbers per embedding.
    public let dimension: Int
    private let interpreter: Interpreter

    /// - Throws: ``FaceError/unsupportedEmbedder(path:reason:)``, ``ModelFormatError``, ``InterpreterError``.
    /// - Parameter threads: workers shared with other models run in turn (``SharedThreads``); nil:
    ///   the embedder's own `options.threadCount` threads.
    public init(modelPath: String, options: Options = Options(), threads: SharedThreads? = nil) throws {
        self.options = options
        let model: Model
        do { model = try Model(contentsOf: URL(fileURLWithPath: modelPath)) } catch let error as ModelFormatError {
            throw error
        } catch {
            throw FaceError.unsupportedEmbedder(path: modelPath, reason: error.localizedDescription)
        }
        var interpreterOptions = Interpreter.Options(threadCount: options.threadCount, backend: options.backend)
        interpreterOptions.parksThreadsAfterInvoke = options.parksThreadsAfterInvoke
        interpreter = try Interpreter(model: model, options: interpreterOptions, threads: threads)
        let graph = model.subgraph
        let input = graph.tensors[graph.inputs[0]], shape = interpreter.shape(ofTensor: input.index)
        guard shape.count == 4, shape[0] == 1, shape[3] == 3, input.type == .float32 else {
            throw FaceError.unsupportedEmbedder(path: modelPath, reason: "the input \(shape) \(input.type) is not a float32 picture [1, height, width, 3]")
        }
        let output = graph.tensors[graph.outputs[0]], outputShape = interpreter.shape(ofTensor: output.index)
        guard output.type == .float32, outputShape.count == 2, outputShape[0] == 1 else {
            throw FaceError.unsupportedEmbedder(path: modelPath, reason: "the output \(outputShape) \(output.type) is not a float32 embedding [1, D]")
        }
        inputSize = Size(width: shape[2], height: shape[1])
        dimension = outputShape[1]
    }

    /// The embedding of `crop` (RGB24, the input size), scaled to unit length.
    public func embed(_ crop: Image) throws -> [Float] {
        precondition(crop.format == .rgb24 && crop.size == inputSize, "embed \(inputSize) RGB24 crops")
        try interpreter.withInput(at: 0) { buffer in
            let floats = buffer.bindMemory(to: Float.self)
            let (mean, std) = (options.mean, options.std)
            let row = inputSize.width * 3, stride = crop.strides[0]
            crop.data.withUnsafeBufferPointer { pixels in
                for y in 0..<inputSize.height {
                    for x in 0..<row { floats[y * row + x] = (Float(pixels[y * stride + x]) - mean) / std }
                }
            }
        }
        try interpreter.invoke()
        var embedding = try interpreter.withOutput(at: 0) { Array($0.bindMemory(to: Float.self).prefix(dimension)) }
        let length = embedding.reduce(0) { $0 + $1 * $1 }.squareRoot()
        if length > 0 { embedding = embedding.map { $0 / length } }
        return embedding
    }

    /// Euclidean distance between two embeddings (0 for the same, 2 for opposite unit vectors).
    public static func distance(_ a: [Float], _ b: [Float]) -> Float {
        precondition(a.count == b.count, "embeddings of different lengths")
        return zip(a, b).reduce(0) { $0 + ($1.0 - $1.1) * ($1.0 - $1.1) }.squareRoot()
    }
}
