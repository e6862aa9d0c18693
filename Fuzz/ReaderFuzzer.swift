// libFuzzer entry point for the model reader: any bytes must parse or throw, never crash.
// Built by scripts/fuzz-reader.sh together with Sources/TFLiteFormat (not part of the package).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzModelReader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let model = try? Model(bytes: bytes) {
        for op in model.subgraph.operators {
            if let options = op.customOptions { _ = try? FlexBuffers.decode(options) }
        }
        _ = model.embeddedLabels
    }
    _ = try? FlexBuffers.decode(bytes)
    return 0
}
