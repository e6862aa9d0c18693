#!/usr/bin/env python3
"""Side-by-side benchmark of what a new user meets first: start-up, short clips and a busy core.

  1. One picture: `spotter detect one.png` against a one-picture peer (Python: import LiteRT and
     OpenCV, load the model, imread, resize, invoke, print), wall time of the whole process; and
     `spotter inspect`.
  2. Short clips (the shared asl-walk.mkv and a 40 s excerpt of the shared video): whole-process fps
     (frames / wall time, start-up included) of `spotter video` and `spotter record` against the
     peer's pipeline_py.py (annotate and --record-persons), with peak RSS.
  3. A busy core: a busy loop pinned to CPU 1; `spotter bench` and `spotter video` with the default
     threads against --threads 1, with and without the busy loop.

Usage (run by scripts/bench.sh --startup):
  bench_startup.py SPOTTER_BINARY [--rounds 5]
"""
import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pipeline import MODEL, PEER, SHARED, VIDEO, frames_of, run_with_rss  # noqa: E402

PICTURE = os.path.join(SHARED, "images", "coffee.png")
LABELS = os.path.join(os.path.dirname(MODEL), "labelmap.txt")
ONE_PICTURE_PEER = r'''
import sys, cv2, numpy as np
from ai_edge_litert.interpreter import Interpreter
model, picture, labels = sys.argv[1], sys.argv[2], open(sys.argv[3]).read().splitlines()
interpreter = Interpreter(model_path=model, num_threads=2)
interpreter.allocate_tensors()
bgr = cv2.imread(picture)
h, w = bgr.shape[:2]
rgb = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (300, 300), interpolation=cv2.INTER_LINEAR)
interpreter.set_tensor(interpreter.get_input_details()[0]["index"], rgb[None])
interpreter.invoke()
out = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
boxes, classes, scores, count = out[0][0], out[1][0], out[2][0], int(out[3][0])
for i in range(count):
    if scores[i] >= 0.5:
        y0, x0, y1, x1 = boxes[i]
        print(labels[int(classes[i]) + 1], round(float(scores[i]), 3), int(x0 * w), int(y0 * h), int(x1 * w), int(y1 * h))
'''


def wall(command, rounds):
    times, rss = [], 0.0
    for _ in range(rounds):
        _, _, peak, seconds = run_with_rss(command)
        times.append(seconds)
        rss = max(rss, peak)
    return statistics.median(times), rss


def busy_loop():
    return subprocess.Popen(["taskset", "-c", "1", "sh", "-c", "while :; do :; done"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spotter-bench-")
    peer_script = os.path.join(work, "one_picture.py")
    with open(peer_script, "w") as f:
        f.write(ONE_PICTURE_PEER)
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
    print(f"date {datetime.date.today()} | {cpu} | {os.cpu_count()} cores | median of {args.rounds} rounds")

    print("\n1. one picture, whole process")
    peer, _ = wall([sys.executable, peer_script, MODEL, PICTURE, LABELS], args.rounds)
    spotter, _ = wall([args.spotter, "detect", PICTURE, "--model", MODEL], args.rounds)
    inspect, _ = wall([args.spotter, "inspect", MODEL], args.rounds)
    helptext, _ = wall([args.spotter, "--help"], args.rounds)
    print(f"   peer (Python, LiteRT + OpenCV) {peer * 1000:7.0f} ms")
    print(f"   spotter detect                 {spotter * 1000:7.0f} ms   ratio {spotter / peer:.2f}")
    print(f"   spotter inspect                {inspect * 1000:7.0f} ms")
    print(f"   spotter --help                 {helptext * 1000:7.0f} ms   (loading the binary and its libraries)")

    print("\n2. short clips, whole-process fps (start-up included)")
    excerpt = os.path.join(work, "excerpt-40s.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", VIDEO, "-t", "40", "-c", "copy", excerpt], check=True)
    print(f"   {'video':<24} {'mode':<8} {'peer fps':>8} {'spotter fps':>11} {'ratio':>6} {'peer MiB':>8} {'spotter MiB':>11}")
    for video in [os.path.join(SHARED, "videos", "asl-walk.mkv"), excerpt]:
        frames = frames_of(video)
        for mode in ["annotate", "record"]:
            if mode == "annotate":
                peer_command = [sys.executable, PEER, video, "--threads", "2", "--out", os.path.join(work, "peer.mp4")]
                spotter_command = [args.spotter, "video", video, "--output", os.path.join(work, "spotter.mp4"), "--model", MODEL]
            else:
                peer_command = [sys.executable, PEER, video, "--threads", "2", "--record-persons", os.path.join(work, "peer-clips")]
                spotter_command = [args.spotter, "record", video, "--album", os.path.join(work, "album"), "--model", MODEL]
            peer_fps, spotter_fps, peer_rss, spotter_rss = [], [], 0.0, 0.0
            for _ in range(max(1, args.rounds // 2)):
                _, _, rss, seconds = run_with_rss(peer_command)
                peer_fps.append(frames / seconds)
                peer_rss = max(peer_rss, rss)
                _, _, rss, seconds = run_with_rss(spotter_command)
                spotter_fps.append(frames / seconds)
                spotter_rss = max(spotter_rss, rss)
                shutil.rmtree(os.path.join(work, "album"), ignore_errors=True)
                shutil.rmtree(os.path.join(work, "peer-clips"), ignore_errors=True)
            p, s = statistics.median(peer_fps), statistics.median(spotter_fps)
            print(f"   {os.path.basename(video):<24} {mode:<8} {p:>8.1f} {s:>11.1f} {s / p:>6.2f} {peer_rss:>8.1f} {spotter_rss:>11.1f}")

    print("\n3. default threads against --threads 1, idle and with a busy loop on CPU 1")
    frames = frames_of(excerpt)
    for label, loaded in [("idle", False), ("busy core", True)]:
        loop = busy_loop() if loaded else None
        try:
            results = {}
            for name, extra in [("default", []), ("--threads 1", ["--threads", "1"])]:
                out = subprocess.run([args.spotter, "bench", MODEL, "--runs", "300", "--json"] + extra,
                                     check=True, capture_output=True, text=True).stdout
                import json
                bench = json.loads(out)["median_ms"]
                _, _, _, seconds = run_with_rss([args.spotter, "video", excerpt, "--output", os.path.join(work, "t.mp4"), "--model", MODEL] + extra)
                results[name] = (bench, frames / seconds)
            (db, dv), (sb, sv) = results["default"], results["--threads 1"]
            print(f"   {label:<10} bench default {db:6.2f} ms, --threads 1 {sb:6.2f} ms (ratio {db / sb:.2f}); "
                  f"video default {dv:6.1f} fps, --threads 1 {sv:6.1f} fps (ratio {dv / sv:.2f})")
        finally:
            if loop:
                loop.kill()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
