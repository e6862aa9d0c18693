internal import CKernels
internal import CXNNPACK
import TFLiteFormat

/// An 8-bit operator whose output byte depends on its input byte alone, as a table of the 256
/// output bytes XNNPACK's own operators compute at load, looked up 64 bytes at a time where the CPU
/// has AVX-512 VBMI (XNNPACK 2022 looks them up one at a time): an 8-bit LOGISTIC (YOLOv8's class
/// scores; made here where the CPU has VBMI) and a SiLU's MUL (``SiLU``).
final class ByteTable: Kernel {
    var readsConstantInputs: Bool { false }

    private let input, output, count: Int
    private let pool: ThreadPool
    private let table: [UInt8]
    /// What ``Interpreter/profile(runs:)`` says runs the operator: "table" or "silu".
    let label: String

    /// Whether this CPU looks bytes up 64 at a time (checked once per process).
    static let isAvailable = spotter_has_vbmi() != 0

    /// The kernel for an 8-bit LOGISTIC whose input and output have one scale each, else nil (also
    /// when XNNPACK refuses the scales: the LOGISTIC's own kernel then reports it).
    static func make(_ ctx: PrepareContext, pool: ThreadPool) throws -> Kernel? {
        let op = ctx.op!
        guard isAvailable, op.code.builtin == .logistic, op.inputs.count == 1, [.int8, .uint8].contains(ctx.type(op.inputs[0])),
              ctx.type(op.outputs[0]) == ctx.type(op.inputs[0]), let table = try? sigmoid(ctx, x: op.inputs[0], y: op.outputs[0])
        else { return nil }
        try ctx.setShape(op.outputs[0], ctx.shape(op.inputs[0]))
        return ByteTable(input: op.inputs[0], output: op.outputs[0], count: ctx.shape(op.inputs[0]).reduce(1, *), table: table,
                         label: "table", pool: pool)
    }

    init(input: Int, output: Int, count: Int, table: [UInt8], label: String, pool: ThreadPool) {
        (self.input, self.output, self.count, self.table, self.label, self.pool) = (input, output, count, table, label, pool)
    }

    func run(_ memory: TensorMemory) {
        table.withUnsafeBufferPointer {
            spotter_lookup_bytes($0.baseAddress, memory.typed(input, UInt8.self), memory.typed(output, UInt8.self), count, pool.active)
        }
    }

    /// The bytes XNNPACK's sigmoid operator writes for each of the 256 bytes of `x` (8-bit, one
    /// scale), quantized as `y`.
    static func sigmoid(_ ctx: PrepareContext, x input: Int, y output: Int) throws -> [UInt8] {
        let x = try ctx.quantized(input), y = try ctx.quantized(output)
        // XNNPACK keeps the pointers given at setup until the run: one buffer that outlives both.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * 256, alignment: 64)
        defer { buffer.deallocate() }
        for byte in 0..<256 { buffer[byte] = UInt8(byte) }
        let bytes = buffer.baseAddress!, sigmoid = bytes + 256
        let signed = ctx.type(input) == .int8
        try runOnce(ctx, "sigmoid", create: {
            signed ? xnn_create_sigmoid_nc_qs8(1, 1, 1, Int8(x.zeroPoint), x.scale, Int8(y.zeroPoint), y.scale, -128, 127, 0, $0)
                   : xnn_create_sigmoid_nc_qu8(1, 1, 1, UInt8(x.zeroPoint), x.scale, UInt8(y.zeroPoint), y.scale, 0, 255, 0, $0)
        }, setup: { op in
            signed ? xnn_setup_sigmoid_nc_qs8(op, 256, bytes.assumingMemoryBound(to: Int8.self), sigmoid.assumingMemoryBound(to: Int8.self), nil)
                   : xnn_setup_sigmoid_nc_qu8(op, 256, bytes.assumingMemoryBound(to: UInt8.self), sigmoid.assumingMemoryBound(to: UInt8.self), nil)
        })
        return Array(UnsafeRawBufferPointer(start: sigmoid, count: 256))
    }

    /// Creates, sets up and runs one XNNPACK operator on the calling thread, then deletes it.
    static func runOnce(_ ctx: PrepareContext, _ name: String, create: (UnsafeMutablePointer<xnn_operator_t?>) -> xnn_status,
                        setup: (xnn_operator_t) -> xnn_status) throws {
        var op: xnn_operator_t?
        guard create(&op) == xnn_status_success, let op else { throw ctx.fail("XNNPACK could not create the table's \(name)") }
        defer { xnn_delete_operator(op) }
        guard setup(op) == xnn_status_success, xnn_run_operator(op, nil) == xnn_status_success else {
            throw ctx.fail("XNNPACK could not compute the table's \(name)")
        }
    }
}
