#!/usr/bin/env python3
"""Side-by-side invoke() latency and peak memory: Spotter's `spotter bench` against the peer's
LiteRT benchmark (../shared/reference/bench_tflite.py), same model, same input frame, same machine,
one run, interleaved per thread count. Prints each side and the ratio (Spotter / LiteRT).

Usage (run by scripts/bench.sh, which builds Spotter and sets up the venv):
  bench_inference.py SPOTTER_BINARY [--threads 1,2] [--runs 200] [--rounds 3] [--model yolov8n|yolov5n|PATH]

With --model other than the SSD detector, the LiteRT side is LITERT_TIMER below (default resolver,
the same input .npy as Spotter gets, the same warm-up and runs), since bench_tflite.py feeds SSD
frames only.
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
}
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
    args = parser.parse_args()
    model, data = MODEL, INPUT
    if args.model:
        model, data = MODELS.get(args.model, (args.model, args.input))
        if not data or not os.path.exists(data):
            sys.exit(f"bench_inference: no input for {args.model}: run scripts/make_model_fixtures.py or pass --input")
    bench = os.path.join(SHARED, "reference", "bench_tflite.py")
    print(f"date {datetime.date.today()} | {cpu_name()} | {os.cpu_count()} cores | model {os.path.basename(model)} | {args.runs} runs x {args.rounds} rounds")
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        litert, spotter, litert_rss, spotter_rss = [], [], 0.0, 0.0
        for _ in range(args.rounds):
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
        rows.append((threads, statistics.median(litert), statistics.median(spotter), litert_rss, spotter_rss))
    print(f"{'threads':>7} | {'LiteRT XNNPACK ms':>17} | {'Spotter ms':>10} | {'ratio':>5} | {'LiteRT peak MiB':>15} | {'Spotter peak MiB':>16}")
    for threads, l, s, lr, sr in rows:
        print(f"{threads:>7} | {l:>17.2f} | {s:>10.2f} | {s / l:>5.2f} | {lr:>15.1f} | {sr:>16.1f}")


if __name__ == "__main__":
    main()
