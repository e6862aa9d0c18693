import TFLiteFormat

/// What a model holds and whether Spotter can run it: the data behind `spotter inspect`.
public struct ModelReport: Sendable, Codable {
    public struct TensorSummary: Sendable, Codable {
        public var index: Int
        public var name: String
        public var shape: [Int]
        public var type: String
        public var scale: [Float]?
        public var zeroPoint: [Int64]?
    }

    public struct OperatorSummary: Sendable, Codable {
        public var name: String
        public var count: Int
        public var supported: Bool
        /// Why one of these operators cannot run (its index and the reason), when the check failed on it.
        public var problem: String?
    }

    public struct MetadataSummary: Sendable, Codable {
        public var name: String?
        public var version: String?
        public var description: String?
        public var minRuntimeVersion: String?
        public var labelCount: Int?
        public var normalizationMean: [Float]?
        public var normalizationStd: [Float]?
    }

    public var version: Int
    public var description: String?
    public var inputs: [TensorSummary]
    public var outputs: [TensorSummary]
    public var operators: [OperatorSummary]
    public var metadata: MetadataSummary
    public var runnable: Bool
    /// Why the model cannot run, when it cannot.
    public var problem: String?
    /// The detection output layout Spotter recognizes, if any.
    public var detectionLayout: String?
    /// Advice for running the model as a detector.
    public var advice: [String]
    /// How a detector scales pixels into the input and why (set by callers that build one: the
    /// inference layer does not know detector families).
    public var inputScaling: String?

    /// Inspects `model`, checking it on the reference backend (``Interpreter/check(_:)``) to learn
    /// whether it runs.
    public init(model: Model) {
        let graph = model.subgraph
        version = model.version
        description = model.description
        var counts: [String: (Int, Bool)] = [:]
        var order: [String] = []
        for op in graph.operators {
            let name = op.code.name
            if counts[name] == nil { order.append(name) }
            counts[name, default: (0, ReferenceKernels.isSupported(op.code))].0 += 1
        }
        var shapes = graph.tensors.map(\.shape)
        var failed: (name: String, problem: String)?
        do {
            shapes = try Interpreter.check(model)
            runnable = true
            problem = nil
        } catch {
            runnable = false
            problem = "\(error)"
            // The operator the check stopped on says so on its own line: never "supported" for
            // every operator and then "runnable: no".
            switch error as? InterpreterError {
            case .unsupportedOperator(let name, let index, _, _), .invalidOperator(let name, let index, _):
                failed = (name, "operator \(index): \(error)")
            case .backendFailed(_, _, let index, _) where graph.operators.indices.contains(index):
                failed = (graph.operators[index].code.name, "\(error)")
            default:
                break
            }
        }
        operators = order.map { name in
            let problem = failed?.name == name ? failed?.problem : nil
            return OperatorSummary(name: name, count: counts[name]!.0, supported: counts[name]!.1 && problem == nil, problem: problem)
        }
        func summary(_ index: Int) -> TensorSummary {
            let t = graph.tensors[index]
            return TensorSummary(
                index: index, name: t.name, shape: shapes[index], type: t.type.description,
                scale: t.quantization?.scales, zeroPoint: t.quantization?.zeroPoints)
        }
        inputs = graph.inputs.map(summary)
        outputs = graph.outputs.map(summary)
        metadata = MetadataSummary(
            name: model.metadata?.name, version: model.metadata?.version, description: model.metadata?.description,
            minRuntimeVersion: model.minRuntimeVersion, labelCount: model.embeddedLabels?.count,
            normalizationMean: model.metadata?.inputNormalization?.mean, normalizationStd: model.metadata?.inputNormalization?.std)

        advice = []
        let producers = Dictionary(graph.operators.flatMap { op in op.outputs.map { ($0, op) } }, uniquingKeysWith: { a, _ in a })
        let postProcessed = graph.outputs.count == 4
            && graph.outputs.allSatisfy { producers[$0]?.code.customName == DetectionPostProcess.name }
        let single = outputs.count == 1 ? outputs[0].shape : []
        if postProcessed {
            detectionLayout = "SSD with post-processing: boxes, classes, scores, count"
        } else if single.count == 3, single[0] == 1, single[1] > single[2], single[2] > 5 {
            detectionLayout = "YOLOv5 [1, \(single[1]), \(single[2])]: \(single[2] - 5) classes with objectness; letterbox input, NMS in Spotter"
        } else if single.count == 3, single[0] == 1, single[2] > single[1], single[1] > 4 {
            detectionLayout = "YOLOv8/11 [1, \(single[1]), \(single[2])]: \(single[1] - 4) classes; letterbox input, NMS in Spotter"
        } else if outputs.count == 2, outputs.allSatisfy({ $0.shape.count == 3 && $0.shape[0] == 1 && $0.type == "float32" }),
                  outputs[0].shape[1] == outputs[1].shape[1], let boxes = outputs.first(where: { $0.shape[2] >= 4 && $0.shape[2] % 2 == 0 }),
                  outputs.contains(where: { $0.shape[2] == 1 }) {
            detectionLayout = "BlazeFace [1, \(boxes.shape[1]), \(boxes.shape[2])] + scores: faces with \((boxes.shape[2] - 4) / 2) keypoints on MediaPipe's SSD anchors; letterbox input, weighted NMS in Spotter"
        } else {
            detectionLayout = nil
            advice.append("outputs \(outputs.map { "\($0.name) \($0.shape)" }.joined(separator: ", ")) are not a detection layout Spotter decodes (it expects TFLite_Detection_PostProcess's boxes, classes, scores, count, a YOLO output, or BlazeFace's boxes and scores)")
        }
        if let input = inputs.first, input.type == "float32", metadata.normalizationMean == nil {
            advice.append("the float input has no normalization metadata: pass --mean and --std (for example --mean 127.5 --std 127.5)")
        }
        if let problem, !runnable {
            advice.append("cannot run: \(problem)")
        }
    }
}
