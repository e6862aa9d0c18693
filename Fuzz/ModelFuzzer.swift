// libFuzzer entry point for hostile model files: any bytes must parse or throw, and a model that
// parses must be checked (what `spotter inspect` does) and prepared on both backends (kernels,
// packed weights, memory plan) or throw: never trap, hang or allocate without bound.
// Built by scripts/fuzz-model.sh with Sources/TFLiteFormat and Sources/Inference (not part of the package).
import Inference
import TFLiteFormat

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzModel(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? FlexBuffers.decode(bytes)
    guard let model = try? Model(bytes: bytes) else { return 0 }
    for op in model.subgraph.operators {
        if let options = op.customOptions { _ = try? FlexBuffers.decode(options) }
    }
    _ = model.embeddedLabels
    _ = ModelReport(model: model)
    // The arena bound a server would use for a model from a stranger.
    let arena = 256 << 20
    guard (try? Interpreter.check(model, maxArenaBytes: arena)) != nil else { return 0 }
    for backend in [Interpreter.Options.Backend.reference, .xnnpack] {
        _ = try? Interpreter(model: model, options: .init(threadCount: 1, backend: backend, maxArenaBytes: arena))
    }
    return 0
}
