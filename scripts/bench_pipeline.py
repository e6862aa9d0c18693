#!/usr/bin/env python3
"""Side-by-side video pipeline benchmark: `spotter video` and `spotter record` against the peer's
../shared/reference/pipeline_py.py (LiteRT + OpenCV, mp4v) in its annotate and --record-persons
modes, same video, same machine, alternating rounds, 2 inference threads. Prints fps, peak RSS and
the ratios; repeats on a video ten times as long (made with ffmpeg's concat demuxer) to show that
memory stays flat.

Usage (run by scripts/bench.sh --pipeline):
  bench_pipeline.py SPOTTER_BINARY [--rounds 2] [--long]
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODEL = os.path.join(SHARED, "models", "coco-ssd-mobilenet-v1", "detect.tflite")
VIDEO = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")
PEER = os.path.join(SHARED, "reference", "pipeline_py.py")


def run_with_rss(command):
    import time
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = [], []
    import threading
    t1 = threading.Thread(target=lambda: stdout.append(process.stdout.read()))
    t2 = threading.Thread(target=lambda: stderr.append(process.stderr.read()))
    t1.start(); t2.start()
    _, status, usage = os.wait4(process.pid, 0)
    t1.join(); t2.join()
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}\n{''.join(stderr)[-2000:]}")
    return "".join(stdout), "".join(stderr), usage.ru_maxrss / 1024, wall


def frames_of(video):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_packets", "-show_entries",
                          "stream=nb_read_packets", "-of", "csv=p=0", video], check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--long", action="store_true", help="also run on a video ten times as long")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spotter-bench-")
    videos = [VIDEO]
    if args.long:
        listing = os.path.join(work, "list.txt")
        with open(listing, "w") as f:
            f.write("".join(f"file '{VIDEO}'\n" for _ in range(10)))
        long_video = os.path.join(work, "long.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "concat", "-safe", "0", "-i", listing, "-c", "copy", long_video], check=True)
        videos.append(long_video)
    print(f"date {datetime.date.today()} | {os.cpu_count()} cores | 2 inference threads | {args.rounds} rounds")
    print(f"{'video':<34} {'mode':<8} {'peer fps':>8} {'spotter fps':>11} {'ratio':>6} {'peer MiB':>8} {'spotter MiB':>11}")
    for video in videos:
        frames = frames_of(video)
        for mode in ["annotate", "record"]:
            peer_fps, spotter_fps, peer_rss, spotter_rss = [], [], 0.0, 0.0
            for _ in range(args.rounds):
                summary = os.path.join(work, "peer.json")
                command = [sys.executable, PEER, video, "--threads", "2", "--json", summary]
                command += ["--out", os.path.join(work, "peer.mp4")] if mode == "annotate" else ["--record-persons", os.path.join(work, "peer-clips")]
                _, _, rss, _ = run_with_rss(command)
                peer_fps.append(json.load(open(summary))["fps"])
                peer_rss = max(peer_rss, rss)
                shutil.rmtree(os.path.join(work, "peer-clips"), ignore_errors=True)
                if mode == "annotate":
                    command = [args.spotter, "video", video, "--output", os.path.join(work, "spotter.mp4"), "--model", MODEL, "--threads", "2"]
                else:
                    command = [args.spotter, "record", video, "--album", os.path.join(work, "album"), "--model", MODEL, "--threads", "2"]
                _, _, rss, wall = run_with_rss(command)
                shutil.rmtree(os.path.join(work, "album"), ignore_errors=True)
                spotter_fps.append(frames / wall)
                spotter_rss = max(spotter_rss, rss)
            p, s = statistics.median(peer_fps), statistics.median(spotter_fps)
            name = os.path.basename(video) if video == VIDEO else "10x concatenation"
            print(f"{name:<34} {mode:<8} {p:>8.1f} {s:>11.1f} {s / p:>6.2f} {peer_rss:>8.1f} {spotter_rss:>11.1f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
