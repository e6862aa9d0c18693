#!/usr/bin/env python3
"""Every shared model's anatomy, read by the `tflite` package (the schema's generated Python
reader, not Spotter's), for ModelReaderTests to compare Spotter's own reader against.

Writes fixtures-generated/anatomy/NAME.json for each .tflite file under ../shared/models and
Tests/Fixtures/models (NAME is its path with "/" turned into "__"): {"root" ("shared" or
"repository"), "path" (from that root), "version", "description", "inputs",
"outputs", "tensors": [{"name", "shape", "type", "constant", "scales", "zero_points",
"quantized_dimension"}], "operators": [{"builtin", "custom", "inputs", "outputs", "options_type",
"options": {Field: value} or null, "custom_options": decoded FlexBuffers or null}]}.

Option fields are named as the reader's accessors (StrideW, FusedActivationFunction...); custom
options are decoded with `flatbuffers.flexbuffers` (blobs as lists of bytes). Whatever models
../shared holds are read, so the test runs on models it was not written for.

Usage: make_anatomy_fixtures.py [--out DIR]
"""
import argparse
import glob
import json
import os

import tflite
from flatbuffers import flexbuffers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
ROOTS = {"shared": (SHARED, "models"), "repository": (ROOT, "Tests/Fixtures/models")}

# Accessors of the option tables Spotter interprets (the others are compared by type code only).
FIELDS = ["Padding", "StrideW", "StrideH", "FusedActivationFunction", "DilationWFactor", "DilationHFactor",
          "DepthMultiplier", "FilterWidth", "FilterHeight", "WeightsFormat", "KeepNumDims", "Beta", "Axis",
          "NewShape", "SqueezeDims", "BeginMask", "EndMask", "EllipsisMask", "NewAxisMask", "ShrinkAxisMask",
          "Offset", "AlignCorners", "HalfPixelCenters", "BatchDims", "KeepDims", "BlockSize", "AdjX", "AdjY"]
OPTION_NAMES = {value: name for name, value in vars(tflite.BuiltinOptions).items() if isinstance(value, int)}


def plain(value):
    """FlexBuffers values as JSON: bytes as lists of ints, maps and vectors recursively."""
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def options(op):
    table = op.BuiltinOptions()
    if table is None:
        return None
    name = OPTION_NAMES.get(op.BuiltinOptionsType())
    cls = getattr(tflite, name, None) if name else None
    if cls is None:
        return None
    reader = cls()
    reader.Init(table.Bytes, table.Pos)
    fields = {}
    for field in FIELDS:
        if hasattr(reader, field + "AsNumpy"):
            if getattr(reader, field + "IsNone")():
                continue
            fields[field] = [int(v) for v in getattr(reader, field + "AsNumpy")()]
        elif hasattr(reader, field):
            value = getattr(reader, field)()
            fields[field] = bool(value) if isinstance(value, bool) else float(value) if isinstance(value, float) else int(value)
    return fields


def anatomy(root, path):
    data = open(path, "rb").read()
    model = tflite.Model.GetRootAsModel(data, 0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        custom = code.CustomCode()
        codes.append((max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), custom.decode() if custom else None))
    graph = model.Subgraphs(0)
    tensors = []
    for i in range(graph.TensorsLength()):
        tensor = graph.Tensors(i)
        buffer = model.Buffers(tensor.Buffer())
        quantization = tensor.Quantization()
        scales = quantization.ScaleAsNumpy() if quantization is not None and not quantization.ScaleIsNone() else []
        zeros = quantization.ZeroPointAsNumpy() if quantization is not None and not quantization.ZeroPointIsNone() else []
        tensors.append({
            "name": tensor.Name().decode(), "shape": [int(v) for v in tensor.ShapeAsNumpy()] if not tensor.ShapeIsNone() else [],
            "type": tensor.Type(), "constant": buffer.DataLength() > 0 or buffer.Offset() > 1,
            "scales": [float(v) for v in scales], "zero_points": [int(v) for v in zeros],
            "quantized_dimension": quantization.QuantizedDimension() if quantization is not None else 0})
    operators = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        builtin, custom = codes[op.OpcodeIndex()]
        raw = op.CustomOptionsAsNumpy() if not op.CustomOptionsIsNone() else None
        operators.append({
            "builtin": builtin, "custom": custom,
            "inputs": [int(v) for v in op.InputsAsNumpy()] if not op.InputsIsNone() else [],
            "outputs": [int(v) for v in op.OutputsAsNumpy()] if not op.OutputsIsNone() else [],
            "options_type": op.BuiltinOptionsType(), "options": options(op),
            "custom_options": plain(flexbuffers.Loads(bytes(raw))) if raw is not None and len(raw) else None})
    description = model.Description()
    return {"root": root, "path": os.path.relpath(path, ROOTS[root][0]), "version": model.Version(),
            "description": description.decode() if description else None,
            "inputs": [int(v) for v in graph.InputsAsNumpy()], "outputs": [int(v) for v in graph.OutputsAsNumpy()],
            "tensors": tensors, "operators": operators}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "fixtures-generated", "anatomy"))
    args = parser.parse_args()
    paths = [(root, path) for root, (base, folder) in ROOTS.items()
             for path in sorted(glob.glob(os.path.join(base, folder, "**", "*.tflite"), recursive=True))]
    if not any(root == "shared" for root, _ in paths):
        raise SystemExit(f"make_anatomy_fixtures: no .tflite file under {os.path.join(SHARED, 'models')}")
    os.makedirs(args.out, exist_ok=True)
    for stale in glob.glob(os.path.join(args.out, "*.json")):
        os.remove(stale)
    for root, path in paths:
        name = root + "__" + os.path.relpath(path, ROOTS[root][0]).replace("/", "__")
        with open(os.path.join(args.out, name + ".json.part"), "w") as f:
            json.dump(anatomy(root, path), f)
        os.replace(os.path.join(args.out, name + ".json.part"), os.path.join(args.out, name + ".json"))
    print(f"make_anatomy_fixtures: {len(paths)} models in {args.out}")


if __name__ == "__main__":
    main()
