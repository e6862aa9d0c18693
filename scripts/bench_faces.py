#!/usr/bin/env python3
"""Face pipeline speed, Spotter against the Python peer in one run: find the face of a 640x480 picture
(Obama's portrait on gray), find its keypoints again on a region around it, align and embed it.

  bench_faces.py SPOTTER_BINARY [--threads 1,2] [--runs 60] [--rounds 2]

Spotter's side is `spotter faces identify --json` on the picture given RUNS times (one process, models
loaded once; each line's "milliseconds" times detection, alignment and embedding without decoding);
the peer's is scripts/peer_faces.py's steps in a loop (LiteRT, cv2.warpAffine), timed the same way:
each run decodes the picture first (untimed), so both sides start each run with the caches a
decoder leaves.
Medians of each round; the ratio is Spotter / peer (below 1 is faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
DETECTOR = os.path.join(SHARED, "models", "blazeface-short-range", "face_detection_short_range.tflite")
EMBEDDER = os.path.join(SHARED, "models", "mobilefacenet", "mobile_face_net.tflite")

PEER = r"""
import json, os, statistics, sys, time
import cv2, numpy as np
sys.path.insert(0, os.path.join(sys.argv[1], "scripts"))
from ai_edge_litert.interpreter import Interpreter
from peer_blazeface import detect_rgb
from peer_faces import TEMPLATE, refine, similarity
picture, threads, runs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
finder = Interpreter(model_path=sys.argv[5], num_threads=threads); finder.allocate_tensors()
embedder = Interpreter(model_path=sys.argv[6], num_threads=threads); embedder.allocate_tensors()
times = []
for run in range(runs + 5):
    # The picture is decoded every run, untimed, as Spotter's side decodes each picture given; then
    # peer_faces.py's steps on it are timed.
    rgb = cv2.cvtColor(cv2.imread(picture), cv2.COLOR_BGR2RGB)
    start = time.perf_counter()
    for face in detect_rgb(finder, rgb, 0.5)["detections"]:
        points = refine(finder, rgb, face["box"]) or face["keypoints"]
        crop = cv2.warpAffine(rgb, similarity(np.array(points[:4], np.float64), TEMPLATE), (112, 112), flags=cv2.INTER_LINEAR, borderValue=0)
        embedder.set_tensor(embedder.get_input_details()[0]["index"], ((crop.astype(np.float32) - 128) / 128)[None])
        embedder.invoke()
        embedding = embedder.get_tensor(embedder.get_output_details()[0]["index"])[0]
    if run >= 5:
        times.append((time.perf_counter() - start) * 1000)
print(json.dumps({"median_ms": statistics.median(times)}))
"""


def picture_640x480(folder):
    """Obama's portrait fitted into 640x480 on gray, as a camera frame with one face."""
    portrait = cv2.imread(os.path.join(SHARED, "images", "faces", "obama.jpg"))
    scale = 440 / portrait.shape[0]
    small = cv2.resize(portrait, (round(portrait.shape[1] * scale), 440), interpolation=cv2.INTER_AREA)
    frame = np.full((480, 640, 3), 90, np.uint8)
    x = (640 - small.shape[1]) // 2
    frame[20:460, x:x + small.shape[1]] = small
    path = os.path.join(folder, "face-640x480.png")
    cv2.imwrite(path, frame)
    return path


def spotter(binary, picture, threads, runs, gallery):
    out = subprocess.run([binary, "faces", "identify", "--json", "--threads", str(threads), "--detector", DETECTOR,
                          "--embedder", EMBEDDER, "--gallery", gallery] + [picture] * (runs + 5),
                         check=True, capture_output=True, text=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert all(len(line["faces"]) == 1 for line in lines), "Spotter did not find exactly one face"
    return statistics.median(line["milliseconds"] for line in lines[5:])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        picture = picture_640x480(folder)
        gallery = os.path.join(folder, "faces.sqlite")
        print(f"detect + align + embed one face on 640x480 ({os.cpu_count()} cores), median ms of {args.runs} runs:")
        for threads in [int(t) for t in args.threads.split(",")]:
            for round_ in range(args.rounds):
                ours = spotter(args.spotter, picture, threads, args.runs, gallery)
                peer = json.loads(subprocess.run([sys.executable, "-c", PEER, ROOT, picture, str(threads), str(args.runs), DETECTOR, EMBEDDER],
                                                 check=True, capture_output=True, text=True).stdout.splitlines()[-1])["median_ms"]
                print(f"  threads {threads} round {round_ + 1}: Spotter {ours:.2f} ms, peer {peer:.2f} ms, ratio {ours / peer:.2f}x")


if __name__ == "__main__":
    main()
