#!/usr/bin/env python3
"""Small single-operator .tflite models and LiteRT's outputs for them: Spotter's kernel fixtures.

For every case below this writes Tests/Fixtures/ops/CASE/ with
  model.tflite     built with the `tflite` package's generated FlatBuffers builders (schema 3)
  input0.npy ...   random inputs (fixed seed)
  output0.npy ...  what LiteRT's reference kernels (OpResolverType.BUILTIN_REF) compute
  xnnpack_output0.npy ...  what LiteRT's default path (its XNNPACK delegate) computes

The fixtures are committed; rerun this script after changing a case. Tool versions:
../shared/reference/requirements.txt (ai-edge-litert 2.3.0, tflite 2.18.0, flatbuffers 25.12.19,
numpy 2.4.6). Spotter's own outputs are never used here.
"""
import importlib
import os
import shutil

import flatbuffers
import flatbuffers.flexbuffers
import numpy as np
import tflite
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from tflite.ActivationFunctionType import ActivationFunctionType as Act
from tflite.BuiltinOperator import BuiltinOperator as Op
from tflite.BuiltinOptions import BuiltinOptions as Opt
from tflite.Padding import Padding
from tflite.TensorType import TensorType as TT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "ops")
def M(name):
    """The generated module of a schema table (the package re-exports the classes under the same names)."""
    return importlib.import_module("tflite." + name)


NP = {TT.FLOAT32: np.float32, TT.UINT8: np.uint8, TT.INT8: np.int8, TT.INT32: np.int32, TT.INT16: np.int16, TT.FLOAT16: np.float16}
rng = np.random.default_rng(20261121)


class T:
    """A tensor of the model being built."""

    def __init__(self, shape, type, data=None, scale=None, zp=None, qdim=0, name=None, buffer=None, sparse=False):
        self.shape, self.type, self.data, self.buffer, self.sparse = list(shape), type, data, buffer, sparse
        self.scale = None if scale is None else np.atleast_1d(np.array(scale, np.float32))
        self.zp = None if zp is None else np.atleast_1d(np.array(zp, np.int64))
        self.qdim, self.name = qdim, name


def vector(b, start, values, prepend):
    start(b, len(values))
    for v in reversed(values):
        prepend(v)
    return b.EndVector()


def build(tensors, inputs, outputs, ops):
    """ops: list of (builtin_code, custom_name, in_idx, out_idx, options_type, options_fn, custom_bytes)."""
    b = flatbuffers.Builder(1024)
    codes = []
    for op in ops:
        key = (op[0], op[1])
        if key not in codes:
            codes.append(key)
    # Buffers: 0 is the empty sentinel.
    buffer_offsets = []
    M("Buffer").BufferStart(b)
    buffer_offsets.append(M("Buffer").BufferEnd(b))
    buffer_index = []
    for t in tensors:
        if t.data is None:
            buffer_index.append(0)
            continue
        raw = np.ascontiguousarray(t.data.astype(NP[t.type])).tobytes()
        data = b.CreateByteVector(raw)
        M("Buffer").BufferStart(b)
        M("Buffer").BufferAddData(b, data)
        buffer_index.append(len(buffer_offsets))
        buffer_offsets.append(M("Buffer").BufferEnd(b))
    tensor_offsets = []
    for i, t in enumerate(tensors):
        name = b.CreateString(t.name or f"t{i}")
        shape = vector(b, M("Tensor").TensorStartShapeVector, t.shape, b.PrependInt32)
        quant = None
        if t.scale is not None:
            scale = vector(b, M("QuantizationParameters").StartScaleVector, list(t.scale), b.PrependFloat32)
            zp = vector(b, M("QuantizationParameters").StartZeroPointVector, list(t.zp), b.PrependInt64)
            M("QuantizationParameters").Start(b)
            M("QuantizationParameters").AddScale(b, scale)
            M("QuantizationParameters").AddZeroPoint(b, zp)
            M("QuantizationParameters").AddQuantizedDimension(b, t.qdim)
            quant = M("QuantizationParameters").End(b)
        sparsity = None
        if t.sparse:
            order = vector(b, M("SparsityParameters").SparsityParametersStartTraversalOrderVector, list(range(len(t.shape))), b.PrependInt32)
            M("SparsityParameters").SparsityParametersStart(b)
            M("SparsityParameters").SparsityParametersAddTraversalOrder(b, order)
            sparsity = M("SparsityParameters").SparsityParametersEnd(b)
        M("Tensor").TensorStart(b)
        M("Tensor").TensorAddShape(b, shape)
        if sparsity is not None:
            M("Tensor").TensorAddSparsity(b, sparsity)
        M("Tensor").TensorAddType(b, t.type)
        M("Tensor").TensorAddBuffer(b, buffer_index[i] if t.buffer is None else t.buffer)
        M("Tensor").TensorAddName(b, name)
        if quant is not None:
            M("Tensor").TensorAddQuantization(b, quant)
        tensor_offsets.append(M("Tensor").TensorEnd(b))
    op_offsets = []
    for code, custom, ins, outs, opt_type, opt_fn, custom_bytes in ops:
        opt = opt_fn(b) if opt_fn else None
        custom_vec = b.CreateByteVector(bytes(custom_bytes)) if custom_bytes is not None else None
        ins_v = vector(b, M("Operator").OperatorStartInputsVector, ins, b.PrependInt32)
        outs_v = vector(b, M("Operator").OperatorStartOutputsVector, outs, b.PrependInt32)
        M("Operator").OperatorStart(b)
        M("Operator").OperatorAddOpcodeIndex(b, codes.index((code, custom)))
        M("Operator").OperatorAddInputs(b, ins_v)
        M("Operator").OperatorAddOutputs(b, outs_v)
        if opt is not None:
            M("Operator").OperatorAddBuiltinOptionsType(b, opt_type)
            M("Operator").OperatorAddBuiltinOptions(b, opt)
        if custom_vec is not None:
            M("Operator").OperatorAddCustomOptions(b, custom_vec)
        op_offsets.append(M("Operator").OperatorEnd(b))
    tensors_v = vector(b, M("SubGraph").SubGraphStartTensorsVector, tensor_offsets, b.PrependUOffsetTRelative)
    in_v = vector(b, M("SubGraph").SubGraphStartInputsVector, inputs, b.PrependInt32)
    out_v = vector(b, M("SubGraph").SubGraphStartOutputsVector, outputs, b.PrependInt32)
    ops_v = vector(b, M("SubGraph").SubGraphStartOperatorsVector, op_offsets, b.PrependUOffsetTRelative)
    M("SubGraph").SubGraphStart(b)
    M("SubGraph").SubGraphAddTensors(b, tensors_v)
    M("SubGraph").SubGraphAddInputs(b, in_v)
    M("SubGraph").SubGraphAddOutputs(b, out_v)
    M("SubGraph").SubGraphAddOperators(b, ops_v)
    subgraph = M("SubGraph").SubGraphEnd(b)
    code_offsets = []
    for code, custom in codes:
        name = b.CreateString(custom) if custom else None
        M("OperatorCode").OperatorCodeStart(b)
        M("OperatorCode").OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        M("OperatorCode").OperatorCodeAddBuiltinCode(b, code)
        M("OperatorCode").OperatorCodeAddVersion(b, 1)
        if name is not None:
            M("OperatorCode").OperatorCodeAddCustomCode(b, name)
        code_offsets.append(M("OperatorCode").OperatorCodeEnd(b))
    codes_v = vector(b, M("Model").ModelStartOperatorCodesVector, code_offsets, b.PrependUOffsetTRelative)
    subgraphs_v = vector(b, M("Model").ModelStartSubgraphsVector, [subgraph], b.PrependUOffsetTRelative)
    buffers_v = vector(b, M("Model").ModelStartBuffersVector, buffer_offsets, b.PrependUOffsetTRelative)
    description = b.CreateString("Spotter op fixture")
    M("Model").ModelStart(b)
    M("Model").ModelAddVersion(b, 3)
    M("Model").ModelAddOperatorCodes(b, codes_v)
    M("Model").ModelAddSubgraphs(b, subgraphs_v)
    M("Model").ModelAddDescription(b, description)
    M("Model").ModelAddBuffers(b, buffers_v)
    b.Finish(M("Model").ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def options(module, **fields):
    """A builder function for an options table: fields map to the module's `Add<Field>` functions."""
    def make(b):
        vectors = {k: vector(b, getattr(mod, f"{name}Start{k}Vector"), v, b.PrependInt32)
                   for k, v in fields.items() if isinstance(v, list)}
        getattr(mod, f"{name}Start")(b)
        for key, value in fields.items():
            getattr(mod, f"{name}Add{key}")(b, vectors.get(key, value))
        return getattr(mod, f"{name}End")(b)
    name = module
    mod = M(module)
    return make


def random_input(t):
    if t.type in (TT.FLOAT32, TT.FLOAT16):
        return rng.uniform(-3, 3, t.shape).astype(NP[t.type])
    info = np.iinfo(NP[t.type])
    return rng.integers(info.min, info.max + 1, t.shape).astype(NP[t.type])


def quantized_weights(shape, type):
    info = np.iinfo(NP[type])
    low = info.min + 1 if type == TT.INT8 else info.min
    return rng.integers(low, info.max + 1, shape).astype(NP[type])


def save(case, tensors, inputs, outputs, ops):
    model = build(tensors, inputs, outputs, ops)
    folder = os.path.join(OUT, case)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.tflite"), "wb") as f:
        f.write(model)
    interpreter = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    for k, detail in enumerate(interpreter.get_input_details()):
        value = random_input(tensors[inputs[k]])
        np.save(os.path.join(folder, f"input{k}.npy"), value)
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    for k, detail in enumerate(interpreter.get_output_details()):
        np.save(os.path.join(folder, f"output{k}.npy"), interpreter.get_tensor(detail["index"]))
    default = Interpreter(model_content=model, num_threads=1)
    default.allocate_tensors()
    for k, detail in enumerate(default.get_input_details()):
        default.set_tensor(detail["index"], np.load(os.path.join(folder, f"input{k}.npy")))
    default.invoke()
    for k, detail in enumerate(default.get_output_details()):
        np.save(os.path.join(folder, f"xnnpack_output{k}.npy"), default.get_tensor(detail["index"]))


def bfloat16(values):
    """float32 values rounded to the nearest bfloat16 (ties to even; subnormals to zero, as
    vcvtneps2bf16 does), as float32."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    bits = np.where((bits & 0x7F800000) == 0, bits & 0x80000000, bits)
    return ((((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32)


def save_bfloat16_expectation(case, tensors, inputs, outputs, ops, rounded):
    """bf16_output0.npy: LiteRT's reference kernels on the case's model with tensors `rounded` (the
    weights) and its saved input rounded to bfloat16: products of rounded values summed in float32,
    what a bfloat16 dot product (vdpbf16ps) computes, up to the order of the sums."""
    import copy
    changed = []
    for k, t in enumerate(tensors):
        if k in rounded:
            t = copy.copy(t)
            t.data = bfloat16(t.data)
        changed.append(t)
    interpreter = Interpreter(model_content=build(changed, inputs, outputs, ops), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    folder = os.path.join(OUT, case)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], bfloat16(np.load(os.path.join(folder, "input0.npy"))))
    interpreter.invoke()
    np.save(os.path.join(folder, "bf16_output0.npy"), interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))


def save_then_prelu(case, shape, filt, bias, layer, out, alpha, activation=Act.NONE, bf16=False):
    """Saves `layer` (reading the input, `filt` and `bias` as tensors 0-2 and writing tensor 3 of shape
    `out`) followed by TensorFlow's six-operator PReLU (MobileFaceNet's: ABS, SUB, MUL by `alpha`,
    MUL by 0.5, RELU, ADD with `activation`)."""
    half = T([], TT.FLOAT32, data=np.array(0.5, np.float32))
    tensors = [T(shape, TT.FLOAT32), filt, bias, T(out, TT.FLOAT32), T(out, TT.FLOAT32), T(out, TT.FLOAT32),
               alpha, T(out, TT.FLOAT32), half, T(out, TT.FLOAT32), T(out, TT.FLOAT32), T(out, TT.FLOAT32)]
    ops = [
        layer,
        (Op.ABS, None, [3], [4], 0, None, None),
        (Op.SUB, None, [3, 4], [5], Opt.SubOptions, options("SubOptions"), None),
        (Op.MUL, None, [5, 6], [7], Opt.MulOptions, options("MulOptions"), None),
        (Op.MUL, None, [7, 8], [9], Opt.MulOptions, options("MulOptions"), None),
        (Op.RELU, None, [3], [10], 0, None, None),
        (Op.ADD, None, [10, 9], [11], Opt.AddOptions, options("AddOptions", FusedActivationFunction=activation), None)]
    save(case, tensors, [0], [11], ops)
    if bf16:
        save_bfloat16_expectation(case, tensors, [0], [11], ops, rounded=[1])


def unary(case, op, type, shape, in_q, out_q, opt_type=0, opt_fn=None):
    tensors = [T(shape, type, **in_q), T(shape, type, **out_q)]
    save(case, tensors, [0], [1], [(op, None, [0], [1], opt_type, opt_fn, None)])


def conv(case, type, depthwise, stride, padding, act, dilation=1, per_channel=False, multiplier=1):
    cin = 3
    cout = cin * multiplier if depthwise else 4
    fshape = [1, 3, 3, cout] if depthwise else [cout, 3, 3, cin]
    qdim = 3 if depthwise else 0
    if type == TT.FLOAT32:
        inp = T([1, 9, 9, cin], type)
        filt = T(fshape, type, data=rng.normal(0, 0.5, fshape).astype(np.float32))
        bias = T([cout], type, data=rng.normal(0, 0.5, [cout]).astype(np.float32))
        out = T([0], type)
    else:
        in_s, in_zp = (0.02, 120) if type == TT.UINT8 else (0.03, -5)
        if per_channel:
            f_s = rng.uniform(0.005, 0.02, cout).astype(np.float32)
            f_zp = np.zeros(cout, np.int64)
        else:
            f_s, f_zp = (np.float32(0.01), 130 if type == TT.UINT8 else 0)
        filt = T(fshape, type, data=quantized_weights(fshape, type), scale=f_s, zp=f_zp, qdim=qdim)
        b_s = np.float32(in_s) * np.atleast_1d(f_s).astype(np.float32)
        bias = T([cout], TT.INT32, data=rng.integers(-2000, 2000, [cout]).astype(np.int32), scale=b_s, zp=np.zeros(len(b_s), np.int64))
        inp = T([1, 9, 9, cin], type, scale=in_s, zp=in_zp)
        out = T([0], type, scale=0.05 if type == TT.UINT8 else 0.07, zp=100 if type == TT.UINT8 else 3)
    if depthwise:
        opt = options("DepthwiseConv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, DepthMultiplier=multiplier,
                      FusedActivationFunction=act, DilationWFactor=dilation, DilationHFactor=dilation)
        code, opt_type = Op.DEPTHWISE_CONV_2D, Opt.DepthwiseConv2DOptions
    else:
        opt = options("Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=act,
                      DilationWFactor=dilation, DilationHFactor=dilation)
        code, opt_type = Op.CONV_2D, Opt.Conv2DOptions
    # Output shape is left for the runtime to compute from the input and options.
    h = (9 + stride - 1) // stride if padding == Padding.SAME else (9 - ((3 - 1) * dilation + 1)) // stride + 1
    out.shape = [1, h, h, cout]
    save(case, [inp, filt, bias, out], [0], [3], [(code, None, [0, 1, 2], [3], opt_type, opt, None)])


def fully_connected(case, type):
    if type == TT.FLOAT32:
        inp, out = T([2, 6], type), T([2, 5], type)
        filt = T([5, 6], type, data=rng.normal(0, 0.5, [5, 6]).astype(np.float32))
        bias = T([5], type, data=rng.normal(0, 0.5, [5]).astype(np.float32))
    else:
        in_s, in_zp = (0.02, 120) if type == TT.UINT8 else (0.03, -5)
        f_s, f_zp = 0.01, (130 if type == TT.UINT8 else 0)
        inp = T([2, 6], type, scale=in_s, zp=in_zp)
        filt = T([5, 6], type, data=quantized_weights([5, 6], type), scale=f_s, zp=f_zp)
        bias = T([5], TT.INT32, data=rng.integers(-500, 500, [5]).astype(np.int32), scale=np.float32(in_s) * np.float32(f_s), zp=0)
        out = T([2, 5], type, scale=0.04, zp=110 if type == TT.UINT8 else -7)
    opt = options("FullyConnectedOptions", FusedActivationFunction=Act.RELU)
    save(case, [inp, filt, bias, out], [0], [3], [(Op.FULLY_CONNECTED, None, [0, 1, 2], [3], Opt.FullyConnectedOptions, opt, None)])


def binary(case, code, type, act):
    q = lambda s, z: {} if type == TT.FLOAT32 else {"scale": s, "zp": z if type == TT.UINT8 else z - 128}
    a = T([1, 4, 4, 3], type, **q(0.02, 128))
    b = T([1, 1, 1, 3], type, **q(0.05, 100))
    out = T([1, 4, 4, 3], type, **q(0.08 if code == Op.ADD else 0.5, 120))
    module, opt_type = ("AddOptions", Opt.AddOptions) if code == Op.ADD else ("MulOptions", Opt.MulOptions)
    save(case, [a, b, out], [0, 1], [2], [(code, None, [0, 1], [2], opt_type, options(module, FusedActivationFunction=act), None)])


def binary_constant(case, code, type):
    """A binary op whose second operand is a constant per-channel vector (as MediaPipe Model Maker exports have)."""
    q = lambda s, z: {} if type == TT.FLOAT32 else {"scale": s, "zp": z if type == TT.UINT8 else z - 128}
    a = T([1, 4, 4, 3], type, **q(0.02, 128))
    values = rng.uniform(-2, 2, [3]).astype(np.float32) if type == TT.FLOAT32 else quantized_weights([3], type)
    b = T([3], type, data=values, **q(0.05, 100))
    out = T([1, 4, 4, 3], type, **q(0.08 if code == Op.ADD else 0.5, 120))
    module, opt_type = ("AddOptions", Opt.AddOptions) if code == Op.ADD else ("MulOptions", Opt.MulOptions)
    save(case, [a, b, out], [0], [2], [(code, None, [0, 1], [2], opt_type, options(module), None)])


def code_name(code):
    return {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.RELU: "relu", Op.RELU6: "relu6"}[code]


def strided_slice(case, type, shape, begin, end, strides, out_shape, **masks):
    q = {} if type == TT.FLOAT32 else {"scale": 0.05, "zp": 3 if type == TT.INT8 else 130}
    tensors = [T(shape, type, **q), T([len(begin)], TT.INT32, data=np.array(begin, np.int32)),
               T([len(end)], TT.INT32, data=np.array(end, np.int32)), T([len(strides)], TT.INT32, data=np.array(strides, np.int32)),
               T(out_shape, type, **q)]
    fields = {"BeginMask": 0, "EndMask": 0, "ShrinkAxisMask": 0}
    fields.update(masks)
    save(case, tensors, [0], [4], [(Op.STRIDED_SLICE, None, [0, 1, 2, 3], [4], Opt.StridedSliceOptions,
                                    options("StridedSliceOptions", **fields), None)])


def sub(case, type, act, left_shape, right_shape):
    q = lambda s, z: {} if type == TT.FLOAT32 else {"scale": s, "zp": z if type == TT.UINT8 else z - 128}
    a, b = T(left_shape, type, **q(0.02, 128)), T(right_shape, type, **q(0.05, 100))
    out_shape = list(np.broadcast_shapes(tuple(left_shape), tuple(right_shape)))
    save(case, [a, b, T(out_shape, type, **q(0.06, 125))], [0, 1], [2],
         [(Op.SUB, None, [0, 1], [2], Opt.SubOptions, options("SubOptions", FusedActivationFunction=act), None)])


def transpose(case, type, shape, perm):
    q = {} if type == TT.FLOAT32 else {"scale": 0.05, "zp": 3 if type == TT.INT8 else 130}
    out_shape = [shape[p] for p in perm]
    tensors = [T(shape, type, **q), T([len(perm)], TT.INT32, data=np.array(perm, np.int32)), T(out_shape, type, **q)]
    save(case, tensors, [0], [2], [(Op.TRANSPOSE, None, [0, 1], [2], Opt.TransposeOptions, options("TransposeOptions"), None)])


def pool(case, code, type, padding):
    q = {} if type == TT.FLOAT32 else {"scale": 0.03, "zp": 7 if type == TT.INT8 else 135}
    shape_out = [1, 3, 3, 3] if padding == Padding.SAME else [1, 2, 2, 3]
    tensors = [T([1, 6, 6, 3], type, **q), T(shape_out, type, **q)]
    opt = options("Pool2DOptions", Padding=padding, StrideW=2, StrideH=2, FilterWidth=3, FilterHeight=3, FusedActivationFunction=Act.RELU6)
    save(case, tensors, [0], [1], [(code, None, [0], [1], Opt.Pool2DOptions, opt, None)])


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    for type, tag in [(TT.UINT8, "uint8"), (TT.INT8, "int8"), (TT.FLOAT32, "float32")]:
        per_channel = type == TT.INT8
        conv(f"conv2d_{tag}_same_s2_relu6", type, False, 2, Padding.SAME, Act.RELU6, per_channel=per_channel)
        conv(f"conv2d_{tag}_valid_dilated", type, False, 1, Padding.VALID, Act.NONE, dilation=2, per_channel=per_channel)
        conv(f"depthwise_{tag}_same_m2", type, True, 1, Padding.SAME, Act.RELU, per_channel=per_channel, multiplier=2)
        conv(f"depthwise_{tag}_valid_s2", type, True, 2, Padding.VALID, Act.NONE, per_channel=per_channel)
        fully_connected(f"fully_connected_{tag}", type)
        binary(f"add_{tag}_broadcast", Op.ADD, type, Act.NONE)
        binary(f"add_{tag}_relu", Op.ADD, type, Act.RELU)
        binary(f"mul_{tag}_broadcast", Op.MUL, type, Act.NONE)
        pool(f"average_pool_{tag}_same", Op.AVERAGE_POOL_2D, type, Padding.SAME)
        pool(f"average_pool_{tag}_valid", Op.AVERAGE_POOL_2D, type, Padding.VALID)
        pool(f"max_pool_{tag}_same", Op.MAX_POOL_2D, type, Padding.SAME)

    # Activations.
    u, i8 = {"scale": 0.05, "zp": 130}, {"scale": 0.05, "zp": 2}
    sig_u, sig_i = {"scale": 1 / 256, "zp": 0}, {"scale": 1 / 256, "zp": -128}
    unary("logistic_uint8", Op.LOGISTIC, TT.UINT8, [2, 50], u, sig_u)
    unary("logistic_int8", Op.LOGISTIC, TT.INT8, [2, 50], i8, sig_i)
    unary("logistic_float32", Op.LOGISTIC, TT.FLOAT32, [2, 50], {}, {})
    softmax = lambda beta: options("SoftmaxOptions", Beta=beta)
    unary("softmax_uint8", Op.SOFTMAX, TT.UINT8, [3, 40], u, sig_u, Opt.SoftmaxOptions, softmax(1.0))
    unary("softmax_int8", Op.SOFTMAX, TT.INT8, [3, 40], i8, sig_i, Opt.SoftmaxOptions, softmax(1.0))
    unary("softmax_float32_beta", Op.SOFTMAX, TT.FLOAT32, [3, 40], {}, {}, Opt.SoftmaxOptions, softmax(0.7))
    for code, name in [(Op.RELU, "relu"), (Op.RELU6, "relu6"), (Op.HARD_SWISH, "hard_swish")]:
        unary(f"{name}_uint8", code, TT.UINT8, [2, 60], u, {"scale": 0.03, "zp": 20})
        unary(f"{name}_int8", code, TT.INT8, [2, 60], i8, {"scale": 0.03, "zp": -110})
        unary(f"{name}_float32", code, TT.FLOAT32, [2, 60], {}, {})

    # Quantize and dequantize.
    save("quantize_float32_to_uint8", [T([3, 20], TT.FLOAT32), T([3, 20], TT.UINT8, scale=0.025, zp=128)], [0], [1],
         [(Op.QUANTIZE, None, [0], [1], 0, None, None)])
    save("quantize_float32_to_int8", [T([3, 20], TT.FLOAT32), T([3, 20], TT.INT8, scale=0.02, zp=-3)], [0], [1],
         [(Op.QUANTIZE, None, [0], [1], 0, None, None)])
    save("quantize_uint8_to_int8", [T([3, 20], TT.UINT8, scale=0.03, zp=128), T([3, 20], TT.INT8, scale=0.05, zp=4)], [0], [1],
         [(Op.QUANTIZE, None, [0], [1], 0, None, None)])
    save("dequantize_uint8", [T([3, 20], TT.UINT8, scale=0.03, zp=100), T([3, 20], TT.FLOAT32)], [0], [1],
         [(Op.DEQUANTIZE, None, [0], [1], 0, None, None)])
    save("dequantize_int8", [T([3, 20], TT.INT8, scale=0.07, zp=-9), T([3, 20], TT.FLOAT32)], [0], [1],
         [(Op.DEQUANTIZE, None, [0], [1], 0, None, None)])


    # Layout operators.
    for type, tag, q1, q2 in [(TT.UINT8, "uint8", {"scale": 0.02, "zp": 100}, {"scale": 0.05, "zp": 30}),
                              (TT.INT8, "int8", {"scale": 0.04, "zp": -3}, {"scale": 0.04, "zp": -3}),
                              (TT.FLOAT32, "float32", {}, {})]:
        tensors = [T([1, 2, 3, 4], type, **q1), T([1, 2, 5, 4], type, **q2), T([1, 2, 8, 4], type, **q2)]
        save(f"concatenation_{tag}", tensors, [0, 1], [2],
             [(Op.CONCATENATION, None, [0, 1], [2], Opt.ConcatenationOptions, options("ConcatenationOptions", Axis=2), None)])
        pads = T([4, 2], TT.INT32, data=np.array([[0, 0], [1, 2], [2, 0], [0, 1]], np.int32))
        save(f"pad_{tag}", [T([1, 3, 3, 2], type, **q1), pads, T([1, 6, 5, 3], type, **q1)], [0], [2],
             [(Op.PAD, None, [0, 1], [2], Opt.PadOptions, options("PadOptions"), None)])
        size = T([2], TT.INT32, data=np.array([7, 5], np.int32))
        for align, half, suffix in [(False, True, "half_pixel"), (True, False, "align_corners"), (False, False, "plain")]:
            save(f"resize_bilinear_{tag}_{suffix}", [T([1, 4, 3, 2], type, **q1), size, T([1, 7, 5, 2], type, **q1)], [0], [2],
                 [(Op.RESIZE_BILINEAR, None, [0, 1], [2], Opt.ResizeBilinearOptions,
                   options("ResizeBilinearOptions", AlignCorners=align, HalfPixelCenters=half), None)])
            save(f"resize_nearest_{tag}_{suffix}", [T([1, 4, 3, 2], type, **q1), size, T([1, 7, 5, 2], type, **q1)], [0], [2],
                 [(Op.RESIZE_NEAREST_NEIGHBOR, None, [0, 1], [2], Opt.ResizeNearestNeighborOptions,
                   options("ResizeNearestNeighborOptions", AlignCorners=align, HalfPixelCenters=half), None)])
    shape = T([3], TT.INT32, data=np.array([2, -1, 3], np.int32))
    save("reshape_float32", [T([1, 4, 3, 2], TT.FLOAT32), shape, T([2, 4, 3], TT.FLOAT32)], [0], [2],
         [(Op.RESHAPE, None, [0, 1], [2], Opt.ReshapeOptions, options("ReshapeOptions", NewShape=[2, -1, 3]), None)])
    save("squeeze_uint8", [T([1, 5, 1, 3], TT.UINT8, scale=0.1, zp=3), T([5, 3], TT.UINT8, scale=0.1, zp=3)], [0], [1],
         [(Op.SQUEEZE, None, [0], [1], Opt.SqueezeOptions, options("SqueezeOptions", SqueezeDims=[0, 2]), None)])

    # A small graph: RESHAPE aliasing feeding another op, then a float post-process with regular NMS.
    anchors = np.stack([rng.uniform(0.1, 0.9, 30), rng.uniform(0.1, 0.9, 30), rng.uniform(0.1, 0.4, 30),
                        rng.uniform(0.1, 0.4, 30)], axis=1).astype(np.float32)
    fbb = flatbuffers.flexbuffers.Builder()
    with fbb.Map():
        fbb.Int("max_detections", 5)
        fbb.Int("max_classes_per_detection", 1)
        fbb.Int("detections_per_class", 3)
        fbb.Bool("use_regular_nms", True)
        fbb.Float("nms_score_threshold", 0.3)
        fbb.Float("nms_iou_threshold", 0.5)
        fbb.Int("num_classes", 4)
        fbb.Float("y_scale", 10.0)
        fbb.Float("x_scale", 10.0)
        fbb.Float("h_scale", 5.0)
        fbb.Float("w_scale", 5.0)
    custom = fbb.Finish()
    tensors = [T([1, 30, 4], TT.FLOAT32, name="boxes_in"), T([1, 30, 5], TT.FLOAT32, name="raw_scores"),
               T([30, 4], TT.FLOAT32, data=anchors, name="anchors"), T([1, 30, 5], TT.FLOAT32, name="scores"),
               T([], TT.FLOAT32, name="detection_boxes"), T([], TT.FLOAT32, name="detection_classes"),
               T([], TT.FLOAT32, name="detection_scores"), T([], TT.FLOAT32, name="num_detections")]
    save("detection_postprocess_float32_regular_nms", tensors, [0, 1], [4, 5, 6, 7],
         [(Op.LOGISTIC, None, [1], [3], 0, None, None),
          (Op.CUSTOM, "TFLite_Detection_PostProcess", [0, 3, 2], [4, 5, 6, 7], 0, None, custom)])
    # Appended last so the cases above keep their random inputs.
    for type, tag in [(TT.UINT8, "uint8"), (TT.INT8, "int8"), (TT.FLOAT32, "float32")]:
        binary_constant(f"mul_{tag}_constant_vector", Op.MUL, type)
        binary_constant(f"add_{tag}_constant_vector", Op.ADD, type)
    # STRIDED_SLICE as YOLO exports use it (channel ranges of [1, N, 85]), and its corner cases.
    for type, tag in [(TT.UINT8, "uint8"), (TT.INT8, "int8"), (TT.FLOAT32, "float32")]:
        strided_slice(f"strided_slice_{tag}_channels", type, [1, 20, 85], [0, 0, 4], [1, 20, 5], [1, 1, 1], [1, 20, 1])
    strided_slice("strided_slice_uint8_steps_and_masks", TT.UINT8, [1, 7, 9, 4], [0, 1, 7, 1], [1, 7, 1, 3], [1, 2, -3, 1], [1, 3, 2, 2],
                  BeginMask=1, EndMask=2)
    strided_slice("strided_slice_float32_negative_indices", TT.FLOAT32, [6, 10], [-5, -1], [-1, -11], [2, -2], [2, 5])
    strided_slice("strided_slice_int8_shrink_axis", TT.INT8, [2, 5, 6], [1, 0, 2], [2, 5, 5], [1, 1, 1], [5, 3], ShrinkAxisMask=1)
    strided_slice("strided_slice_float32_short_indices", TT.FLOAT32, [3, 4, 5], [1], [3], [1], [2, 4, 5])
    for type, tag in [(TT.UINT8, "uint8"), (TT.INT8, "int8"), (TT.FLOAT32, "float32")]:
        sub(f"sub_{tag}_broadcast", type, Act.NONE, [1, 4, 4, 3], [1, 1, 1, 3])
        sub(f"sub_{tag}_relu_left_broadcast", type, Act.RELU, [1, 1, 4, 1], [1, 3, 4, 2])
        transpose(f"transpose_{tag}_yolo_head", type, [1, 84, 40], [0, 2, 1])
    transpose("transpose_int8_rank4", TT.INT8, [2, 3, 4, 5], [3, 1, 0, 2])
    transpose("transpose_float32_rank5", TT.FLOAT32, [2, 1, 3, 2, 4], [4, 2, 0, 3, 1])
    unary("abs_float32", Op.ABS, TT.FLOAT32, [1, 5, 5, 3], {}, {}, Opt.AbsOptions, options("AbsOptions"))
    unary("l2_normalization_float32", Op.L2_NORMALIZATION, TT.FLOAT32, [2, 3, 16], {}, {}, Opt.L2NormOptions, options("L2NormOptions"))
    save("dequantize_float16", [T([3, 20], TT.FLOAT16), T([3, 20], TT.FLOAT32)], [0], [1],
         [(Op.DEQUANTIZE, None, [0], [1], 0, None, None)])
    # Float16 weights, as TFLite's float16 quantization stores them: a constant DEQUANTIZE feeding the convolution.
    weights = rng.normal(0, 0.5, [4, 3, 3, 3]).astype(np.float16)
    conv16 = [T([1, 9, 9, 3], TT.FLOAT32), T([4, 3, 3, 3], TT.FLOAT16, data=weights), T([4, 3, 3, 3], TT.FLOAT32),
              T([4], TT.FLOAT16, data=rng.normal(0, 0.5, [4]).astype(np.float16)), T([4], TT.FLOAT32), T([1, 9, 9, 4], TT.FLOAT32)]
    save("conv_float16_weights", conv16, [0], [5],
         [(Op.DEQUANTIZE, None, [1], [2], 0, None, None), (Op.DEQUANTIZE, None, [3], [4], 0, None, None),
          (Op.CONV_2D, None, [0, 2, 4], [5], Opt.Conv2DOptions,
           options("Conv2DOptions", Padding=Padding.SAME, StrideW=1, StrideH=1, FusedActivationFunction=1), None)])
    more_layout_and_math()
    float_convolutions()
    more_pads()
    save("quantize_int8_to_int8_yolo_scores", [T([4, 300], TT.INT8, scale=0.00390625, zp=-128), T([4, 300], TT.INT8, scale=0.003986, zp=-128)],
         [0], [1], [(Op.QUANTIZE, None, [0], [1], 0, None, None)])
    save("quantize_uint8_to_uint8_wider", [T([4, 300], TT.UINT8, scale=0.05, zp=120), T([4, 300], TT.UINT8, scale=0.02, zp=7)],
         [0], [1], [(Op.QUANTIZE, None, [0], [1], 0, None, None)])
    quantized_convolutions()
    silu()
    quantized_depthwise()
    # Axes that merge into a matrix transpose (YOLOv8's NHWC to NCHW, larger than one 32x32 tile),
    # into one with a size-1 axis between, and a transpose whose last axis stays last.
    transpose("transpose_int8_nhwc_to_nchw", TT.INT8, [1, 40, 9, 37], [0, 3, 1, 2])
    transpose("transpose_uint8_matrix_past_ones", TT.UINT8, [3, 1, 5, 40], [2, 3, 1, 0])
    transpose("transpose_int8_last_axis_kept", TT.INT8, [1, 4, 16, 50], [0, 2, 1, 3])
    fast_path_cases()
    activation_weight_cases()
    # A float-input model with a YOLOv8 output layout ([1, 4 + 2 classes, 21 candidates]): its input
    # reshaped into the output, so a detector's input scaling shows in the boxes and scores.
    save("reshape_float32_yolo_layout_from_input", [T([1, 2, 21, 3], TT.FLOAT32), i32([1, 6, 21]), T([1, 6, 21], TT.FLOAT32)],
         [0], [2], [(Op.RESHAPE, None, [0, 1], [2], 0, None, None)])
    hybrid_convolutions()
    hybrid_depthwise()
    folded_pad_cases()
    conv_silu_cases()
    softmax_rows_of_16_cases()
    concat_conv_cases()
    dfl_conv_case()
    # The bfloat16 path's pairs with an odd number of input channels (a zero half in each pixel's
    # last pair), and a last pair of blocks of 16 and 8 channels.
    float_convolutions([("conv2d_float32_1x1_c7_to_56_odd_pairs", [1, 9, 13, 7], 1, 1, 1, Padding.SAME, 56, Act.RELU6)])
    wide_matmul_cases()
    float_silu_cases()
    print("wrote", len(os.listdir(OUT)), "cases to", OUT)
    write_invalid_models()


def pad_then_conv(name, type, shape, pads, stride, cout, padded_also_output=False):
    """PAD, then a 3x3 VALID CONV_2D reading it (8-bit, the PAD's input quantization); with
    `padded_also_output` the padded tensor is a model output too (the fast path must then make it)."""
    padded = [shape[0], shape[1] + sum(pads[1]), shape[2] + sum(pads[2]), shape[3]]
    oh, ow = output_size(padded[1], padded[2], 3, stride, 1, Padding.VALID)
    (in_s, in_zp), filt, bias = quantized_filter(type, [cout, 3, 3, shape[3]], cout, 0, 131, (0.002, 0.01))
    out_q = {"scale": 0.08, "zp": 90} if type == TT.UINT8 else {"scale": 0.06, "zp": 4}
    opt = options("Conv2DOptions", Padding=Padding.VALID, StrideW=stride, StrideH=stride, FusedActivationFunction=Act.NONE,
                  DilationWFactor=1, DilationHFactor=1)
    tensors = [T(shape, type, scale=in_s, zp=in_zp), T([4, 2], TT.INT32, data=np.array(pads, np.int32)),
               T(padded, type, scale=in_s, zp=in_zp), filt, bias, T([shape[0], oh, ow, cout], type, **out_q)]
    save(name, tensors, [0], [5, 2] if padded_also_output else [5], [
        (Op.PAD, None, [0, 1], [2], Opt.PadOptions, options("PadOptions"), None),
        (Op.CONV_2D, None, [2, 3, 4], [5], Opt.Conv2DOptions, opt, None)])


def folded_pad_cases():
    """The fast path reads a PAD's input with its padding in the convolution after it: YOLOv8's first
    layer (RGB, a row and column each side, stride 2) on an odd size, and a PAD whose output is also
    a model output (not folded)."""
    pad_then_conv("pad_then_conv2d_int8_rgb_s2_odd", TT.INT8, [1, 21, 19, 3], [[0, 0], [1, 1], [1, 1], [0, 0]], 2, 16)
    pad_then_conv("pad_then_conv2d_int8_padded_also_output", TT.INT8, [1, 9, 11, 8], [[0, 0], [1, 1], [1, 1], [0, 0]], 2, 20,
                  padded_also_output=True)


def conv_then_silu(name, type, shape, k, cout, outputs=(5,), mul_act=Act.NONE):
    """An 8-bit CONV_2D (k x k, SAME, stride 1) whose output x feeds `x * LOGISTIC(x)`, as in every
    YOLOv8 layer; `outputs` names the model outputs among x (3) and the SiLU's result (5)."""
    (in_s, in_zp), filt, bias = quantized_filter(type, [cout, k, k, shape[3]], cout, 0, 125, (0.002, 0.01))
    x_q = {"scale": 0.07, "zp": 100} if type == TT.UINT8 else {"scale": 0.05, "zp": -20}
    s_q = {"scale": 1 / 256, "zp": 0} if type == TT.UINT8 else {"scale": 1 / 256, "zp": -128}
    o_q = {"scale": 0.035, "zp": 12} if type == TT.UINT8 else {"scale": 0.03, "zp": -110}
    opt = options("Conv2DOptions", Padding=Padding.SAME, StrideW=1, StrideH=1, FusedActivationFunction=Act.NONE,
                  DilationWFactor=1, DilationHFactor=1)
    out = [shape[0], shape[1], shape[2], cout]
    tensors = [T(shape, type, scale=in_s, zp=in_zp), filt, bias, T(out, type, **x_q), T(out, type, **s_q), T(out, type, **o_q)]
    save(name, tensors, [0], list(outputs), [
        (Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions, opt, None),
        (Op.LOGISTIC, None, [3], [4], 0, None, None),
        (Op.MUL, None, [3, 4], [5], Opt.MulOptions, options("MulOptions", FusedActivationFunction=mul_act), None)])


def conv_silu_cases():
    """The fast path applies a SiLU's table in the convolution writing its input (YOLOv8): a 3x3
    layer of 40 channels (a block and a part) on an odd size, a 1x1 uint8 layer with a RELU on the
    MUL, and one whose x is also a model output (not fused)."""
    conv_then_silu("conv2d_int8_then_silu", TT.INT8, [1, 13, 11, 24], 3, 40)
    conv_then_silu("conv2d_uint8_1x1_then_silu_relu", TT.UINT8, [1, 7, 9, 16], 1, 20, mul_act=Act.RELU)
    conv_then_silu("conv2d_int8_then_silu_input_also_output", TT.INT8, [1, 9, 10, 16], 3, 24, outputs=(5, 3))


def softmax_rows_of_16_cases():
    """Rows of 16 bytes (YOLOv8's box distributions), which the fast path permutes in registers:
    uint8 with a row count that leaves a remainder after blocks of 16, and int8 with another beta."""
    unary("softmax_uint8_rows_of_16", Op.SOFTMAX, TT.UINT8, [2, 3, 29, 16], {"scale": 0.07, "zp": 120},
          {"scale": 1 / 256, "zp": 0}, Opt.SoftmaxOptions, options("SoftmaxOptions", Beta=1.0))
    unary("softmax_int8_rows_of_16_beta", Op.SOFTMAX, TT.INT8, [1, 40, 16], {"scale": 0.02, "zp": 5},
          {"scale": 1 / 256, "zp": -128}, Opt.SoftmaxOptions, options("SoftmaxOptions", Beta=2.5))


def concat_then_conv(name, type, shape, channels, cout, concat_also_output=False, made_parts=False):
    """CONCATENATION along channels of parts with `channels` each (one quantization), then a 1x1
    CONV_2D reading it, as YOLOv8's C2f and SPPF blocks end. With `made_parts` the two parts are
    made by an ADD and a SUB of the inputs, and another ADD writes a model output between the
    CONCATENATION and the convolution (its storage must not reuse the parts')."""
    total = sum(channels)
    (in_s, in_zp), filt, bias = quantized_filter(type, [cout, 1, 1, total], cout, 0, 128, (0.002, 0.01))
    q = {"scale": in_s, "zp": in_zp}
    out_q = {"scale": 0.09, "zp": 100} if type == TT.UINT8 else {"scale": 0.07, "zp": 6}
    opt = options("Conv2DOptions", Padding=Padding.SAME, StrideW=1, StrideH=1, FusedActivationFunction=Act.NONE,
                  DilationWFactor=1, DilationHFactor=1)
    concat = options("ConcatenationOptions", Axis=3, FusedActivationFunction=Act.NONE)
    parts = [T(shape[:3] + [c], type, **q) for c in channels]
    if not made_parts:
        n = len(parts)
        tensors = parts + [T(shape[:3] + [total], type, **q), filt, bias, T(shape[:3] + [cout], type, **out_q)]
        save(name, tensors, list(range(n)), [n + 3, n] if concat_also_output else [n + 3], [
            (Op.CONCATENATION, None, list(range(n)), [n], Opt.ConcatenationOptions, concat, None),
            (Op.CONV_2D, None, [n, n + 1, n + 2], [n + 3], Opt.Conv2DOptions, opt, None)])
        return
    # 0, 1: inputs; 2, 3: ADD and SUB of them (the parts); 4: concatenated; 5: ADD written in between; 6-8: the convolution.
    tensors = parts + [T(shape[:3] + [c], type, **q) for c in channels] + [T(shape[:3] + [total], type, **q),
                                                                           T(shape[:3] + [channels[0]], type, **q),
                                                                           filt, bias, T(shape[:3] + [cout], type, **out_q)]
    save(name, tensors, [0, 1], [8, 5], [
        (Op.ADD, None, [0, 1], [2], Opt.AddOptions, options("AddOptions"), None),
        (Op.SUB, None, [0, 1], [3], Opt.SubOptions, options("SubOptions"), None),
        (Op.CONCATENATION, None, [2, 3], [4], Opt.ConcatenationOptions, concat, None),
        (Op.ADD, None, [1, 0], [5], Opt.AddOptions, options("AddOptions"), None),
        (Op.CONV_2D, None, [4, 6, 7], [8], Opt.Conv2DOptions, opt, None)])


def concat_conv_cases():
    """The fast path folds a CONCATENATION into the 1x1 convolution reading it: equal int8 parts,
    unequal uint8 parts over a batch of two (the row sums), parts made by operators with another
    tensor written in between, and a concatenation that is also a model output (not folded)."""
    concat_then_conv("concat_then_conv1x1_int8_three_parts", TT.INT8, [1, 11, 13, 0], [16, 16, 16], 40)
    concat_then_conv("concat_then_conv1x1_uint8_unequal_batch2", TT.UINT8, [2, 5, 7, 0], [32, 8], 20)
    concat_then_conv("concat_then_conv1x1_int8_parts_made", TT.INT8, [1, 9, 10, 0], [16, 16], 24, made_parts=True)
    concat_then_conv("concat_then_conv1x1_int8_concat_also_output", TT.INT8, [1, 6, 7, 0], [8, 12], 16, concat_also_output=True)


def dfl_conv_case():
    """A 1x1 int8 CONV_2D from 16 channels to one, as YOLOv8's box distributions are weighted by
    0..15 (the fast path's own kernel), on 4 x 37 pixels: not a whole number of its 16-pixel steps."""
    (in_s, in_zp), filt, bias = quantized_filter(TT.INT8, [1, 1, 1, 16], 1, 0, 128, (0.002, 0.01))
    opt = options("Conv2DOptions", Padding=Padding.VALID, StrideW=1, StrideH=1, FusedActivationFunction=Act.NONE,
                  DilationWFactor=1, DilationHFactor=1)
    save("conv2d_int8_1x1_16_to_1", [T([1, 4, 37, 16], TT.INT8, scale=in_s, zp=in_zp), filt, bias,
                                     T([1, 4, 37, 1], TT.INT8, scale=0.05, zp=-30)], [0], [3],
         [(Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions, opt, None)])


def output_size(h, w, k, stride, dilation, padding):
    """Output height and width of a convolution as TFLite computes them."""
    span = (k - 1) * dilation + 1
    return [(n + stride - 1) // stride if padding == Padding.SAME else (n - span) // stride + 1 for n in (h, w)]


def quantized_filter(type, fshape, channels, qdim, uint8_zero, int8_scales):
    """Input quantization, filter and bias of an 8-bit convolution: uint8 per-tensor with a zero
    point, int8 per-channel with scales drawn from `int8_scales`."""
    in_s, in_zp = (0.02, 120) if type == TT.UINT8 else (0.03, -5)
    if type == TT.UINT8:
        f_s, f_zp = np.float32(0.01), uint8_zero
    else:
        f_s, f_zp = rng.uniform(*int8_scales, channels).astype(np.float32), np.zeros(channels, np.int64)
    filt = T(fshape, type, data=quantized_weights(fshape, type), scale=f_s, zp=f_zp, qdim=qdim)
    b_s = np.float32(in_s) * np.atleast_1d(f_s).astype(np.float32)
    bias = T([channels], TT.INT32, data=rng.integers(-3000, 3000, [channels]).astype(np.int32), scale=b_s, zp=np.zeros(len(b_s), np.int64))
    return (in_s, in_zp), filt, bias


def float_convolutions(cases=None):
    """Float CONV_2D shapes that exercise every path of the AVX2 kernel: blocks of 16 and 8 channels
    with a partial last one, pixel tiles with a partial last one, padding taps, dilation, batches and
    the copied patches of a first layer with few input channels (added last, so earlier inputs stay)."""
    cases = cases or [  # name, input shape, kernel, stride, dilation, padding, output channels, activation
        ("conv2d_float32_1x1_c20_to_40_batch2", [2, 7, 5, 20], 1, 1, 1, Padding.SAME, 40, Act.RELU),
        ("conv2d_float32_5x5_s2_rgb_to_24", [1, 17, 13, 3], 5, 2, 1, Padding.SAME, 24, Act.NONE),
        ("conv2d_float32_3x3_dilated_c18_to_21", [1, 11, 10, 18], 3, 1, 2, Padding.VALID, 21, Act.RELU6),
        ("conv2d_float32_3x3_c33_to_16_same", [1, 6, 9, 33], 3, 1, 1, Padding.SAME, 16, Act.NONE),
    ]
    for name, shape, k, stride, dilation, padding, cout, act in cases:
        cin = shape[3]
        oh, ow = output_size(shape[1], shape[2], k, stride, dilation, padding)
        filt = T([cout, k, k, cin], TT.FLOAT32, data=rng.normal(0, 0.3, [cout, k, k, cin]).astype(np.float32))
        bias = T([cout], TT.FLOAT32, data=rng.normal(0, 0.5, [cout]).astype(np.float32))
        opt = options("Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=act,
                      DilationWFactor=dilation, DilationHFactor=dilation)
        tensors, ops = [T(shape, TT.FLOAT32), filt, bias, T([shape[0], oh, ow, cout], TT.FLOAT32)], [(Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions, opt, None)]
        save(name, tensors, [0], [3], ops)
        save_bfloat16_expectation(name, tensors, [0], [3], ops, rounded=[1])


def quantized_convolutions(cases=None):
    """8-bit CONV_2D shapes for the AVX2 kernel: partial channel blocks and pixel tiles, an odd
    receptive field (its last pair half empty), padding, dilation, batches, and input rows long
    enough to be widened 16 values at a time."""
    cases = cases or [  # name, type, input shape, kernel, stride, dilation, padding, output channels, activation
        ("conv2d_uint8_1x1_c35_to_40_batch2", TT.UINT8, [2, 7, 5, 35], 1, 1, 1, Padding.SAME, 40, Act.RELU6),
        ("conv2d_int8_3x3_s2_c5_to_21", TT.INT8, [1, 13, 11, 5], 3, 2, 1, Padding.SAME, 21, Act.NONE),
        ("conv2d_int8_3x3_dilated_c18_to_16", TT.INT8, [1, 11, 10, 18], 3, 1, 2, Padding.VALID, 16, Act.RELU),
        ("conv2d_uint8_5x5_s2_rgb_to_24", TT.UINT8, [1, 17, 13, 3], 5, 2, 1, Padding.SAME, 24, Act.NONE),
    ]
    for name, type, shape, k, stride, dilation, padding, cout, act in cases:
        oh, ow = output_size(shape[1], shape[2], k, stride, dilation, padding)
        (in_s, in_zp), filt, bias = quantized_filter(type, [cout, k, k, shape[3]], cout, 0, 131, (0.002, 0.01))
        out_q = {"scale": 0.08, "zp": 90} if type == TT.UINT8 else {"scale": 0.06, "zp": 4}
        opt = options("Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=act,
                      DilationWFactor=dilation, DilationHFactor=dilation)
        save(name, [T(shape, type, scale=in_s, zp=in_zp), filt, bias, T([shape[0], oh, ow, cout], type, **out_q)], [0], [3],
             [(Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions, opt, None)])


def quantized_depthwise():
    """8-bit DEPTHWISE_CONV_2D with channels not a multiple of 8, padding on every side, stride 2,
    dilation, batches."""
    cases = [  # name, type, input shape, kernel, stride, dilation, padding, activation
        ("depthwise_uint8_3x3_s2_c21_batch2", TT.UINT8, [2, 9, 8, 21], 3, 2, 1, Padding.SAME, Act.RELU6),
        ("depthwise_int8_5x5_c19_same", TT.INT8, [1, 7, 9, 19], 5, 1, 1, Padding.SAME, Act.NONE),
        ("depthwise_int8_3x3_dilated_c16", TT.INT8, [1, 10, 11, 16], 3, 1, 2, Padding.VALID, Act.RELU),
    ]
    for name, type, shape, k, stride, dilation, padding, act in cases:
        c = shape[3]
        oh, ow = output_size(shape[1], shape[2], k, stride, dilation, padding)
        (in_s, in_zp), filt, bias = quantized_filter(type, [1, k, k, c], c, 3, 125, (0.002, 0.02))
        out_q = {"scale": 0.05, "zp": 100} if type == TT.UINT8 else {"scale": 0.04, "zp": -3}
        opt = options("DepthwiseConv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, DepthMultiplier=1,
                      FusedActivationFunction=act, DilationWFactor=dilation, DilationHFactor=dilation)
        save(name, [T(shape, type, scale=in_s, zp=in_zp), filt, bias, T([shape[0], oh, ow, c], type, **out_q)], [0], [3],
             [(Op.DEPTHWISE_CONV_2D, None, [0, 1, 2], [3], Opt.DepthwiseConv2DOptions, opt, None)])


def silu():
    """x * LOGISTIC(x) as YOLOv8 exports it (fused into one table on the fast path), and once with the
    LOGISTIC's output also a model output, which must then be written."""
    for name, type, x_q, s_q, o_q, outputs in [
            ("silu_int8", TT.INT8, (0.08, 20), (1 / 256, -128), (0.04, -120), [2]),
            ("silu_uint8", TT.UINT8, (0.05, 140), (1 / 256, 0), (0.03, 10), [2]),
            ("silu_int8_sigmoid_also_output", TT.INT8, (0.08, 20), (1 / 256, -128), (0.04, -120), [1, 2])]:
        tensors = [T([1, 9, 10, 7], type, scale=x_q[0], zp=x_q[1]), T([1, 9, 10, 7], type, scale=s_q[0], zp=s_q[1]),
                   T([1, 9, 10, 7], type, scale=o_q[0], zp=o_q[1])]
        save(name, tensors, [0], outputs, [(Op.LOGISTIC, None, [0], [1], 0, None, None),
                                           (Op.MUL, None, [0, 1], [2], Opt.MulOptions, options("MulOptions"), None)])


def more_pads(cases=None):
    """PAD of whole image rows (height and width only, as before YOLOv8's first convolution) and of
    the batch dimension only: the runs the kernel copies at once."""
    q = {"scale": 0.04, "zp": -9}
    for name, type, qp, shape, pads in cases or [
            ("pad_int8_height_width_batch2", TT.INT8, q, [2, 4, 5, 3], [[0, 0], [1, 2], [3, 0], [0, 0]]),
            ("pad_float32_batch_only", TT.FLOAT32, {}, [2, 2, 3, 2], [[1, 1], [0, 0], [0, 0], [0, 0]])]:
        out = [n + a + b for n, (a, b) in zip(shape, pads)]
        save(name, [T(shape, type, **qp), T([4, 2], TT.INT32, data=np.array(pads, np.int32)), T(out, type, **qp)], [0], [2],
             [(Op.PAD, None, [0, 1], [2], Opt.PadOptions, options("PadOptions"), None)])


def i32(values):
    values = np.array(values, np.int32)
    return T(list(values.shape), TT.INT32, data=values)


def more_layout_and_math():
    """SLICE, SPLIT, SPLIT_V, PACK, UNPACK, GATHER, DEPTH_TO_SPACE, CAST, NEG, EXP, TANH, MINIMUM,
    MAXIMUM, PRELU, MEAN, SUM, BATCH_MATMUL (added after the others, so their random inputs stay)."""
    q = {"scale": 0.05, "zp": 3}
    for type, tag, qp in [(TT.FLOAT32, "float32", {}), (TT.INT8, "int8", q)]:
        save(f"slice_{tag}", [T([2, 5, 6, 3], type, **qp), i32([1, 1, 2, 0]), i32([1, -1, 3, 2]), T([1, 4, 3, 2], type, **qp)],
             [0], [3], [(Op.SLICE, None, [0, 1, 2], [3], 0, None, None)])
        save(f"split_{tag}_axis_minus1", [i32([-1]), T([2, 3, 6], type, **qp), T([2, 3, 2], type, **qp), T([2, 3, 2], type, **qp),
                                          T([2, 3, 2], type, **qp)], [1], [2, 3, 4],
             [(Op.SPLIT, None, [0, 1], [2, 3, 4], Opt.SplitOptions, options("SplitOptions", NumSplits=3), None)])
        save(f"split_v_{tag}", [T([2, 7, 3], type, **qp), i32([2, -1, 1]), i32([1]), T([2, 2, 3], type, **qp), T([2, 4, 3], type, **qp),
                                T([2, 1, 3], type, **qp)], [0], [3, 4, 5],
             [(Op.SPLIT_V, None, [0, 1, 2], [3, 4, 5], Opt.SplitVOptions, options("SplitVOptions", NumSplits=3), None)])
        save(f"pack_{tag}_axis1", [T([2, 3], type, **qp), T([2, 3], type, **qp), T([2, 3], type, **qp), T([2, 3, 3], type, **qp)],
             [0, 1, 2], [3], [(Op.PACK, None, [0, 1, 2], [3], Opt.PackOptions, options("PackOptions", ValuesCount=3, Axis=1), None)])
        save(f"unpack_{tag}_axis2", [T([2, 3, 2], type, **qp), T([2, 3], type, **qp), T([2, 3], type, **qp)], [0], [1, 2],
             [(Op.UNPACK, None, [0], [1, 2], Opt.UnpackOptions, options("UnpackOptions", Num=2, Axis=2), None)])
        save(f"gather_{tag}_axis1", [T([2, 5, 3], type, **qp), i32([[4, 0], [2, 2]]), T([2, 2, 2, 3], type, **qp)], [0], [2],
             [(Op.GATHER, None, [0, 1], [2], Opt.GatherOptions, options("GatherOptions", Axis=1), None)])
        save(f"depth_to_space_{tag}", [T([1, 2, 3, 8], type, **qp), T([1, 4, 6, 2], type, **qp)], [0], [1],
             [(Op.DEPTH_TO_SPACE, None, [0], [1], Opt.DepthToSpaceOptions, options("DepthToSpaceOptions", BlockSize=2), None)])
        for code, name in [(Op.MINIMUM, "minimum"), (Op.MAXIMUM, "maximum")]:
            save(f"{name}_{tag}_broadcast", [T([2, 3, 4], type, **qp), T([1, 3, 1], type, **qp), T([2, 3, 4], type, **qp)], [0, 1], [2],
                 [(code, None, [0, 1], [2], Opt.MaximumMinimumOptions, options("MaximumMinimumOptions"), None)])
    save("gather_float32_constant_indices_axis0", [T([4, 3], TT.FLOAT32), i32([3, 1, 3]), T([3, 3], TT.FLOAT32)], [0], [2],
         [(Op.GATHER, None, [0, 1], [2], Opt.GatherOptions, options("GatherOptions", Axis=0), None)])
    for source, target, tag in [(TT.FLOAT32, TT.INT32, "float32_to_int32"), (TT.INT32, TT.FLOAT32, "int32_to_float32"),
                                (TT.UINT8, TT.FLOAT32, "uint8_to_float32"), (TT.INT8, TT.INT32, "int8_to_int32")]:
        save(f"cast_{tag}", [T([3, 7], source), T([3, 7], target)], [0], [1],
             [(Op.CAST, None, [0], [1], Opt.CastOptions, options("CastOptions", InDataType=source, OutDataType=target), None)])
    for code, name, opt in [(Op.NEG, "neg", "NegOptions"), (Op.EXP, "exp", "ExpOptions"), (Op.TANH, "tanh", None)]:
        save(f"{name}_float32", [T([2, 3, 5], TT.FLOAT32), T([2, 3, 5], TT.FLOAT32)], [0], [1],
             [(code, None, [0], [1], getattr(Opt, opt) if opt else 0, options(opt) if opt else None, None)])
    save("prelu_float32_channel_alpha", [T([1, 4, 4, 3], TT.FLOAT32), T([1, 1, 3], TT.FLOAT32, data=np.array([[[0.25, -0.1, 1.5]]], np.float32)),
                                         T([1, 4, 4, 3], TT.FLOAT32)], [0], [2], [(Op.PRELU, None, [0, 1], [2], 0, None, None)])
    for code, name in [(Op.MEAN, "mean"), (Op.SUM, "sum")]:
        save(f"{name}_float32_spatial_keep_dims", [T([2, 4, 5, 3], TT.FLOAT32), i32([1, 2]), T([2, 1, 1, 3], TT.FLOAT32)], [0], [2],
             [(code, None, [0, 1], [2], Opt.ReducerOptions, options("ReducerOptions", KeepDims=True), None)])
        save(f"{name}_float32_last_axis", [T([3, 2, 6], TT.FLOAT32), i32([-1]), T([3, 2], TT.FLOAT32)], [0], [2],
             [(code, None, [0, 1], [2], Opt.ReducerOptions, options("ReducerOptions", KeepDims=False), None)])
    save("batch_matmul_float32_broadcast", [T([2, 1, 3, 4], TT.FLOAT32), T([3, 4, 5], TT.FLOAT32), T([2, 3, 3, 5], TT.FLOAT32)], [0, 1], [2],
         [(Op.BATCH_MATMUL, None, [0, 1], [2], Opt.BatchMatMulOptions, options("BatchMatMulOptions"), None)])
    save("batch_matmul_float32_adjoint", [T([2, 4, 3], TT.FLOAT32), T([2, 5, 4], TT.FLOAT32), T([2, 3, 5], TT.FLOAT32)], [0, 1], [2],
         [(Op.BATCH_MATMUL, None, [0, 1], [2], Opt.BatchMatMulOptions, options("BatchMatMulOptions", AdjX=True, AdjY=True), None)])


def fast_path_cases():
    """Cases for the fast path's own kernels (appended last so the cases above keep their random inputs)."""
    # Large enough that the fast path splits them across threads in several tasks, so tasks start
    # at a row other than the first (matrix transposes in blocks of 32 output rows).
    transpose("transpose_int8_height_width_split", TT.INT8, [1, 30, 40, 64], [0, 2, 1, 3])
    transpose("transpose_uint8_nhwc_to_nchw_split", TT.UINT8, [1, 40, 40, 144], [0, 3, 1, 2])
    transpose("transpose_float32_nhwc_to_nchw_split", TT.FLOAT32, [1, 20, 40, 84], [0, 3, 1, 2])
    strided_slice("strided_slice_int8_channels_split", TT.INT8, [1, 40, 40, 64], [0, 0, 0, 16], [1, 40, 40, 48], [1, 1, 1, 1], [1, 40, 40, 32])
    # An ADD followed by a RELU or RELU6 that alone reads it (the fast path clamps in the ADD), and
    # one whose sum is also a model output (the RELU must then run on its own).
    for type, tag, code, relu in [(TT.FLOAT32, "float32", Op.ADD, Op.RELU), (TT.INT8, "int8", Op.ADD, Op.RELU6),
                                  (TT.UINT8, "uint8", Op.SUB, Op.RELU), (TT.FLOAT32, "float32_sum_also_output", Op.MUL, Op.RELU6)]:
        q = lambda s, z: {} if type == TT.FLOAT32 else {"scale": s, "zp": z if type == TT.UINT8 else z - 128}
        module, opt_type = {Op.ADD: ("AddOptions", Opt.AddOptions), Op.SUB: ("SubOptions", Opt.SubOptions),
                            Op.MUL: ("MulOptions", Opt.MulOptions)}[code]
        tensors = [T([1, 6, 5, 4], type, **q(0.02, 128)), T([1, 6, 5, 4], type, **q(0.03, 110)),
                   T([1, 6, 5, 4], type, **q(0.05, 125)), T([1, 6, 5, 4], type, **q(0.05, 125))]
        outputs = [3, 2] if "also_output" in tag else [3]
        save(f"{code_name(code)}_then_{code_name(relu)}_{tag}", tensors, [0, 1], outputs,
             [(code, None, [0, 1], [2], opt_type, options(module), None), (relu, None, [2], [3], 0, None, None)])
    # BlazeFace's channel padding before a residual ADD, and image rows padded above and below.
    more_pads([("pad_float32_channels_split", TT.FLOAT32, {}, [1, 40, 40, 24], [[0, 0], [0, 0], [0, 0], [0, 4]]),
               ("pad_int8_height_width_split", TT.INT8, {"scale": 0.04, "zp": -9}, [1, 100, 60, 16], [[0, 0], [2, 1], [1, 2], [0, 0]])])
    # Pixel tiles that wrap from one image row, and one image, to the next (the kernel steps pixel
    # coordinates along a tile rather than dividing per pixel).
    float_convolutions([("conv2d_float32_3x3_batch3_tiles_wrap", [3, 5, 7, 6], 3, 1, 1, Padding.SAME, 10, Act.NONE)])
    # PReLU as TensorFlow exports it (MobileFaceNet): RELU(x) + (x - ABS(x)) * alpha * 0.5, 13 channels
    # (a partial vector) over enough rows to split across threads; once with the ADD clamping
    # (RELU6), once with an intermediate also a model output (the six operators must then run).
    for name, act, outputs in [("prelu_pattern_float32", Act.NONE, [8]), ("prelu_pattern_float32_relu6", Act.RELU6, [8]),
                               ("prelu_pattern_float32_product_also_output", Act.NONE, [8, 4])]:
        shape = [1, 24, 30, 13]
        alpha = T([13], TT.FLOAT32, data=rng.uniform(0.05, 0.6, [13]).astype(np.float32))
        half = T([], TT.FLOAT32, data=np.array(0.5, np.float32))
        tensors = [T(shape, TT.FLOAT32), T(shape, TT.FLOAT32), T(shape, TT.FLOAT32), alpha, T(shape, TT.FLOAT32), half,
                   T(shape, TT.FLOAT32), T(shape, TT.FLOAT32), T(shape, TT.FLOAT32)]
        save(name, tensors, [0], outputs, [
            (Op.ABS, None, [0], [1], 0, None, None),
            (Op.SUB, None, [0, 1], [2], Opt.SubOptions, options("SubOptions"), None),
            (Op.MUL, None, [2, 3], [4], Opt.MulOptions, options("MulOptions"), None),
            (Op.MUL, None, [4, 5], [6], Opt.MulOptions, options("MulOptions"), None),
            (Op.RELU, None, [0], [7], 0, None, None),
            (Op.ADD, None, [7, 6], [8], Opt.AddOptions, options("AddOptions", FusedActivationFunction=act), None)])
    # The VNNI kernel's paths: int8 inputs read as x + 128 straight from a 1x1 layer's input (in
    # channels a multiple of 4) in tasks starting past the first row; receptive fields long enough
    # that a task keeps fewer than 64 im2col rows on its stack (int8, and uint8 with its row sums).
    quantized_convolutions([
        ("conv2d_int8_1x1_c64_to_40_batch2_direct", TT.INT8, [2, 9, 10, 64], 1, 1, 1, Padding.SAME, 40, Act.NONE),
        ("conv2d_int8_3x3_c200_to_36_long_field", TT.INT8, [1, 12, 11, 200], 3, 1, 1, Padding.SAME, 36, Act.RELU6),
        ("conv2d_uint8_3x3_c180_to_20_long_field", TT.UINT8, [1, 10, 12, 180], 3, 1, 1, Padding.SAME, 20, Act.RELU),
    ])
    # 8-bit SOFTMAX over enough rows that groups of 16 run on AVX-512 and a few are left over:
    # YOLOv8's box distribution (rows of 16) and longer rows.
    softmax = options("SoftmaxOptions", Beta=1.0)
    unary("softmax_int8_rows_of_16", Op.SOFTMAX, TT.INT8, [1, 4, 37, 16], {"scale": 0.09, "zp": -20},
          {"scale": 1 / 256, "zp": -128}, Opt.SoftmaxOptions, softmax)
    unary("softmax_uint8_rows_of_40", Op.SOFTMAX, TT.UINT8, [21, 40], {"scale": 0.05, "zp": 130},
          {"scale": 1 / 256, "zp": 0}, Opt.SoftmaxOptions, softmax)
    # A depthwise filter covering its whole input (MobileFaceNet's global depthwise layer), batch 2.
    shape = [2, 7, 7, 40]
    filt = T([1, 7, 7, 40], TT.FLOAT32, data=rng.normal(0, 0.3, [1, 7, 7, 40]).astype(np.float32))
    bias = T([40], TT.FLOAT32, data=rng.normal(0, 0.5, [40]).astype(np.float32))
    save("depthwise_float32_global_7x7_batch2", [T(shape, TT.FLOAT32), filt, bias, T([2, 1, 1, 40], TT.FLOAT32)], [0], [3],
         [(Op.DEPTHWISE_CONV_2D, None, [0, 1, 2], [3], Opt.DepthwiseConv2DOptions,
           options("DepthwiseConv2DOptions", Padding=Padding.VALID, StrideW=1, StrideH=1, DepthMultiplier=1,
                   FusedActivationFunction=Act.RELU6), None)])
    # A float convolution followed by the PReLU pattern (MobileFaceNet): the fast path applies the
    # PReLU in the convolution's tiles. 40 channels (two blocks of 16 and one of 8), RELU6 at the ADD.
    shape, cout = [1, 9, 11, 6], 40
    conv_out = [1, 9, 11, cout]
    filt = T([cout, 3, 3, 6], TT.FLOAT32, data=rng.normal(0, 0.3, [cout, 3, 3, 6]).astype(np.float32))
    bias = T([cout], TT.FLOAT32, data=rng.normal(0, 0.3, [cout]).astype(np.float32))
    alpha = T([cout], TT.FLOAT32, data=rng.uniform(0.05, 0.6, [cout]).astype(np.float32))
    conv = (Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions,
            options("Conv2DOptions", Padding=Padding.SAME, StrideW=1, StrideH=1, FusedActivationFunction=Act.NONE), None)
    save_then_prelu("conv_then_prelu_pattern_float32", shape, filt, bias, conv, conv_out, alpha, activation=Act.RELU6, bf16=True)
    # BlazeFace's widening residual: ADD(y, PAD(x) with zero channels appended), then a RELU; x is
    # also read by an operator between the PAD and the ADD (its storage must outlive the PAD).
    x, y = [1, 12, 10, 20], [1, 12, 10, 28]
    save("pad_channels_then_add_relu_float32", [T(x, TT.FLOAT32), T([4, 2], TT.INT32, data=np.array([[0, 0], [0, 0], [0, 0], [0, 8]], np.int32)),
                                               T(y, TT.FLOAT32), T(y, TT.FLOAT32), T(x, TT.FLOAT32), T(y, TT.FLOAT32), T(y, TT.FLOAT32)],
         [0, 2], [6, 4], [
             (Op.PAD, None, [0, 1], [3], Opt.PadOptions, options("PadOptions"), None),
             (Op.ABS, None, [0], [4], 0, None, None),
             (Op.ADD, None, [2, 3], [5], Opt.AddOptions, options("AddOptions"), None),
             (Op.RELU, None, [5], [6], 0, None, None)])
    # YOLO's explicit PAD before a VALID convolution, on the fast path's kernels: int8 with 70
    # channels (two blocks of 32, and 6), stride 2, one row and column on each side; uint8 with
    # uneven padding (a row below, a column on the left), stride 1.
    pad_then_conv("pad_then_conv2d_int8_3x3_s2_valid", TT.INT8, [1, 13, 12, 16], [[0, 0], [1, 1], [1, 1], [0, 0]], 2, 70)
    pad_then_conv("pad_then_conv2d_uint8_3x3_valid_uneven", TT.UINT8, [1, 10, 9, 8], [[0, 0], [0, 1], [1, 0], [0, 0]], 1, 24)
    # Float depthwise shapes for the fast path's AVX-512 kernel: 3x3 stride 1 (columns that slide,
    # padding on every side, a partial block of 8), stride 2 over a batch (two blocks at a time, the
    # second partial), dilation 2 (three blocks), a row too narrow for any column to slide, and a
    # 5x5 dilated filter (the general path, a partial block).
    for name, shape, k, stride, dilation, padding, act in [
            ("depthwise_float32_3x3_c24_same", [1, 13, 17, 24], 3, 1, 1, Padding.SAME, Act.RELU6),
            ("depthwise_float32_3x3_s2_c28_batch2", [2, 11, 9, 28], 3, 2, 1, Padding.SAME, Act.NONE),
            ("depthwise_float32_3x3_dilated_c40", [1, 9, 10, 40], 3, 1, 2, Padding.SAME, Act.RELU),
            ("depthwise_float32_3x3_c16_width2", [1, 5, 2, 16], 3, 1, 1, Padding.SAME, Act.NONE),
            ("depthwise_float32_5x5_dilated_c19_valid", [1, 14, 12, 19], 5, 1, 2, Padding.VALID, Act.NONE)]:
        channels = shape[3]
        oh, ow = output_size(shape[1], shape[2], k, stride, dilation, padding)
        filt = T([1, k, k, channels], TT.FLOAT32, data=rng.normal(0, 0.4, [1, k, k, channels]).astype(np.float32))
        bias = T([channels], TT.FLOAT32, data=rng.normal(0, 0.5, [channels]).astype(np.float32))
        opt = options("DepthwiseConv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, DepthMultiplier=1,
                      FusedActivationFunction=act, DilationWFactor=dilation, DilationHFactor=dilation)
        save(name, [T(shape, TT.FLOAT32), filt, bias, T([shape[0], oh, ow, channels], TT.FLOAT32)], [0], [3],
             [(Op.DEPTHWISE_CONV_2D, None, [0, 1, 2], [3], Opt.DepthwiseConv2DOptions, opt, None)])
    # 8-bit convolutions whose filter rows the VNNI kernel reads in place (k_w * in_c a multiple of
    # 4): stride 2 over a batch with SAME padding (edge pixels copied, rows above and below read as
    # zero points, tasks crossing images), and a uint8 5x5 (its row sums over five filter rows).
    quantized_convolutions([
        ("conv2d_int8_3x3_s2_c8_to_24_batch2_in_place", TT.INT8, [2, 13, 11, 8], 3, 2, 1, Padding.SAME, 24, Act.RELU),
        ("conv2d_uint8_5x5_c4_to_33_in_place", TT.UINT8, [1, 9, 14, 4], 5, 1, 1, Padding.SAME, 33, Act.NONE),
    ])
    # 8-bit matrix transposes in 16x16 blocks: [63, 37] (rows and columns past the last whole block,
    # tasks of 32 columns), and YOLOv8's DFL layout [16, 4 * 130] (columns across many tasks).
    transpose("transpose_int8_matrix_63x37", TT.INT8, [1, 7, 9, 37], [0, 3, 1, 2])
    transpose("transpose_uint8_dfl_16_rows", TT.UINT8, [1, 16, 4, 130], [0, 2, 3, 1])
    # YOLOv8's C2f split and join: a channel half of 16 bytes per pixel, and a channel concatenation
    # whose parts are 16, 32 and 64 bytes (copied as vectors) and 8 bytes, split across threads
    # (LiteRT's int8 concatenation needs one scale; concatenation_uint8 has parts requantized).
    strided_slice("strided_slice_int8_half_of_32_channels", TT.INT8, [1, 20, 21, 32], [0, 0, 0, 16], [1, 20, 21, 32],
                  [1, 1, 1, 1], [1, 20, 21, 16])
    q = {"scale": 0.04, "zp": -3}
    parts = [T([1, 20, 21, 16], TT.INT8, **q), T([1, 20, 21, 32], TT.INT8, **q), T([1, 20, 21, 64], TT.INT8, **q),
             T([1, 20, 21, 8], TT.INT8, **q)]
    save("concatenation_int8_channels_16_32_64", parts + [T([1, 20, 21, 120], TT.INT8, **q)], [0, 1, 2, 3], [4],
         [(Op.CONCATENATION, None, [0, 1, 2, 3], [4], Opt.ConcatenationOptions, options("ConcatenationOptions", Axis=3), None)])
    # 8-bit convolutions whose filter rows are not whole groups of 4 bytes, read in place padded to
    # the next group (the bytes past each row meet zero weights): RGB 3x3 stride 2 with SAME padding
    # (pixels at the right edge copied), uint8 RGB (row sums over the taps only), YOLOv5's 6x6 stride
    # 2 on RGB (18 bytes read as 20), and 2 channels (6 as 8).
    quantized_convolutions([
        ("conv2d_int8_3x3_s2_rgb_rows_padded", TT.INT8, [1, 17, 23, 3], 3, 2, 1, Padding.SAME, 16, Act.RELU),
        ("conv2d_uint8_3x3_rgb_rows_padded_row_sums", TT.UINT8, [1, 12, 15, 3], 3, 1, 1, Padding.SAME, 20, Act.NONE),
        ("conv2d_int8_6x6_s2_rgb_rows_padded_valid", TT.INT8, [1, 20, 22, 3], 6, 2, 1, Padding.VALID, 24, Act.NONE),
        ("conv2d_uint8_3x3_c2_rows_padded_batch2", TT.UINT8, [2, 9, 8, 2], 3, 1, 1, Padding.SAME, 24, Act.RELU6),
    ])



def activation_weight_cases():
    """Matrix products of two activations, as YOLO11's attention (C2PSA) exports them: FULLY_CONNECTED
    whose weights (and bias) are model inputs, and BATCH_MATMUL on int8 (appended last so the cases
    above keep their random inputs). Shapes: 8-bit with zero points on both sides, the attention's
    query x key ([N, 32] x [N, 32] -> [N, N]) and value x attention ([64, N] x [N, N]) at N = 49 (a
    7x7 map: rows past any block of 16), a batch of heads, and adjoint sides."""
    qa, qb = {"scale": 0.05, "zp": -7}, {"scale": 0.04, "zp": 11}
    for type, tag, a_q, b_q, out_q in [(TT.INT8, "int8", qa, qb, {"scale": 0.9, "zp": 5}),
                                       (TT.UINT8, "uint8", {"scale": 0.05, "zp": 121}, {"scale": 0.04, "zp": 139}, {"scale": 0.9, "zp": 133}),
                                       (TT.FLOAT32, "float32", {}, {}, {})]:
        fc = options("FullyConnectedOptions", FusedActivationFunction=Act.NONE, KeepNumDims=True)
        save(f"fully_connected_{tag}_activation_weights_query_key", [T([1, 49, 32], type, **a_q), T([49, 32], type, **b_q),
                                                                    T([1, 49, 49], type, **out_q)], [0, 1], [2],
             [(Op.FULLY_CONNECTED, None, [0, 1], [2], Opt.FullyConnectedOptions, fc, None)])
    # Value x attention, RELU6 fused, with a bias that is also an input (float) or constant (int8).
    fc6 = options("FullyConnectedOptions", FusedActivationFunction=Act.RELU6)
    save("fully_connected_float32_activation_weights_and_bias", [T([64, 49], TT.FLOAT32), T([49, 49], TT.FLOAT32), T([49], TT.FLOAT32),
                                                                 T([64, 49], TT.FLOAT32)], [0, 1, 2], [3],
         [(Op.FULLY_CONNECTED, None, [0, 1, 2], [3], Opt.FullyConnectedOptions, fc6, None)])
    bias = T([49], TT.INT32, data=rng.integers(-3000, 3000, [49]).astype(np.int32), scale=np.float32(0.05) * np.float32(0.04), zp=0)
    save("fully_connected_int8_activation_weights_value_attention", [T([64, 49], TT.INT8, **qa), T([49, 49], TT.INT8, **qb), bias,
                                                                     T([64, 49], TT.INT8, scale=0.3, zp=-2)], [0, 1], [3],
         [(Op.FULLY_CONNECTED, None, [0, 1, 2], [3], Opt.FullyConnectedOptions, fc6, None)])
    # BATCH_MATMUL on int8: two heads, [2, 49, 32] x [2, 32, 49]; adjoint y with a broadcast batch;
    # adjoint x.
    bm = lambda **kw: options("BatchMatMulOptions", **kw)
    for name, a, b, out, kw in [("batch_matmul_int8_heads", [1, 2, 49, 32], [1, 2, 32, 49], [1, 2, 49, 49], {}),
                                ("batch_matmul_int8_adjoint_y_broadcast", [2, 1, 17, 32], [3, 40, 32], [2, 3, 17, 40], {"AdjY": True}),
                                ("batch_matmul_int8_adjoint_x", [2, 32, 21], [2, 32, 18], [2, 21, 18], {"AdjX": True})]:
        save(name, [T(a, TT.INT8, **qa), T(b, TT.INT8, **qb), T(out, TT.INT8, scale=0.8, zp=-3)], [0, 1], [2],
             [(Op.BATCH_MATMUL, None, [0, 1], [2], Opt.BatchMatMulOptions, bm(**kw), None)])


def float_silu_cases():
    """x * LOGISTIC(x) on float32 (hybrid YOLO exports), one pass on the fast path: inputs in -3..3,
    then scaled by 30 (exp's range, both signs), with a RELU6 on the MUL, and once with the
    LOGISTIC's output also a model output (the two operators then run as they are)."""
    shape = [1, 9, 10, 7]
    silu_ops = lambda x, s, out, act: [(Op.LOGISTIC, None, [x], [s], 0, None, None),
                                       (Op.MUL, None, [x, s], [out], Opt.MulOptions, options("MulOptions", FusedActivationFunction=act), None)]
    save("silu_float32", [T(shape, TT.FLOAT32), T(shape, TT.FLOAT32), T(shape, TT.FLOAT32)], [0], [2], silu_ops(0, 1, 2, Act.NONE))
    save("silu_float32_sigmoid_also_output", [T(shape, TT.FLOAT32), T(shape, TT.FLOAT32), T(shape, TT.FLOAT32)], [0], [1, 2],
         silu_ops(0, 1, 2, Act.NONE))
    thirty = T([], TT.FLOAT32, data=np.array(30, np.float32))
    for name, act in [("silu_float32_wide_range", Act.NONE), ("silu_float32_wide_range_relu6", Act.RELU6)]:
        save(name, [T(shape, TT.FLOAT32), thirty, T(shape, TT.FLOAT32), T(shape, TT.FLOAT32), T(shape, TT.FLOAT32)], [0], [4],
             [(Op.MUL, None, [0, 1], [2], Opt.MulOptions, options("MulOptions"), None)] + silu_ops(2, 3, 4, act))


def wide_matmul_cases():
    """Products of two activations with more than 64 output columns: the kernel sums blocks of 64
    columns in registers, then the columns left over (int8 and float BATCH_MATMUL, a float
    FULLY_CONNECTED whose weights are an input)."""
    qa, qb = {"scale": 0.05, "zp": -7}, {"scale": 0.04, "zp": 11}
    bm = options("BatchMatMulOptions")
    save("batch_matmul_int8_wide_columns", [T([1, 2, 9, 32], TT.INT8, **qa), T([1, 2, 32, 150], TT.INT8, **qb),
                                            T([1, 2, 9, 150], TT.INT8, scale=0.8, zp=-3)], [0, 1], [2],
         [(Op.BATCH_MATMUL, None, [0, 1], [2], Opt.BatchMatMulOptions, bm, None)])
    save("batch_matmul_float32_wide_columns", [T([2, 5, 16], TT.FLOAT32), T([2, 16, 70], TT.FLOAT32), T([2, 5, 70], TT.FLOAT32)], [0, 1], [2],
         [(Op.BATCH_MATMUL, None, [0, 1], [2], Opt.BatchMatMulOptions, bm, None)])
    fc = options("FullyConnectedOptions", FusedActivationFunction=Act.NONE, KeepNumDims=True)
    save("fully_connected_float32_activation_weights_wide", [T([1, 5, 24], TT.FLOAT32), T([140, 24], TT.FLOAT32), T([1, 5, 140], TT.FLOAT32)],
         [0, 1], [2], [(Op.FULLY_CONNECTED, None, [0, 1], [2], Opt.FullyConnectedOptions, fc, None)])


def hybrid_convolutions():
    """Hybrid CONV_2D (float input and output, int8 weights with a scale per output channel, float
    bias), as dynamic-range exports (MobileFaceNet's, YOLO's) hold them (appended last so the cases
    above keep their random inputs): a 3x3 over RGB with padding, a 1x1 at stride 1 with PReLU-like
    ranges (inputs mostly negative), a strided 3x3 with RELU6 over channels past a block of 32."""
    for name, shape, cout, k, stride, padding, act, low in [
            ("conv2d_hybrid_3x3_rgb_same", [1, 11, 13, 3], 16, 3, 1, Padding.SAME, Act.NONE, -3),
            ("conv2d_hybrid_1x1_c64_to_40_mostly_negative", [1, 7, 9, 64], 40, 1, 1, Padding.VALID, Act.NONE, -5),
            ("conv2d_hybrid_3x3_s2_c20_to_36_relu6", [2, 9, 9, 20], 36, 3, 2, Padding.SAME, Act.RELU6, -1)]:
        cin = shape[3]
        weights = rng.normal(0, 0.3, [cout, k, k, cin]).astype(np.float32)
        scales = (np.abs(weights).reshape(cout, -1).max(axis=1) / 127).astype(np.float32)
        quantized = np.clip(np.round(weights / scales[:, None, None, None]), -127, 127).astype(np.int8)
        filt = T([cout, k, k, cin], TT.INT8, data=quantized, scale=scales, zp=np.zeros(cout, np.int64), qdim=0)
        bias = T([cout], TT.FLOAT32, data=rng.normal(0, 0.5, [cout]).astype(np.float32))
        h = (shape[1] + stride - 1) // stride if padding == Padding.SAME else shape[1] - k + 1
        w = (shape[2] + stride - 1) // stride if padding == Padding.SAME else shape[2] - k + 1
        opt = options("Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=act)
        inp = T(shape, TT.FLOAT32)
        # Inputs from `low` to 3: the range the input's quantization must cover.
        tensors = [inp, filt, bias, T([shape[0], h, w, cout], TT.FLOAT32)]
        save(name, tensors, [0], [3], [(Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions, opt, None)])
        # random_input draws from -3 to 3; shift this case's input to its range and save again.
        folder = os.path.join(OUT, name)
        value = np.load(os.path.join(folder, "input0.npy"))
        value = (low + (value + 3) * (3 - low) / 6).astype(np.float32)
        np.save(os.path.join(folder, "input0.npy"), value)
        for resolver, prefix in [(OpResolverType.BUILTIN_REF, "output"), (None, "xnnpack_output")]:
            interpreter = Interpreter(model_path=os.path.join(folder, "model.tflite"), num_threads=1,
                                      **({"experimental_op_resolver_type": resolver} if resolver else {}))
            interpreter.allocate_tensors()
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"], value)
            interpreter.invoke()
            np.save(os.path.join(folder, f"{prefix}0.npy"), interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))
    # MobileFaceNet's layer: a hybrid convolution followed by TensorFlow's six-operator PReLU, which
    # the fast path applies as the convolution stores its outputs. 40 channels (a block of 32 and 8).
    shape, cout = [1, 9, 11, 6], 40
    conv_out = [1, 9, 11, cout]
    weights = rng.normal(0, 0.3, [cout, 3, 3, 6]).astype(np.float32)
    scales = (np.abs(weights).reshape(cout, -1).max(axis=1) / 127).astype(np.float32)
    quantized = np.clip(np.round(weights / scales[:, None, None, None]), -127, 127).astype(np.int8)
    filt = T([cout, 3, 3, 6], TT.INT8, data=quantized, scale=scales, zp=np.zeros(cout, np.int64), qdim=0)
    bias = T([cout], TT.FLOAT32, data=rng.normal(0, 0.3, [cout]).astype(np.float32))
    alpha = T([cout], TT.FLOAT32, data=rng.uniform(0.05, 0.6, [cout]).astype(np.float32))
    conv = (Op.CONV_2D, None, [0, 1, 2], [3], Opt.Conv2DOptions,
            options("Conv2DOptions", Padding=Padding.SAME, StrideW=1, StrideH=1, FusedActivationFunction=Act.NONE), None)
    save_then_prelu("conv2d_hybrid_then_prelu_pattern", shape, filt, bias, conv, conv_out, alpha)
    # MobileFaceNet's depthwise layers are followed by the same PReLU: 40 channels (16, 16 and 8), at
    # stride 1 (sliding columns) and stride 2 (two blocks a pass); each case's LiteRT XNNPACK output
    # is saved as well.
    for name, stride in [("depthwise_float32_then_prelu_pattern_s1", 1), ("depthwise_float32_then_prelu_pattern_s2", 2)]:
        shape, cout = [1, 9, 11, 40], 40
        h, w = (9 + stride - 1) // stride, (11 + stride - 1) // stride
        out = [1, h, w, cout]
        filt = T([1, 3, 3, cout], TT.FLOAT32, data=rng.normal(0, 0.3, [1, 3, 3, cout]).astype(np.float32))
        bias = T([cout], TT.FLOAT32, data=rng.normal(0, 0.3, [cout]).astype(np.float32))
        alpha = T([cout], TT.FLOAT32, data=rng.uniform(0.05, 0.6, [cout]).astype(np.float32))
        depthwise = (Op.DEPTHWISE_CONV_2D, None, [0, 1, 2], [3], Opt.DepthwiseConv2DOptions,
                     options("DepthwiseConv2DOptions", Padding=Padding.SAME, StrideW=stride, StrideH=stride, DepthMultiplier=1,
                             FusedActivationFunction=Act.NONE), None)
        save_then_prelu(name, shape, filt, bias, depthwise, out, alpha)


def hybrid_depthwise():
    """Hybrid DEPTHWISE_CONV_2D (float input and output, int8 weights [1, k, k, channels] with a scale
    per channel, float bias), as dynamic-range exports hold them: LiteRT quantizes each picture of the
    input as for a hybrid CONV_2D. A 3x3 over 24 channels with padding, a strided one with RELU6 over
    two pictures of different ranges, and a depth multiplier of 2 on mostly negative inputs."""
    for name, shape, multiplier, stride, padding, act, low in [
            ("depthwise_hybrid_3x3_c24_same", [1, 10, 12, 24], 1, 1, Padding.SAME, Act.NONE, -2),
            ("depthwise_hybrid_3x3_s2_c40_relu6_batch2", [2, 9, 11, 40], 1, 2, Padding.SAME, Act.RELU6, -1),
            ("depthwise_hybrid_3x3_multiplier2_mostly_negative", [1, 7, 9, 8], 2, 1, Padding.VALID, Act.NONE, -5)]:
        cout = shape[3] * multiplier
        weights = rng.normal(0, 0.3, [1, 3, 3, cout]).astype(np.float32)
        scales = (np.abs(weights).reshape(-1, cout).max(axis=0) / 127).astype(np.float32)
        quantized = np.clip(np.round(weights / scales), -127, 127).astype(np.int8)
        filt = T([1, 3, 3, cout], TT.INT8, data=quantized, scale=scales, zp=np.zeros(cout, np.int64), qdim=3)
        bias = T([cout], TT.FLOAT32, data=rng.normal(0, 0.5, [cout]).astype(np.float32))
        h, w = output_size(shape[1], shape[2], 3, stride, 1, padding)
        opt = options("DepthwiseConv2DOptions", Padding=padding, StrideW=stride, StrideH=stride, DepthMultiplier=multiplier,
                      FusedActivationFunction=act)
        tensors = [T(shape, TT.FLOAT32), filt, bias, T([shape[0], h, w, cout], TT.FLOAT32)]
        save(name, tensors, [0], [3], [(Op.DEPTHWISE_CONV_2D, None, [0, 1, 2], [3], Opt.DepthwiseConv2DOptions, opt, None)])
        # random_input draws from -3 to 3; move this case's input to `low`...3 (the second picture
        # of a batch to half that range, so each picture has a scale of its own) and save again.
        folder = os.path.join(OUT, name)
        value = np.load(os.path.join(folder, "input0.npy"))
        value = (low + (value + 3) * (3 - low) / 6).astype(np.float32)
        if shape[0] > 1:
            value[1] *= np.float32(0.5)
        np.save(os.path.join(folder, "input0.npy"), value)
        for resolver, prefix in [(OpResolverType.BUILTIN_REF, "output"), (None, "xnnpack_output")]:
            interpreter = Interpreter(model_path=os.path.join(folder, "model.tflite"), num_threads=1,
                                      **({"experimental_op_resolver_type": resolver} if resolver else {}))
            interpreter.allocate_tensors()
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"], value)
            interpreter.invoke()
            np.save(os.path.join(folder, f"{prefix}0.npy"), interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))


def write_invalid_models():
    """Models LiteRT itself refuses or cannot run; Spotter must reject them with a precise error."""
    folder = os.path.join(ROOT, "Tests", "Fixtures", "invalid")
    os.makedirs(folder, exist_ok=True)
    # The fuzzer's finds (fuzz_*.tflite) are kept by hand; the rest are rewritten below.
    for name in os.listdir(folder):
        if not name.startswith("fuzz_"):
            os.remove(os.path.join(folder, name))
    relu = lambda tensors: [(Op.RELU, None, [0], [1], 0, None, None)]
    models = {
        # A tensor claiming 2^40 elements.
        "huge_tensor.tflite": build([T([1 << 20, 1 << 20], TT.FLOAT32), T([1 << 20, 1 << 20], TT.FLOAT32)], [0], [1], relu(None)),
        # A tensor naming buffer 7 of a model with 1 buffer.
        "missing_buffer.tflite": build([T([4], TT.FLOAT32, buffer=7), T([4], TT.FLOAT32)], [0], [1], relu(None)),
        # An operator Spotter has no kernel for.
        "unsupported_sin.tflite": build([T([4], TT.FLOAT32), T([4], TT.FLOAT32)], [0], [1],
                                        [(Op.SIN, None, [0], [1], 0, None, None)]),
        # A constant stored sparse (its buffer holds fewer values than its shape).
        "sparse_constant.tflite": build([T([2, 3], TT.FLOAT32), T([2, 3], TT.FLOAT32, data=np.ones(2, np.float32), sparse=True),
                                         T([2, 3], TT.FLOAT32)], [0], [2],
                                        [(Op.ADD, None, [0, 1], [2], Opt.AddOptions, options("AddOptions"), None)]),
        # A constant whose buffer is shorter than its shape needs.
        "short_constant.tflite": build([T([2, 3], TT.FLOAT32), T([3], TT.FLOAT32, data=np.zeros(2, np.float32)),
                                        T([2, 3], TT.FLOAT32)], [0], [2],
                                       [(Op.ADD, None, [0, 1], [2], Opt.AddOptions, options("AddOptions"), None)]),
    }
    # Shapes of hostile files that crashed or hung the reader before (scripts/check_model_mutants.py
    # found them in mutants of the shared models); each must now be one clean error, or run.
    u8 = lambda scale=0.05, zp=128: dict(scale=scale, zp=zp)
    conv_options = options("Conv2DOptions", Padding=Padding.VALID, StrideW=1, StrideH=1)
    models.update({
        # A zero point of -2^31 - 1: Int32(zeroPoint) trapped.
        "zero_point_outside_int32.tflite": build([T([4], TT.UINT8, **u8(zp=-(2**31) - 1)), T([4], TT.UINT8, **u8())], [0], [1], relu(None)),
        # A CONV_2D whose filter is absent (-1): the kernel read tensor -1.
        "required_input_absent.tflite": build(
            [T([1, 4, 4, 1], TT.FLOAT32), T([1, 2, 2, 1], TT.FLOAT32, data=np.ones([1, 2, 2, 1], np.float32)), T([1, 3, 3, 1], TT.FLOAT32)],
            [0], [2], [(Op.CONV_2D, None, [0, -1], [2], Opt.Conv2DOptions, conv_options, None)]),
        # A RESHAPE reading its own output: the memory planner followed the alias forever.
        "reshape_reads_own_output.tflite": build(
            [T([1, 4], TT.FLOAT32), T([4], TT.FLOAT32), T([4], TT.FLOAT32)], [0], [2],
            [(Op.RELU, None, [0], [1], 0, None, None),
             (Op.RESHAPE, None, [2], [2], Opt.ReshapeOptions, options("ReshapeOptions", NewShape=[4]), None)]),
        # A SPLIT with its axis missing: the kernel read input 1 of a one-input operator.
        "split_without_axis.tflite": build(
            [T([4, 2], TT.FLOAT32), T([2, 2], TT.FLOAT32), T([2, 2], TT.FLOAT32)], [0], [1, 2],
            [(Op.SPLIT, None, [0], [1, 2], Opt.SplitOptions, options("SplitOptions", NumSplits=2), None)]),
        # Two operators each reading the other's output.
        "operators_in_a_cycle.tflite": build(
            [T([4], TT.FLOAT32), T([4], TT.FLOAT32), T([4], TT.FLOAT32)], [0], [2],
            [(Op.RELU, None, [2], [1], 0, None, None), (Op.RELU, None, [1], [2], 0, None, None)]),
        # Scales that overflow requantization (1e-45 against 3e38): tables were filled with Int32(inf).
        # These are valid files and must load and run.
        "concatenation_extreme_scales.tflite": build(
            [T([1, 2], TT.UINT8, **u8(scale=3e38)), T([1, 2], TT.UINT8, **u8(scale=1e-45)), T([1, 4], TT.UINT8, **u8(scale=1e-45))],
            [0, 1], [2], [(Op.CONCATENATION, None, [0, 1], [2], Opt.ConcatenationOptions, options("ConcatenationOptions", Axis=1), None)]),
        "logistic_extreme_scales.tflite": build([T([4], TT.UINT8, **u8(scale=3e38)), T([4], TT.UINT8, **u8(scale=1e-45, zp=0))], [0], [1],
                                                [(Op.LOGISTIC, None, [0], [1], 0, None, None)]),
        # Small inputs whose broadcast is 2^28 elements: the offset tables (8 bytes an element, 2 GiB)
        # were allocated before the output's size was checked, for ADD and for BATCH_MATMUL's batches.
        "add_broadcast_bomb.tflite": build(
            [T([16384, 1], TT.UINT8, **u8()), T([1, 16384], TT.UINT8, **u8()), T([16384, 16384], TT.UINT8, **u8())], [0, 1], [2],
            [(Op.ADD, None, [0, 1], [2], Opt.AddOptions, options("AddOptions"), None)]),
        "batch_matmul_broadcast_bomb.tflite": build(
            [T([16384, 1, 1, 1], TT.FLOAT32), T([1, 16384, 1, 1], TT.FLOAT32), T([16384, 16384, 1, 1], TT.FLOAT32)], [0, 1], [2],
            [(Op.BATCH_MATMUL, None, [0, 1], [2], Opt.BatchMatMulOptions, options("BatchMatMulOptions"), None)]),
    })
    for name, data in models.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    import sys
    write_invalid_models() if sys.argv[1:] == ["--invalid-only"] else main()
