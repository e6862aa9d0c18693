#!/usr/bin/env python3
"""Side-by-side invoke() latency and peak memory: Spotter's `spotter bench` against the peer's
LiteRT benchmark (../shared/reference/bench_tflite.py) and OpenVINO (the runtime most people pick
for YOLO on an x86 CPU; it reads the same .tflite), same model, same input, same machine, one run,
interleaved per thread count. Prints each side, Spotter / LiteRT, and Spotter / the faster of the two.

Usage (run by scripts/bench.sh, which builds Spotter and sets up the venv):
  bench_inference.py SPOTTER_BINARY [--threads 1,2] [--runs 200] [--rounds 3]
                     [--model yolov8n|yolov5n|blazeface|mobilefacenet|attention-yolo-int8|attention-yolo-hybrid|PATH]
                     [--no-openvino]

With --model other than the SSD detector, the LiteRT side is LITERT_TIMER below (default resolver,
the same input .npy as Spotter gets, the same warm-up and runs), since bench_tflite.py feeds SSD
frames only. OpenVINO (PyPI `openvino`, CPU plugin, INFERENCE_NUM_THREADS, latency hint) runs
OPENVINO_TIMER on the same input; it cannot read the SSD's TFLite_Detection_PostProcess operator,
which the table says.

OpenVINO runs float layers in bfloat16 by default on CPUs with AVX512_BF16 or AMX (its
INFERENCE_PRECISION_HINT): 8 bits of mantissa where LiteRT and Spotter keep float32's 24. So it
is timed twice, at its default and with the hint set to f32, and the ratios are given against the
faster peer at float32 ("/ faster") and against the faster of all, whatever the precision ("/ any").
When OpenVINO's default is bfloat16 and the model takes float input, Spotter is also timed with
`--precision bfloat16`, and "bf16 / OV bf16" compares the two at the same precision.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODEL = os.path.join(SHARED, "models", "coco-ssd-mobilenet-v1", "detect.tflite")
# bench_tflite.py's default input: frame 300 of this video, resized with OpenCV as here.
INPUT = os.path.join(ROOT, "fixtures-generated", "detect", "inputs", "one-by-one-person-detection-f0300.npy")


MODELS = {
    "yolov8n": (os.path.join(SHARED, "models", "yolov8n", "yolov8n_full_integer_quant.tflite"),
                os.path.join(ROOT, "fixtures-generated", "models", "yolov8n", "coffee", "input.npy")),
    "yolov5n": (os.path.join(SHARED, "models", "yolov5n", "yolov5n-int8.tflite"),
                os.path.join(ROOT, "fixtures-generated", "models", "yolov5n", "coffee", "input.npy")),
    "blazeface": (os.path.join(SHARED, "models", "blazeface-short-range", "face_detection_short_range.tflite"),
                  os.path.join(ROOT, "fixtures-generated", "models", "blazeface", "grace_hopper", "input.npy")),
    "mobilefacenet": (os.path.join(SHARED, "models", "mobilefacenet", "mobile_face_net.tflite"),
                      os.path.join(ROOT, "fixtures-generated", "models", "mobilefacenet", "grace_hopper", "input.npy")),
    "attention-yolo-int8": (os.path.join(ROOT, "Tests", "Fixtures", "models", "attention-yolo", "attention-yolo-int8.tflite"),
                            os.path.join(ROOT, "fixtures-generated", "models", "attention-yolo-int8", "coffee", "input.npy")),
    "attention-yolo-hybrid": (os.path.join(ROOT, "Tests", "Fixtures", "models", "attention-yolo", "attention-yolo-hybrid.tflite"),
                              os.path.join(ROOT, "fixtures-generated", "models", "attention-yolo-hybrid", "coffee", "input.npy")),
}
OPENVINO_TIMER = """
import json, statistics, sys, time
import numpy as np
import openvino as ov
model, data, threads, runs, precision = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
core = ov.Core()
settings = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
if precision != "default":
    settings["INFERENCE_PRECISION_HINT"] = precision
try:
    m = core.read_model(model)
    value = np.load(data)
    if m.inputs[0].partial_shape.is_dynamic:
        m.reshape({m.inputs[0]: list(value.shape)})
    compiled = core.compile_model(m, "CPU", settings)
except Exception as error:
    reason = next((l for l in str(error).splitlines() if "No translator" in l or "not supported" in l), str(error).splitlines()[-1])
    print(json.dumps({"error": reason.strip()}))
    sys.exit(0)
request = compiled.create_infer_request()
for _ in range(10):
    request.infer({0: value})
times = []
for _ in range(runs):
    t = time.perf_counter_ns()
    request.infer({0: value})
    times.append((time.perf_counter_ns() - t) / 1e6)
print(json.dumps({"median_ms": statistics.median(times), "precision": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()}))
"""
LITERT_TIMER = """
import json, statistics, sys, time
import numpy as np
from ai_edge_litert.interpreter import Interpreter
model, data, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
it = Interpreter(model_path=model, num_threads=threads)
it.allocate_tensors()
it.set_tensor(it.get_input_details()[0]["index"], np.load(data))
for _ in range(10):
    it.invoke()
times = []
for _ in range(runs):
    t = time.perf_counter_ns()
    it.invoke()
    times.append((time.perf_counter_ns() - t) / 1e6)
print(json.dumps({"median_ms": statistics.median(times)}))
"""


def measure(command):
    """Runs command; returns (stdout, peak RSS in MiB of that process)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return out, usage.ru_maxrss / 1024


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per thread count; medians are taken over all")
    parser.add_argument("--model", help="yolov8n, yolov5n or a .tflite path (with --input); default: the SSD detector")
    parser.add_argument("--input", help="the input .npy for --model PATH")
    parser.add_argument("--no-openvino", action="store_true", help="leave OpenVINO out (it is not installed)")
    args = parser.parse_args()
    model, data = MODEL, INPUT
    if args.model:
        model, data = MODELS.get(args.model, (args.model, args.input))
        if not data or not os.path.exists(data):
            sys.exit(f"bench_inference: no input for {args.model}: run scripts/make_model_fixtures.py or pass --input")
    bench = os.path.join(SHARED, "reference", "bench_tflite.py")
    print(f"date {datetime.date.today()} | {cpu_name()} | {os.cpu_count()} cores | model {os.path.basename(model)} | {args.runs} runs x {args.rounds} rounds")
    openvino_data = data
    if model == MODEL:
        # The peer's frame as the .npy Spotter reads; OpenVINO cannot read this model anyway.
        openvino_data = INPUT
    rows, openvino_error, default_precision = [], None, None
    float_input = str(np.load(data).dtype) == "float32"
    for threads in [int(t) for t in args.threads.split(",")]:
        litert, spotter, spotter_bf16, openvino, openvino_f32, litert_rss, spotter_rss = [], [], [], [], [], 0.0, 0.0
        for _ in range(args.rounds):
            if not args.no_openvino and openvino_error is None:
                for precision, times in (("default", openvino), ("f32", openvino_f32)):
                    out, _ = measure([sys.executable, "-c", OPENVINO_TIMER, model, openvino_data, str(threads), str(args.runs), precision])
                    result = json.loads(out)
                    if "error" in result:
                        openvino_error = result["error"]
                        break
                    times.append(result["median_ms"])
                    if precision == "default":
                        default_precision = result["precision"]
            if model == MODEL:
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    _, rss = measure([sys.executable, bench, "--threads", str(threads), "--modes", "xnnpack",
                                      "--runs", str(args.runs), "--json", f.name])
                    litert.append(json.load(open(f.name))["results"][0]["median_ms"])
            else:
                out, rss = measure([sys.executable, "-c", LITERT_TIMER, model, data, str(threads), str(args.runs)])
                litert.append(json.loads(out)["median_ms"])
            litert_rss = max(litert_rss, rss)
            out, rss = measure([args.spotter, "bench", model, "--threads", str(threads), "--runs", str(args.runs),
                                "--warmup", "10", "--input", data, "--json"])
            spotter.append(json.loads(out)["median_ms"])
            spotter_rss = max(spotter_rss, rss)
            if float_input and default_precision == "bf16":
                out, _ = measure([args.spotter, "bench", model, "--threads", str(threads), "--runs", str(args.runs),
                                  "--warmup", "10", "--input", data, "--json", "--precision", "bfloat16"])
                spotter_bf16.append(json.loads(out)["median_ms"])
        median = lambda values: statistics.median(values) if values else None
        rows.append((threads, median(litert), median(spotter), median(openvino), median(openvino_f32), litert_rss, spotter_rss,
                     median(spotter_bf16)))
    default_name = default_precision or "default"
    print(f"{'threads':>7} | {'LiteRT XNNPACK ms':>17} | {'OpenVINO ' + default_name + ' ms':>16} | {'OpenVINO f32 ms':>15} | {'Spotter ms':>10} | "
          f"{'/ LiteRT':>8} | {'/ faster':>8} | {'/ any':>5} | {'Spotter bf16 ms':>15} | {'bf16 / OV bf16':>14} | "
          f"{'LiteRT peak MiB':>15} | {'Spotter peak MiB':>16}")
    for threads, l, s, o, o32, lr, sr, sb in rows:
        same_precision = min(v for v in (l, o32 if default_precision != "f32" else o) if v)
        fastest = min(v for v in (l, o, o32) if v)
        text = lambda v, width: f"{v:>{width}.2f}" if v else f"{'-':>{width}}"
        print(f"{threads:>7} | {l:>17.2f} | {text(o, 16)} | {text(o32, 15)} | {s:>10.2f} | {s / l:>8.2f} | {s / same_precision:>8.2f} | "
              f"{s / fastest:>5.2f} | {text(sb, 15)} | {text(sb / o if sb and o else None, 14)} | {lr:>15.1f} | {sr:>16.1f}")
    if openvino_error:
        print(f"OpenVINO cannot run {os.path.basename(model)}: {openvino_error}")
    elif args.no_openvino:
        print("OpenVINO left out (--no-openvino)")


if __name__ == "__main__":
    main()
