import Foundation
import TFLiteFormat

/// Reads and writes NumPy `.npy` files (little-endian, C order), the format used to exchange
/// tensors with other runtimes.
public enum NumPy {
    public enum Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        case notNumPy(path: String)
        case malformedHeader(path: String, reason: String)
        case unsupportedType(path: String, descr: String)
        case sizeMismatch(path: String, expected: Int, actual: Int)

        public var description: String {
            switch self {
            case .notNumPy(let path): return "\(path) is not a NumPy .npy file"
            case .malformedHeader(let path, let reason): return "\(path): malformed .npy header (\(reason))"
            case .unsupportedType(let path, let descr): return "\(path): unsupported .npy dtype \(descr)"
            case .sizeMismatch(let path, let expected, let actual):
                return "\(path): header promises \(expected) data bytes, file holds \(actual)"
            }
        }
    }

    private static let types: [String: TensorType] = [
        "|u1": .uint8, "|i1": .int8, "<i2": .int16, "<i4": .int32, "<i8": .int64, "<f4": .float32,
        "<f2": .float16, "<f8": .float64, "|b1": .bool, "<u2": .uint16, "<u4": .uint32, "<u8": .uint64,
    ]

    /// Parses an `.npy` file's bytes into a tensor named `name`.
    ///
    /// - Throws: ``NumPy/Error``.
    public static func decode(_ bytes: [UInt8], name: String) throws -> Tensor {
        let magic: [UInt8] = [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59]
        guard bytes.count >= 10, Array(bytes[0..<6]) == magic else { throw Error.notNumPy(path: name) }
        let major = bytes[6]
        let headerLength: Int, headerStart: Int
        if major == 1 {
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
            headerStart = 10
        } else {
            guard bytes.count >= 12 else { throw Error.malformedHeader(path: name, reason: "short") }
            headerLength = (0..<4).reduce(0) { $0 | Int(bytes[8 + $1]) << (8 * $1) }
            headerStart = 12
        }
        guard headerStart + headerLength <= bytes.count else { throw Error.malformedHeader(path: name, reason: "truncated") }
        let header = String(decoding: bytes[headerStart..<(headerStart + headerLength)], as: UTF8.self)
        func field(_ key: String) -> String? {
            guard let range = header.range(of: "'\(key)':") else { return nil }
            return String(header[range.upperBound...]).trimmingCharacters(in: .whitespaces)
        }
        guard let descrField = field("descr"), let quote = descrField.dropFirst().firstIndex(of: "'") else {
            throw Error.malformedHeader(path: name, reason: "no descr")
        }
        let descr = String(descrField[descrField.index(after: descrField.startIndex)..<quote])
        guard let type = types[descr] else { throw Error.unsupportedType(path: name, descr: descr) }
        if let order = field("fortran_order"), order.hasPrefix("True") {
            throw Error.malformedHeader(path: name, reason: "Fortran order is not supported")
        }
        guard let shapeField = field("shape"), let open = shapeField.firstIndex(of: "("), let close = shapeField.firstIndex(of: ")") else {
            throw Error.malformedHeader(path: name, reason: "no shape")
        }
        let shape = try shapeField[shapeField.index(after: open)..<close].split(separator: ",").map { part -> Int in
            guard let value = Int(part.trimmingCharacters(in: .whitespaces)), value >= 0 else {
                throw Error.malformedHeader(path: name, reason: "bad shape")
            }
            return value
        }
        let dataStart = headerStart + headerLength
        let (expected, overflow) = shape.reduce(1, *).multipliedReportingOverflow(by: type.byteSize ?? 1)
        guard !overflow, bytes.count - dataStart == expected else {
            throw Error.sizeMismatch(path: name, expected: expected, actual: bytes.count - dataStart)
        }
        return Tensor(name: name, type: type, shape: shape, quantization: nil, data: Array(bytes[dataStart...]))
    }

    /// Encodes a tensor as an `.npy` file (format version 1.0).
    public static func encode(_ tensor: Tensor) -> [UInt8] {
        let descr = types.first { $0.value == tensor.type }?.key ?? "|u1"
        let shape = tensor.shape.count == 1 ? "(\(tensor.shape[0]),)" : "(\(tensor.shape.map(String.init).joined(separator: ", ")))"
        var header = "{'descr': '\(descr)', 'fortran_order': False, 'shape': \(shape), }"
        let unpadded = 10 + header.utf8.count + 1
        header += String(repeating: " ", count: (64 - unpadded % 64) % 64) + "\n"
        let length = header.utf8.count
        return [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59, 1, 0, UInt8(length & 0xff), UInt8(length >> 8)] + Array(header.utf8) + tensor.data
    }
}
