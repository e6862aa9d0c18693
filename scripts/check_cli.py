#!/usr/bin/env python3
"""End-to-end checks of the spotter executable: `inspect --json` parses and describes the shared
model; `run` writes .npy outputs equal to LiteRT's reference kernels on a real image; errors are
one clear line. Usage: check_cli.py PATH/TO/spotter"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

spotter = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = os.path.join(os.path.dirname(root), "shared", "models", "coco-ssd-mobilenet-v1", "detect.tflite")
failures, checked = [], []


def check(condition, message):
    checked.append(message)
    print(("ok    " if condition else "FAIL  ") + message)
    if not condition:
        failures.append(message)


report = json.loads(subprocess.run([spotter, "inspect", model, "--json"], check=True, capture_output=True, text=True).stdout)
check({"inputs", "outputs", "operators", "runnable"} <= report.keys(), "inspect --json has inputs, outputs, operators, runnable")
check(report["runnable"] is True, "inspect says the shared model runs")
ops = {o["name"]: (o["count"], o["supported"]) for o in report["operators"]}
check(ops.get("CONV_2D") == (34, True) and ops.get("TFLite_Detection_PostProcess") == (1, True), "inspect counts operators")
check(report["inputs"][0]["shape"] == [1, 300, 300, 3] and report["inputs"][0]["type"] == "uint8", "inspect describes the input")
check(report["detectionLayout"] == "SSD with post-processing: boxes, classes, scores, count", "inspect recognizes the SSD layout")

with tempfile.TemporaryDirectory() as out:
    name = "astronaut"
    inputs = os.path.join(root, "fixtures-generated", "detect", "inputs", name + ".npy")
    subprocess.run([spotter, "run", model, "--input", inputs, "--output-dir", out, "--tensor", "Squeeze"],
                   check=True, capture_output=True)
    expected = os.path.join(root, "fixtures-generated", "detect", "ref", name)
    for file in ["Squeeze", "TFLite_Detection_PostProcess_1", "TFLite_Detection_PostProcess_2", "TFLite_Detection_PostProcess_3"]:
        a, b = np.load(os.path.join(out, file + ".npy")), np.load(os.path.join(expected, file + ".npy"))
        check(a.shape == b.shape and np.array_equal(a, b), f"run writes {file}.npy equal to LiteRT's")

    bad = subprocess.run([spotter, "run", model, "--input", model, "--output-dir", out], capture_output=True, text=True)
    check(bad.returncode != 0 and "not a NumPy .npy file" in bad.stderr, "run rejects a non-.npy input with a clear error")
    missing = subprocess.run([spotter, "inspect", "/nonexistent.tflite"], capture_output=True, text=True)
    check(missing.returncode != 0 and "no model at /nonexistent.tflite" in missing.stderr, "inspect names a missing file")
    truncated = os.path.join(out, "truncated.tflite")
    with open(model, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:100_000])
    cut = subprocess.run([spotter, "inspect", truncated], capture_output=True, text=True)
    check(cut.returncode != 0 and "cannot read" in cut.stderr and "truncated" in cut.stderr, "inspect explains a truncated model")

images = os.path.join(os.path.dirname(root), "shared", "images")
with tempfile.TemporaryDirectory() as out:
    lines = subprocess.run([spotter, "detect", images, "--model", model, "--json"], check=True, capture_output=True, text=True).stdout.splitlines()
    objects = [json.loads(line) for line in lines]
    check(len(objects) == 5, "detect --json prints one object per picture")
    keys = {"image", "width", "height", "timings_ms", "detections"}
    check(all(keys <= o.keys() for o in objects), "detect --json objects carry image, width, height, timings_ms, detections")
    coffee = next(o for o in objects if o["image"].endswith("coffee.png"))
    cup = coffee["detections"][0]
    check(cup["label"] == "cup" and abs(cup["score"] - 0.777) < 0.03 and set(cup["box"]) == {"xmin", "ymin", "xmax", "ymax"},
          "detect finds the cup with its box")
    broken = os.path.join(out, "broken.jpg")
    with open(broken, "wb") as f:
        f.write(b"not a picture")
    mixed = subprocess.run([spotter, "detect", broken, os.path.join(images, "coffee.png"), "--model", model, "--json",
                            "--save-dir", os.path.join(out, "annotated")], capture_output=True, text=True)
    check(mixed.returncode != 0 and "broken.jpg" in mixed.stderr and len(mixed.stdout.splitlines()) == 1,
          "detect reports an unreadable picture by name, processes the rest, and fails")
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0",
                            os.path.join(out, "annotated", "coffee.png")], capture_output=True, text=True)
    check(probe.stdout.strip() == "600,400", "detect --save-dir writes annotated copies ffprobe reads")
    coco = json.loads(subprocess.run([spotter, "detect", images, "--model", model, "--format", "coco", "--classes", "person"],
                                     check=True, capture_output=True, text=True).stdout)
    check(len(coco) == 2 and all(d["category_id"] == 1 and len(d["bbox"]) == 4 for d in coco), "detect --format coco with --classes person")

walk = os.path.join(os.path.dirname(root), "shared", "videos", "asl-walk.mkv")
with tempfile.TemporaryDirectory() as out:
    video, lines = os.path.join(out, "boxes.mp4"), os.path.join(out, "frames.jsonl")
    subprocess.run([spotter, "video", walk, "--output", video, "--model", model, "--jsonl", lines, "--every", "2"],
                   check=True, capture_output=True)
    probe = json.loads(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_entries",
                                       "stream=codec_name,pix_fmt,nb_read_frames", "-of", "json", video],
                                      check=True, capture_output=True, text=True).stdout)["streams"][0]
    source = int(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames",
                                 "-of", "csv=p=0", walk], check=True, capture_output=True, text=True).stdout.strip())
    check(probe["codec_name"] == "h264" and probe["pix_fmt"] == "yuv420p" and int(probe["nb_read_frames"]) == source,
          "video writes every frame as H.264 yuv420p")
    rows = [json.loads(line) for line in open(lines)]
    check(len(rows) == (source + 1) // 2 and all({"frame", "t", "detections"} <= r.keys() for r in rows)
          and any(d["label"] == "person" for r in rows for d in r["detections"]), "video --jsonl --every 2 writes one line per processed frame")
    album = os.path.join(out, "album")
    events = [json.loads(line) for line in subprocess.run(
        [spotter, "record", walk, "--album", album, "--model", model, "--json", "--post-roll", "1"],
        check=True, capture_output=True, text=True).stdout.splitlines()]
    kinds = [e["event"] for e in events]
    finished = [e for e in events if e["event"] == "clip_finished"]
    check("clip_started" in kinds and finished and kinds[-1] == "finished", "record --json reports clip_started, clip_finished, finished")
    check(all(os.path.exists(os.path.join(album, e["path"])) and os.path.exists(os.path.join(album, e["thumbnail"])) for e in finished),
          "record writes each clip and its thumbnail into the album")
    started = [e["path"] for e in events if e["event"] == "clip_started"]
    check(started == [e["path"] for e in finished] and all(os.path.isabs(p) for p in started),
          "record's clip_started and clip_finished name each clip by the same absolute path")
    missing = subprocess.run([spotter, "video", "/nonexistent.mp4", "--output", video, "--model", model], capture_output=True, text=True)
    check(missing.returncode != 0 and "/nonexistent.mp4" in missing.stderr, "video names an input it cannot open")

print(f"{len(checked) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
