#!/usr/bin/env python3
"""Side-by-side video pipeline benchmark: `spotter video` and `spotter record` against the peer's
../shared/reference/pipeline_py.py (LiteRT + OpenCV, mp4v) in its annotate and --record-persons
modes, same video, same machine, alternating rounds, 2 inference threads. Prints whole-process fps
(start-up included, for both), peak RSS and the ratios; --long repeats on a video ten times as long
(made with ffmpeg's concat demuxer) to show that memory stays flat; --clips runs issue 33's short
clips instead (asl-walk.mkv, a 40 s excerpt, a 377-frame 1280x720 clip); --tracking shows what
tracking and zones add to `spotter video`.

Usage (run by scripts/bench.sh --pipeline):
  bench_pipeline.py SPOTTER_BINARY [--rounds 2] [--long | --clips | --tracking]
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


def make_clips(work):
    """The issue's short clips: asl-walk.mkv, a 40 s excerpt of the shared video, and a 377-frame
    1280x720 clip made from it (people walking)."""
    excerpt = os.path.join(work, "one-by-one-40s.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", VIDEO, "-t", "40", "-c:v", "libx264", "-preset", "veryfast", "-crf", "20",
                    "-pix_fmt", "yuv420p", excerpt], check=True)
    hd = os.path.join(work, "walk-1280x720.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", "6", "-i", VIDEO, "-frames:v", "377", "-vf", "scale=1280:720", "-c:v", "libx264",
                    "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", hd], check=True)
    return [os.path.join(SHARED, "videos", "asl-walk.mkv"), excerpt, hd]


def tracking_overhead(spotter, work, rounds):
    """`spotter video` on the shared video without tracking, with it (the default), and with it and
    a zone and a line: whole-process times, alternating, the least of the rounds (runs of one
    variant vary by more than what is measured on a shared VM; the least is the run least
    disturbed)."""
    zones = os.path.join(work, "zones.json")
    json.dump({"zones": [{"name": "door", "polygon": [[520, 200], [760, 200], [760, 430], [520, 430]]}],
               "lines": [{"name": "gate", "from": [500, 10], "to": [500, 425]}]}, open(zones, "w"))
    variants = {"no tracking": ["--no-tracking"], "tracking": [], "tracking + zones": ["--zones", zones, "--events", os.path.join(work, "e.jsonl")]}
    walls = {name: [] for name in variants}
    for _ in range(rounds):
        for name, flags in variants.items():
            command = [spotter, "video", VIDEO, "--output", os.path.join(work, "t.mp4"), "--model", MODEL, "--threads", "2", *flags]
            walls[name].append(run_with_rss(command)[3])
    base = min(walls["no tracking"])
    print(f"{'spotter video, shared video':<34} {'variant':<18} {'wall s':>7} {'vs no tracking':>15}")
    for name in variants:
        wall = min(walls[name])
        print(f"{'':<34} {name:<18} {wall:>7.2f} {100 * (wall / base - 1):>+14.1f}%   (runs {', '.join(f'{w:.2f}' for w in walls[name])})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--long", action="store_true", help="also run on a video ten times as long")
    parser.add_argument("--clips", action="store_true", help="the short clips of issue 33 instead of the shared video")
    parser.add_argument("--tracking", action="store_true", help="only what tracking and zones add to `spotter video`")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spotter-bench-")
    print(f"date {datetime.date.today()} | {os.cpu_count()} cores | 2 inference threads | {args.rounds} rounds | whole-process fps")
    if args.tracking:
        tracking_overhead(args.spotter, work, args.rounds)
        shutil.rmtree(work, ignore_errors=True)
        return
    videos = make_clips(work) if args.clips else [VIDEO]
    if args.long:
        listing = os.path.join(work, "list.txt")
        with open(listing, "w") as f:
            f.write("".join(f"file '{VIDEO}'\n" for _ in range(10)))
        long_video = os.path.join(work, "long.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "concat", "-safe", "0", "-i", listing, "-c", "copy", long_video], check=True)
        videos.append(long_video)
    print(f"{'video':<34} {'mode':<8} {'peer fps':>8} {'spotter fps':>11} {'ratio':>6} {'peer MiB':>8} {'spotter MiB':>11}")
    for video in videos:
        frames = frames_of(video)
        for mode in ["annotate", "record"]:
            peer_fps, spotter_fps, peer_rss, spotter_rss = [], [], 0.0, 0.0
            for _ in range(args.rounds):
                command = [sys.executable, PEER, video, "--threads", "2"]
                command += ["--out", os.path.join(work, "peer.mp4")] if mode == "annotate" else ["--record-persons", os.path.join(work, "peer-clips")]
                _, _, rss, wall = run_with_rss(command)
                peer_fps.append(frames / wall)
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
            name = "10x concatenation" if video.endswith("long.mp4") else os.path.basename(video)
            print(f"{name:<34} {mode:<8} {p:>8.1f} {s:>11.1f} {s / p:>6.2f} {peer_rss:>8.1f} {spotter_rss:>11.1f}", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
