#!/usr/bin/env python3
"""Tracking quality and speed, side by side: `spotter track` against the anchors of Roboflow's
`trackers` (SORT, ByteTrack, BoT-SORT, OC-SORT, each with its library defaults) on the same public
detections, scored by the same evaluator (`trackers.eval`, TrackEval's matching: HOTA, IDF1,
MOTA). Runs in its own venv (~/.cache/spotter-track-venv, made on first use: `trackers` wants
opencv-python, which cannot share a venv with the peer's opencv-python-headless).

  scripts/bench_tracking.py SPOTTER [--sequences DIR] [--frame-rate 25] [--rounds 5] [--quality-only]

`--sequences` holds one folder per sequence with `det.txt` and `gt.txt` (default
../shared/tracking/mot15). Prints one table of HOTA / IDF1 / MOTA per tracker and sequence, the
best anchor, whether Spotter (its defaults) is at least as good on both HOTA and IDF1, and
Spotter with `--fill-gaps 1` (offline interpolation, for reference). Then the speed, on synthetic
sequences made here: milliseconds per frame with 50 objects (the anchors' update() in-process,
Spotter's tracker as `spotter track` times it in-process, one thread), and `spotter track`'s
whole-process frames per second on an 800-frame sequence (start-up included, best of --rounds).
Exit status 1 when Spotter is below the best anchor or misses the speed bars (0.1 ms per frame,
1000 frames per second).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
VENV = os.environ.get("SPOTTER_TRACK_VENV", os.path.expanduser("~/.cache/spotter-track-venv"))
REQUIREMENTS = ["trackers==2.6.1", "trackeval==1.3.0"]


def ensure_venv():
    """Re-runs this script in the tracking venv, making it first if needed."""
    python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    stamp = os.path.join(VENV, ".spotter-requirements")
    current = open(stamp).read() if os.path.exists(stamp) else None
    if not os.path.exists(python) or current != " ".join(REQUIREMENTS):
        print(f"bench_tracking: making {VENV} ({', '.join(REQUIREMENTS)})", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *REQUIREMENTS], check=True)
        open(stamp, "w").write(" ".join(REQUIREMENTS))
    os.execv(python, [python, *sys.argv])


def read_detections(path):
    """MOTChallenge detections by frame: (frame, [(x, y, w, h, score)])."""
    frames = {}
    for line in open(path):
        parts = line.strip().split(",")
        if len(parts) < 7:
            continue
        frame = int(float(parts[0]))
        x, y, w, h, score = (float(v) for v in parts[2:7])
        frames.setdefault(frame, []).append((x, y, w, h, score))
    return frames


def run_anchor(name, factory, detections, frame_rate, out_path):
    import numpy as np
    import supervision as sv
    tracker = factory(frame_rate)
    last = max(detections) if detections else 0
    start = time.perf_counter()
    rows = []
    for frame in range(1, last + 1):
        boxes = detections.get(frame, [])
        if boxes:
            xyxy = np.array([[x, y, x + w, y + h] for x, y, w, h, _ in boxes], dtype=float)
            confidence = np.array([s for *_, s in boxes], dtype=float)
            found = sv.Detections(xyxy=xyxy, confidence=confidence, class_id=np.zeros(len(boxes), dtype=int))
        else:
            found = sv.Detections.empty()
        tracked = tracker.update(found)
        for box, track_id, score in zip(tracked.xyxy, tracked.tracker_id, tracked.confidence if tracked.confidence is not None else [1] * len(tracked)):
            if track_id is None or track_id < 0:
                continue
            x1, y1, x2, y2 = box
            rows.append(f"{frame},{int(track_id) + 1},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{score:.3f},-1,-1,-1")
    elapsed = time.perf_counter() - start
    open(out_path, "w").write("\n".join(rows) + "\n")
    return last, elapsed


def synthetic(path, frames, objects, seed):
    """A MOTChallenge detection file of `objects` people walking at once (each leaves at an edge
    and a new one enters), 640x480-sized boxes scattered over a 1920x1080 frame, with jitter, a few
    missed detections and false ones. Deterministic for a seed."""
    import random
    rng = random.Random(seed)

    def spawn():
        return [rng.uniform(0, 1880), rng.uniform(0, 980), rng.uniform(-6, 6), rng.uniform(-3, 3), rng.uniform(30, 60), rng.uniform(80, 160)]
    walkers = [spawn() for _ in range(objects)]
    with open(path, "w") as f:
        for frame in range(1, frames + 1):
            for w in walkers:
                w[0] += w[2]
                w[1] += w[3]
                if not (-50 < w[0] < 1920 and -50 < w[1] < 1080):
                    w[:] = spawn()
                if rng.random() < 0.05:
                    continue
                x, y = w[0] + rng.gauss(0, 1.5), w[1] + rng.gauss(0, 1.5)
                f.write(f"{frame},-1,{x:.2f},{y:.2f},{w[4]:.2f},{w[5]:.2f},{rng.uniform(0.3, 1):.3f},-1,-1,-1\n")
            if rng.random() < 0.3:
                f.write(f"{frame},-1,{rng.uniform(0, 1880):.2f},{rng.uniform(0, 980):.2f},40,100,{rng.uniform(0.3, 0.8):.3f},-1,-1,-1\n")


def speed_bars(spotter, work, rounds, frame_rate):
    """Prints the speed table; returns whether Spotter meets both bars."""
    dense = os.path.join(work, "synthetic-50.txt")
    synthetic(dense, 2000, 50, seed=50)
    detections = read_detections(dense)
    print(f"\nspeed: 2000 frames with 50 objects (ms per frame, one thread)")
    fastest = None
    for name, factory in anchors().items():
        _, elapsed = run_anchor(name, factory, detections, frame_rate, os.path.join(work, f"{name}-synthetic.txt"))
        per_frame = elapsed * 1000 / 2000
        fastest = per_frame if fastest is None else min(fastest, per_frame)
        print(f"  {name:10s} {per_frame:8.3f} ms")
    best = None
    for _ in range(max(1, rounds)):
        result = subprocess.run([spotter, "track", dense, "--output", os.path.join(work, "spotter-synthetic.txt"), "--frame-rate", str(frame_rate)],
                                check=True, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        per_frame = float(result.stderr.split("tracker ")[1].split(" ms")[0])
        best = per_frame if best is None else min(best, per_frame)
    print(f"  {'Spotter':10s} {best:8.4f} ms  ({fastest / best:.0f}x the fastest anchor; bar: 0.1 ms)")
    sequence = os.path.join(work, "synthetic-800.txt")
    synthetic(sequence, 800, 15, seed=800)
    whole = None
    for _ in range(max(1, rounds)):
        start = time.perf_counter()
        subprocess.run([spotter, "track", sequence, "--output", os.path.join(work, "spotter-800.txt"), "--frame-rate", str(frame_rate)],
                       check=True, capture_output=True)
        elapsed = time.perf_counter() - start
        whole = elapsed if whole is None else min(whole, elapsed)
    print(f"  spotter track, 800 frames with 15 objects, whole process: {whole * 1000:.0f} ms, {800 / whole:.0f} frames/s (bar: 1000)")
    return best <= 0.1 and 800 / whole >= 1000


def anchors():
    from trackers import BoTSORTTracker, ByteTrackTracker, OCSORTTracker, SORTTracker
    return {
        "SORT": lambda rate: SORTTracker(frame_rate=rate),
        "ByteTrack": lambda rate: ByteTrackTracker(frame_rate=rate),
        # Without frames there is no camera motion to compensate (CMC needs pictures).
        "BoT-SORT": lambda rate: BoTSORTTracker(frame_rate=rate, enable_cmc=False),
        "OC-SORT": lambda rate: OCSORTTracker(frame_rate=rate),
    }


def pedestrian_ground_truth(gt, work):
    """MOT15 ground truth has no class column (its 8th-10th columns are -1, or world coordinates);
    TrackEval's MOT17 rules score class 1 only: every row becomes a pedestrian, `flag` kept (rows
    with flag 0 stay ignored), as the dataset's README asks."""
    out = os.path.join(work, os.path.basename(os.path.dirname(gt)) + "-gt.txt")
    rows = []
    for line in open(gt):
        parts = line.strip().split(",")
        if len(parts) >= 7:
            rows.append(",".join(parts[:7] + ["1", "1"]))
    open(out, "w").write("\n".join(rows) + "\n")
    return out


def score(gt, tracked):
    from trackers.eval import evaluate_mot_sequence
    result = evaluate_mot_sequence(gt_path=gt, tracker_path=tracked, metrics=["CLEAR", "HOTA", "Identity"])
    return 100 * result.HOTA.HOTA, 100 * result.Identity.IDF1, 100 * result.CLEAR.MOTA


def main():
    ensure_venv()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--sequences", default=os.path.join(SHARED, "tracking", "mot15"))
    parser.add_argument("--frame-rate", type=float, default=25)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quality-only", action="store_true", help="skip the speed bars (the test run: a busy machine)")
    args = parser.parse_args()
    sequences = sorted(d for d in os.listdir(args.sequences) if os.path.exists(os.path.join(args.sequences, d, "det.txt")))
    work = tempfile.mkdtemp(prefix="spotter-tracking-")
    table = {}
    speed = {}
    for sequence in sequences:
        folder = os.path.join(args.sequences, sequence)
        detections = read_detections(os.path.join(folder, "det.txt"))
        gt = pedestrian_ground_truth(os.path.join(folder, "gt.txt"), work)
        for name, factory in anchors().items():
            out = os.path.join(work, f"{name}-{sequence}.txt")
            frames, elapsed = run_anchor(name, factory, detections, args.frame_rate, out)
            table[(name, sequence)] = score(gt, out)
            speed.setdefault(name, [0, 0.0])
            speed[name][0] += frames
            speed[name][1] += elapsed
        out = os.path.join(work, f"spotter-{sequence}.txt")
        best = None
        for _ in range(max(1, args.rounds)):
            start = time.perf_counter()
            subprocess.run([args.spotter, "track", os.path.join(folder, "det.txt"), "--output", out, "--frame-rate", str(args.frame_rate)],
                           check=True, capture_output=True)
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        table[("Spotter", sequence)] = score(gt, out)
        speed.setdefault("Spotter", [0, 0.0])
        speed["Spotter"][0] += max(detections) if detections else 0
        speed["Spotter"][1] += best
        filled = os.path.join(work, f"spotter-filled-{sequence}.txt")
        subprocess.run([args.spotter, "track", os.path.join(folder, "det.txt"), "--output", filled, "--frame-rate", str(args.frame_rate),
                        "--fill-gaps", "1"], check=True, capture_output=True)
        table[("Spotter --fill-gaps 1", sequence)] = score(gt, filled)
    names = list(anchors()) + ["Spotter"]
    print(f"{'tracker':22s} " + " ".join(f"{s:>24s}" for s in sequences) + f" {'frames/s':>10s}")
    print(f"{'':22s} " + " ".join(f"{'HOTA / IDF1 / MOTA':>24s}" for _ in sequences))
    for name in names:
        cells = " ".join("{:>24s}".format("%.1f / %.1f / %.1f" % table[(name, s)]) for s in sequences)
        frames, seconds = speed[name]
        print(f"{name:22s} {cells} {frames / seconds:10.0f}")
    cells = " ".join("{:>24s}".format("%.1f / %.1f / %.1f" % table[("Spotter --fill-gaps 1", s)]) for s in sequences)
    print(f"{'Spotter --fill-gaps 1':22s} {cells}")
    ok = True
    for sequence in sequences:
        best_hota = max(table[(n, sequence)][0] for n in anchors())
        best_idf1 = max(table[(n, sequence)][1] for n in anchors())
        mine = table[("Spotter", sequence)]
        verdict = mine[0] >= best_hota - 1e-9 and mine[1] >= best_idf1 - 1e-9
        ok &= verdict
        print(f"{sequence}: best anchor HOTA {best_hota:.1f}, IDF1 {best_idf1:.1f}; Spotter {mine[0]:.1f}, {mine[1]:.1f}: "
              + ("at least as good" if verdict else "BELOW"))
    if not args.quality_only:
        ok &= speed_bars(args.spotter, work, args.rounds, args.frame_rate)
    print("passed" if ok else "failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
