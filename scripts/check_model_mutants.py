#!/usr/bin/env python3
"""Hostile model files: mutants of real models must give one clean error line, never a crash or a hang.

Makes mutants of the shared models and of the committed single-operator fixtures (a fixed seed, so a
run is repeatable), writes each to a temporary file and runs `spotter inspect` and `spotter bench
--runs 1` on it (load, check, prepare every kernel, plan memory, invoke once). A mutant passes when
both exit by themselves within the time limit (exit status 0, or an error with a message); a
signal (a trap is SIGILL or SIGTRAP) or a timeout is a failure, and the mutant is kept in --keep.

Mutations, located with the `tflite` package's schema accessors (written by Google, not by Spotter):
  bitflip      1-8 random bits, half of them in the FlatBuffer's tables rather than weights
  zero_point   a quantization zero point set to 2^31, -2^63, 2^40, 256, -129, ...
  scale        a quantization scale set to NaN, inf, 0, -1, 1e-45, 3e38
  op_input     an operator input set to -1, -2, the tensor count, its own output, a later output
  op_output    an operator output set to -1, one of its inputs, a constant, the graph input
  shape        a tensor dimension set to 0, -1, 2^31-1, 65536, twice or one more
  self_alias   a RESHAPE (or any operator) reading its own output
  buffer       a tensor's buffer index, or an external buffer's offset and size
  length       the element count of a vector (shape, inputs, tensors, operators, data)
  opcode       an operator's opcode index, or an operator code's builtin code
  options      a scalar of an operator's builtin options (strides, axes, padding, activation)
  io           the subgraph's input or output indices

Usage: check_model_mutants.py SPOTTER [--count 450] [--seed 31] [--keep DIR] [--jobs 2]
Prints a line per failure, a summary per kind, and `passed` or `failed` last.
"""
import argparse
import collections
import concurrent.futures
import os
import random
import struct
import subprocess
import sys
import tempfile

from tflite.Model import Model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models")
SHARED_MODELS = [
    "coco-ssd-mobilenet-v1/detect.tflite",
    "yolov8n/yolov8n_full_integer_quant.tflite",
    "yolov5n/yolov5n-int8.tflite",
    "blazeface-short-range/face_detection_short_range.tflite",
    "mobilefacenet/mobile_face_net.tflite",
]
FIXTURES = os.path.join(ROOT, "Tests", "Fixtures", "ops")

ZERO_POINTS = [2**31, -(2**31) - 1, 2**40, -(2**63), 2**63 - 1, 256, -129, 128, -1, 1000]
SCALES = [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e-45, 3e38, 1e-30]
DIMENSIONS = [0, -1, 1, 2**31 - 1, 65536, -(2**31)]
OPTION_VALUES = [0, -1, 2**31 - 1, -(2**31), 1000, 255, 7]


def field(table, index):
    """Absolute position of field `index` of a table (None when absent)."""
    offset = table._tab.Offset(4 + 2 * index)
    return table._tab.Pos + offset if offset else None


def vector(table, index):
    """(start of the elements, count) of vector field `index` (None when absent)."""
    offset = table._tab.Offset(4 + 2 * index)
    if not offset:
        return None
    return table._tab.Vector(offset), table._tab.VectorLen(offset)


class Structure:
    """Where the interesting fields of one model file are."""

    def __init__(self, data):
        model = Model.GetRootAs(data, 0)
        graph = model.Subgraphs(0)
        self.tensor_count = graph.TensorsLength()
        self.tensors = [graph.Tensors(i) for i in range(self.tensor_count)]
        self.operators = [graph.Operators(i) for i in range(graph.OperatorsLength())]
        self.codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
        self.buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
        self.graph, self.model = graph, model
        self.constant = [t.Buffer() < len(self.buffers) and self.buffers[t.Buffer()].DataLength() > 0 for t in self.tensors]
        self.hot = []  # positions inside tables and small vectors (not weights)
        for table in self.tensors + self.operators + self.codes + [graph, model]:
            self.hot.extend(range(table._tab.Pos - 8, table._tab.Pos + 24))
        self.hot = [p for p in self.hot if 0 <= p < len(data)]

    def quantized(self):
        out = []
        for t in self.tensors:
            q = t.Quantization()
            if q is not None and q.ScaleLength() > 0:
                out.append(q)
        return out


def mutate(data, kind, rng):
    """Returns (mutated bytes, description) or None when the model has nothing of that kind."""
    data = bytearray(data)
    s = Structure(bytes(data))

    def put(fmt, position, value, what):
        struct.pack_into("<" + fmt, data, position, value)
        return bytes(data), what

    if kind == "bitflip":
        flips = []
        for _ in range(rng.randint(1, 8)):
            position = rng.choice(s.hot) if rng.random() < 0.5 and s.hot else rng.randrange(len(data))
            bit = rng.randrange(8)
            data[position] ^= 1 << bit
            flips.append(f"{position}.{bit}")
        return bytes(data), "bits " + ",".join(flips)
    if kind == "zero_point":
        candidates = [(q, vector(q, 3)) for q in s.quantized()]
        candidates = [(q, v) for q, v in candidates if v and v[1] > 0]
        if not candidates:
            return None
        _, (start, count) = rng.choice(candidates)
        i, value = rng.randrange(count), rng.choice(ZERO_POINTS)
        return put("q", start + 8 * i, value, f"zero point at {start + 8 * i} = {value}")
    if kind == "scale":
        candidates = [vector(q, 2) for q in s.quantized()]
        candidates = [v for v in candidates if v and v[1] > 0]
        if not candidates:
            return None
        start, count = rng.choice(candidates)
        i, value = rng.randrange(count), rng.choice(SCALES)
        return put("f", start + 4 * i, value, f"scale at {start + 4 * i} = {value}")
    if kind in ("op_input", "op_output", "self_alias"):
        ops = [op for op in s.operators if vector(op, 1) and vector(op, 2) and vector(op, 1)[1] and vector(op, 2)[1]]
        if kind == "self_alias":
            reshapes = [op for op in ops if s.codes[op.OpcodeIndex()].BuiltinCode() in (22,)]  # RESHAPE
            ops = reshapes or ops
        if not ops:
            return None
        index = rng.randrange(len(ops))
        op = ops[index]
        (inputs, input_count), (outputs, output_count) = vector(op, 1), vector(op, 2)
        own_output = struct.unpack_from("<i", data, outputs)[0]
        if kind == "self_alias":
            return put("i", inputs, own_output, f"operator reads its own output {own_output}")
        if kind == "op_input":
            later = [struct.unpack_from("<i", data, vector(o, 2)[0])[0] for o in ops[index + 1:]]
            choices = [-1, -2, s.tensor_count, s.tensor_count + 5, 2**31 - 1, own_output] + later[:3]
            slot, value = rng.randrange(input_count), rng.choice(choices)
            return put("i", inputs + 4 * slot, value, f"operator input {slot} = {value}")
        constants = [i for i, c in enumerate(s.constant) if c]
        read = struct.unpack_from("<i", data, inputs)[0]
        choices = [-1, read, s.tensor_count] + ([rng.choice(constants)] if constants else [])
        if s.graph.InputsLength():
            choices.append(s.graph.Inputs(0))
        slot, value = rng.randrange(output_count), rng.choice(choices)
        return put("i", outputs + 4 * slot, value, f"operator output {slot} = {value}")
    if kind == "shape":
        shaped = [vector(t, 0) for t in s.tensors]
        shaped = [v for v in shaped if v and v[1] > 0]
        if not shaped:
            return None
        start, count = rng.choice(shaped)
        i = rng.randrange(count)
        old = struct.unpack_from("<i", data, start + 4 * i)[0]
        value = rng.choice(DIMENSIONS + [old * 2, old + 1])
        value = max(-(2**31), min(2**31 - 1, value))
        return put("i", start + 4 * i, value, f"dimension at {start + 4 * i}: {old} -> {value}")
    if kind == "buffer":
        external = [(b, field(b, 1), field(b, 2)) for b in s.buffers if field(b, 1) is not None]
        if external and rng.random() < 0.5:
            _, offset, size = rng.choice(external)
            value = rng.choice([0, 1, len(data), len(data) - 1, 2**63 - 1, 2**64 - 1])
            target = offset if size is None or rng.random() < 0.5 else size
            return put("Q", target, value, f"external buffer field at {target} = {value}")
        tensors = [t for t in s.tensors if field(t, 2) is not None]
        if not tensors:
            return None
        t = rng.choice(tensors)
        value = rng.choice([len(s.buffers), len(s.buffers) + 7, 2**32 - 1, rng.randrange(len(s.buffers))])
        return put("I", field(t, 2), value, f"tensor buffer = {value}")
    if kind == "length":
        vectors = []
        for t in s.tensors:
            vectors.append(vector(t, 0))
        for op in s.operators:
            vectors += [vector(op, 1), vector(op, 2)]
        vectors += [vector(s.graph, 0), vector(s.graph, 3), vector(s.model, 4)]
        vectors = [v for v in vectors if v]
        start, count = rng.choice(vectors)
        value = rng.choice([0, count + 1, count * 2, 2**31 - 1, 2**32 - 1, 2**30])
        return put("I", start - 4, value, f"vector length at {start - 4}: {count} -> {value}")
    if kind == "opcode":
        if rng.random() < 0.5 and s.operators:
            op = rng.choice(s.operators)
            position = field(op, 0)
            if position is None:
                return None
            value = rng.choice([len(s.codes), 2**32 - 1, rng.randrange(max(1, len(s.codes)))])
            return put("I", position, value, f"opcode index = {value}")
        code = rng.choice(s.codes)
        position = field(code, 3)
        if position is None:
            return None
        value = rng.choice([rng.randrange(0, 210), -1, 2**31 - 1, 127])
        return put("i", position, value, f"builtin code = {value}")
    if kind == "options":
        candidates = []
        for op in s.operators:
            offset = op._tab.Offset(4 + 2 * 4)
            if not offset:
                continue
            table = op._tab.Indirect(op._tab.Pos + offset)
            vtable = table - struct.unpack_from("<i", data, table)[0]
            size = struct.unpack_from("<H", data, vtable)[0]
            for slot in range(4, size, 2):
                entry = struct.unpack_from("<H", data, vtable + slot)[0]
                if entry:
                    candidates.append(table + entry)
        if not candidates:
            return None
        position = rng.choice(candidates)
        value = rng.choice(OPTION_VALUES)
        width = rng.choice([1, 4])
        if width == 1:
            return put("B", position, value & 0xFF, f"option byte at {position} = {value & 0xFF}")
        if position + 4 > len(data):
            return None
        return put("i", position, value, f"option at {position} = {value}")
    if kind == "io":
        which = rng.choice([1, 2])
        v = vector(s.graph, which)
        if not v or not v[1]:
            return None
        start, count = v
        value = rng.choice([-1, s.tensor_count, 2**31 - 1, rng.randrange(s.tensor_count)])
        return put("i", start + 4 * rng.randrange(count), value, f"subgraph {'inputs' if which == 1 else 'outputs'} = {value}")
    raise ValueError(kind)


KINDS = ["bitflip", "zero_point", "scale", "op_input", "op_output", "shape", "self_alias", "buffer", "length", "opcode",
         "options", "io"]


def run(spotter, path, timeout):
    """(outcome, detail): outcome is ok, crash or hang."""
    for command in ([spotter, "inspect", path], [spotter, "bench", path, "--runs", "1", "--warmup", "0", "--threads", "1"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang", f"{command[1]} ran past {timeout} s"
        if done.returncode < 0:
            return "crash", f"{command[1]} died of signal {-done.returncode}: {done.stderr.strip()[-300:]}"
        if done.returncode != 0 and not done.stderr.strip():
            return "crash", f"{command[1]} exited {done.returncode} without a message"
    return "ok", ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--count", type=int, default=450)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--keep", default=os.path.join(ROOT, ".build", "mutants"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()

    sources = [os.path.join(SHARED, m) for m in SHARED_MODELS if os.path.exists(os.path.join(SHARED, m))]
    sources += sorted(os.path.join(FIXTURES, d, "model.tflite") for d in os.listdir(FIXTURES)
                      if os.path.exists(os.path.join(FIXTURES, d, "model.tflite")))[::6]
    originals = {path: open(path, "rb").read() for path in sources}
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="spotter-mutants-")
    os.makedirs(args.keep, exist_ok=True)

    jobs = []
    attempts = 0
    while len(jobs) < args.count and attempts < args.count * 20:
        attempts += 1
        # Shared models half the time: their op patterns (post-process, fused kernels) matter most.
        source = rng.choice(sources[:len(SHARED_MODELS)] if rng.random() < 0.5 else sources)
        kind = KINDS[len(jobs) % len(KINDS)]
        try:
            made = mutate(originals[source], kind, random.Random(rng.random()))
        except Exception:  # a mutation the accessors cannot place on this model
            made = None
        if made is None:
            continue
        data, what = made
        path = os.path.join(work, f"m{len(jobs):04d}-{kind}.tflite")
        with open(path, "wb") as f:
            f.write(data)
        jobs.append((path, kind, os.path.relpath(source, os.path.dirname(ROOT)), what))

    results = collections.Counter()
    failures = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for (path, kind, source, what), (outcome, detail) in zip(jobs, pool.map(lambda j: run(args.spotter, j[0], args.timeout), jobs)):
            results[(kind, outcome)] += 1
            if outcome != "ok":
                kept = os.path.join(args.keep, os.path.basename(path))
                os.replace(path, kept)
                failures.append(f"{outcome}: {kept} ({source}: {what}): {detail}")
            else:
                os.remove(path)
    os.rmdir(work) if not os.listdir(work) else None
    for line in failures:
        print(line)
    for kind in KINDS:
        counts = {o: results[(kind, o)] for o in ("ok", "crash", "hang") if results[(kind, o)]}
        print(f"{kind:11s} {counts}")
    print(f"{len(jobs)} mutants of {len(sources)} models: {len(failures)} crashed or hung")
    print("passed" if not failures else "failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
