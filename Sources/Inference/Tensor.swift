import TFLiteFormat

/// A copy of a tensor's contents with its description.
public struct Tensor: Sendable {
    public var name: String
    public var type: TensorType
    public var shape: [Int]
    public var quantization: Quantization?
    /// Raw little-endian element bytes.
    public var data: [UInt8]

    public init(name: String, type: TensorType, shape: [Int], quantization: Quantization?, data: [UInt8]) {
        self.name = name
        self.type = type
        self.shape = shape
        self.quantization = quantization
        self.data = data
    }

    public var elementCount: Int { shape.reduce(1, *) }

    /// The elements reinterpreted as `T` (which must match ``type``'s size).
    public func values<T: BitwiseCopyable>(as _: T.Type) -> [T] {
        data.withUnsafeBytes { raw in
            (0..<(raw.count / MemoryLayout<T>.stride)).map {
                raw.loadUnaligned(fromByteOffset: $0 * MemoryLayout<T>.stride, as: T.self)
            }
        }
    }

    /// The elements as real numbers: floats as they are, quantized integers dequantized.
    public func dequantized() -> [Float] {
        let scale = quantization?.scale ?? 1
        let zero = Float(quantization?.zeroPoint ?? 0)
        switch type {
        case .float32: return values(as: Float.self)
        case .uint8: return data.map { (Float($0) - zero) * scale }
        case .int8: return values(as: Int8.self).map { (Float($0) - zero) * scale }
        case .int16: return values(as: Int16.self).map { (Float($0) - zero) * scale }
        case .int32: return values(as: Int32.self).map { (Float($0) - zero) * scale }
        case .int64: return values(as: Int64.self).map { Float($0) }
        case .bool: return data.map { $0 == 0 ? 0 : 1 }
        default: return []
        }
    }
}
