#!/usr/bin/env python3
"""End-to-end checks of the spotter executable: `inspect --json` parses and describes the shared
model; `run` writes .npy outputs equal to LiteRT's reference kernels on a real image; errors are
one clear line. Usage: check_cli.py PATH/TO/spotter"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

from checklib import surest_picture

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


def loaded_libraries(*arguments):
    """The shared objects the dynamic loader opens while spotter runs `arguments`."""
    run = subprocess.run([spotter, *arguments], capture_output=True, text=True, env={**os.environ, "LD_DEBUG": "files"})
    return run.returncode, {line.split("file=")[1].split()[0] for line in run.stderr.splitlines() if "file=" in line}


code, inspected = loaded_libraries("inspect", model)
jpeg = os.path.join(os.path.dirname(root), "shared", "images", "faces", "obama.jpg")
code_jpeg, detected = loaded_libraries("detect", jpeg, "--model", model, "--json")
# A picture with LiteRT's top detection on it (the one LiteRT is surest of) and LiteRT's detections there.
picture, litert = surest_picture()
code_png, detected_png = loaded_libraries("detect", picture, "--model", model, "--json")
check(code == 0 and code_jpeg == 0 and not any("libav" in name for name in inspected | detected),
      "inspect and detect on a JPEG never load FFmpeg's libraries (start-up cost)")
check(code_png == 0 and any(name.startswith("libavformat") for name in detected_png), "detect on a PNG loads FFmpeg when it needs it")

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
    pictures = [n for n in os.listdir(images) if os.path.isfile(os.path.join(images, n)) and n.lower().endswith((".png", ".jpg", ".jpeg"))]
    check(len(objects) == len(pictures), f"detect --json prints one object per picture ({len(objects)} for {len(pictures)})")
    keys = {"image", "width", "height", "timings_ms", "detections"}
    check(all(keys <= o.keys() for o in objects), "detect --json objects carry image, width, height, timings_ms, detections")
    found = next(o for o in objects if os.path.samefile(o["image"], picture))["detections"][0]
    # LiteRT's strongest detection on the same picture (make_litert_fixtures.py).
    label, score = litert[0]["label"], litert[0]["score"]
    check(found["label"] == label and abs(found["score"] - score) < 0.03 and set(found["box"]) == {"xmin", "ymin", "xmax", "ymax"}
          and all(abs(found["box"][k] - v) <= 3 for k, v in zip(["xmin", "ymin", "xmax", "ymax"], litert[0]["box"])),
          f"detect finds LiteRT's strongest object on {os.path.basename(picture)} ({label} {score:.3f}) with its box")
    broken = os.path.join(out, "broken.jpg")
    with open(broken, "wb") as f:
        f.write(b"not a picture")
    mixed = subprocess.run([spotter, "detect", broken, picture, "--model", model, "--json",
                            "--save-dir", os.path.join(out, "annotated")], capture_output=True, text=True)
    check(mixed.returncode != 0 and "broken.jpg" in mixed.stderr and len(mixed.stdout.splitlines()) == 1,
          "detect reports an unreadable picture by name, processes the rest, and fails")
    def probe(path):
        return subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", path],
                              capture_output=True, text=True).stdout.strip()
    check(probe(os.path.join(out, "annotated", os.path.basename(picture))) == probe(picture) != "",
          "detect --save-dir writes annotated copies ffprobe reads, at the picture's size")
    coco = json.loads(subprocess.run([spotter, "detect", images, "--model", model, "--format", "coco", "--classes", "person"],
                                     check=True, capture_output=True, text=True).stdout)
    persons = sum(d["label"] == "person" for o in objects for d in o["detections"])
    check(persons > 0 and len(coco) == persons and all(d["category_id"] == 1 and len(d["bbox"]) == 4 for d in coco),
          f"detect --format coco with --classes person holds the {persons} persons of the JSON output")

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
    import datetime
    import sqlite3
    with sqlite3.connect(os.path.join(album, "index.sqlite")) as index:
        rows = index.execute("SELECT clip, created_at FROM clips").fetchall()
    now = datetime.datetime.now(datetime.timezone.utc)
    created = [datetime.datetime.strptime(c, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc) for _, c in rows]
    named = [datetime.datetime.strptime(os.path.basename(clip).split("-")[0], "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=datetime.timezone.utc)
             for clip, _ in rows]
    check(len(rows) == len(finished) and all(abs((now - t).total_seconds()) < 600 for t in created + named),
          "the album stores each clip's UTC creation time as ISO 8601 and names clips by the UTC time of the run")
    started = [e["path"] for e in events if e["event"] == "clip_started"]
    check(started == [e["path"] for e in finished] and all(os.path.isabs(p) for p in started),
          "record's clip_started and clip_finished name each clip by the same absolute path")
    kept = subprocess.run([spotter, "album", "prune", album, "--keep-days", "1"], capture_output=True, text=True)
    listed = subprocess.run([spotter, "album", "list", album, "--json"], check=True, capture_output=True, text=True).stdout.splitlines()
    check(kept.returncode == 0 and len(listed) == len(finished), "album prune --keep-days 1 keeps clips made today")
    pruned = subprocess.run([spotter, "album", "prune", album, "--keep-gib", "0.000001"], capture_output=True, text=True)
    left = [f for sub in ("clips", "thumbnails") for f in os.listdir(os.path.join(album, sub))]
    listed = subprocess.run([spotter, "album", "list", album, "--json"], check=True, capture_output=True, text=True).stdout.splitlines()
    check(pruned.returncode == 0 and listed == [] and left == [] and f"{len(finished)} clip(s) deleted" in pruned.stdout,
          "album prune --keep-gib deletes clips with their thumbnails, snapshots and rows")
    missing = subprocess.run([spotter, "video", "/nonexistent.mp4", "--output", video, "--model", model], capture_output=True, text=True)
    check(missing.returncode != 0 and "/nonexistent.mp4" in missing.stderr, "video names an input it cannot open")

drawn = os.path.join(root, "fixtures-generated", "rectangles-unit")
with tempfile.TemporaryDirectory() as out:
    truth = json.load(open(os.path.join(drawn, "truth.json")))["page-warped"][0]
    warped = os.path.join(drawn, "page-warped.png")
    row = json.loads(subprocess.run([spotter, "rectangles", warped, "--json", "--rectify", os.path.join(out, "flat"),
                                     "--save-dir", os.path.join(out, "outlined")], check=True, capture_output=True, text=True).stdout)
    keys = {"image", "width", "height", "milliseconds", "rectangles"}
    found = row["rectangles"][0] if row["rectangles"] else {}
    check(keys <= row.keys() and {"corners", "normalized", "box", "confidence"} <= found.keys(),
          "rectangles --json carries image, width, height, rectangles with corners, normalized, box, confidence")
    check(len(row["rectangles"]) == 1 and max(np.hypot(*np.subtract(a, b)) for a, b in zip(found["corners"], truth)) < 0.5,
          "rectangles finds OpenCV's warped page within half a pixel, corners top-left first, clockwise")
    check(all(abs(n[0] * 640 - c[0]) < 1e-3 and abs(n[1] * 480 - c[1]) < 1e-3 for n, c in zip(found["normalized"], found["corners"])),
          "rectangles --json normalized corners are the pixel corners over the picture size")
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0",
                            os.path.join(out, "flat", "page-warped-1.png")], capture_output=True, text=True)
    c = np.array(truth)
    size = (max(np.linalg.norm(c[1] - c[0]), np.linalg.norm(c[2] - c[3])), max(np.linalg.norm(c[3] - c[0]), np.linalg.norm(c[2] - c[1])))
    written = [int(v) for v in probe.stdout.strip().split(",")] if probe.returncode == 0 else [0, 0]
    check(all(abs(w - s) <= 1 for w, s in zip(written, size)), "rectangles --rectify writes the flattened page (width and height from its longer sides)")
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0",
                            os.path.join(out, "outlined", "page-warped.png")], capture_output=True, text=True)
    check(probe.stdout.strip() == "640,480", "rectangles --save-dir writes an outlined copy ffprobe reads")
    bad = subprocess.run([spotter, "rectangles", warped, "--quadrature-tolerance", "50"], capture_output=True, text=True)
    check(bad.returncode != 0 and "quadrature tolerance 50.0 is outside 0.0...45.0" in bad.stderr, "rectangles refuses an option out of range, naming it")
    same = subprocess.run([spotter, "rectangles", drawn, "--save-dir", drawn], capture_output=True, text=True)
    check(same.returncode == 0 and os.path.getsize(warped) > 0 and json.load(open(os.path.join(drawn, "truth.json")))["page-warped"][0] == truth
          and os.path.exists(os.path.join(drawn, "page-warped-2.png")), "rectangles --save-dir into the input folder never overwrites an input")
    clip, outlined = os.path.join(out, "page.mp4"), os.path.join(out, "page-outlined.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", warped, "-t", "1", "-r", "10", "-pix_fmt", "yuv420p",
                    "-c:v", "libx264", "-crf", "12", clip], check=True)
    subprocess.run([spotter, "video", clip, "--output", outlined, "--model", model, "--rectangles", "--jsonl", os.path.join(out, "page.jsonl")],
                   check=True, capture_output=True)
    rows = [json.loads(line) for line in open(os.path.join(out, "page.jsonl"))]
    check(len(rows) == 10 and all(len(r["rectangles"]) == 1 and max(np.hypot(*np.subtract(a, b)) for a, b in zip(r["rectangles"][0]["corners"], truth)) < 1.5
                                  for r in rows), "video --rectangles finds the page in every frame of an H.264 clip (--jsonl rectangles)")
    def frame(path):
        raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                             check=True, capture_output=True).stdout
        return np.frombuffer(raw, np.uint8).reshape(480, 640, 3).astype(int)
    top = np.round((np.array(truth[0]) + np.array(truth[1])) / 2 - 0.5).astype(int)
    change = np.abs(frame(outlined)[top[1], top[0]] - frame(clip)[top[1], top[0]]).sum()
    check(change > 60, "video --rectangles draws the outline into the decoded frames")
    for extra in os.listdir(drawn):
        if extra.endswith("-2.png"):
            os.remove(os.path.join(drawn, extra))

shared = os.path.join(os.path.dirname(root), "shared")
faces_dir = os.path.join(shared, "images", "faces")
blazeface = os.path.join(shared, "models", "blazeface-short-range", "face_detection_short_range.tflite")
report = json.loads(subprocess.run([spotter, "inspect", blazeface, "--json"], check=True, capture_output=True, text=True).stdout)
check(report["runnable"] and report["detectionLayout"].startswith("BlazeFace") and "[1, 896, 16]" in report["detectionLayout"]
      and "(RGB scaled" not in report.get("inputScaling", "") and "127.5" in report.get("inputScaling", ""),
      f"inspect runs BlazeFace (float16 weights), names its layout and its input scaling ({report['detectionLayout']}; {report.get('inputScaling')})")
# What the face checks expect comes from the peer (scripts/peer_faces.py: LiteRT BlazeFace and
# MobileFaceNet, in the fixtures): the face photos with one face (portraits) are enrolled under
# their file's name, the one with the most faces is the group, and a face is the person whose
# portrait is nearest by the peer's embeddings within the gallery's threshold (1.0), else unknown.
peer_photos = [json.loads(line) for line in open(os.path.join(root, "fixtures-generated", "models", "faces", "peer.jsonl"))]
face_photos = [p for p in peer_photos if os.path.samefile(os.path.dirname(p["image"]), faces_dir)]
portraits = {os.path.splitext(os.path.basename(p["image"]))[0].replace("_", " ").title(): p for p in face_photos if len(p["faces"]) == 1}
group = max(face_photos, key=lambda p: len(p["faces"]))
group_path = group["image"]


def peer_name(face, people):
    """The name the peer's embeddings give `face` among `people` (names), None when unknown."""
    distances = {n: float(np.linalg.norm(np.array(face["embedding"]) - np.array(portraits[n]["faces"][0]["embedding"]))) for n in people}
    nearest = min(distances, key=distances.get)
    return nearest if distances[nearest] <= 1.0 else None


group_faces = sorted(group["faces"], key=lambda f: f["box"]["xmin"])
group_names = [peer_name(f, portraits) for f in group_faces]
named_in_group = [n for n in group_names if n]
check(len(group_faces) >= 2 and named_in_group and len(portraits) >= 2,
      f"the face photos hold a group ({os.path.basename(group_path)}: {len(group_faces)} faces, {group_names}) and portraits ({sorted(portraits)})")
detected = json.loads(subprocess.run([spotter, "detect", group_path, "--model", blazeface, "--format", "json"],
                                     check=True, capture_output=True, text=True).stdout)
check(len(detected["detections"]) == len(group_faces) and all(d["label"] == "face" and len(d["keypoints"]) == 6 for d in detected["detections"]),
      f"detect --model BlazeFace finds the {len(group_faces)} faces of {os.path.basename(group_path)} with 6 keypoints each")
with tempfile.TemporaryDirectory() as out:
    env = dict(os.environ, SPOTTER_FACE_EMBEDDER=os.path.join(shared, "models", "mobilefacenet", "mobile_face_net.tflite"),
               SPOTTER_FACE_DETECTOR=blazeface, XDG_DATA_HOME=os.path.join(out, "data"))
    def faces(*args):
        return subprocess.run([spotter, "faces", *args], capture_output=True, text=True, env=env)
    for name, portrait in sorted(portraits.items()):
        enrolled = faces("enroll", name, portrait["image"])
        check(enrolled.returncode == 0 and f"enrolled {name}" in enrolled.stdout, f"faces enroll {name}")
    gallery = os.path.join(out, "data", "spotter", "faces.sqlite")
    check(os.path.exists(gallery), "faces keeps its gallery in $XDG_DATA_HOME/spotter/faces.sqlite")
    listed = faces("list")
    check(listed.stdout.splitlines() == [f"{name}\t1 face" for name in sorted(portraits)], "faces list names everyone enrolled")
    astronaut = os.path.join(shared, "images", "astronaut.png")
    stranger = [peer_name(f, portraits) for p in peer_photos if os.path.samefile(p["image"], astronaut) for f in p["faces"]]
    pictures = [group_path, astronaut]
    rows = [json.loads(line) for line in faces("identify", *pictures, "--json", "--save-dir", os.path.join(out, "named")).stdout.splitlines()]
    keys = {"image", "width", "height", "faces"}
    check(len(rows) == 2 and all(keys <= r.keys() for r in rows)
          and all({"box", "score", "keypoints", "name", "distance", "quality"} <= f.keys() for r in rows for f in r["faces"]),
          "faces identify --json prints image, width, height and faces with box, score, keypoints, name, distance")
    names = [f["name"] for f in sorted(rows[0]["faces"], key=lambda f: f["box"]["xmin"])] if rows else []
    check(names == group_names, f"faces identify names the faces of {os.path.basename(group_path)} as the peer does: {names} ({group_names})")
    check(len(rows) == 2 and [f["name"] for f in rows[1]["faces"]] == stranger, f"faces identify names the astronaut as the peer does: {stranger}")
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0",
                            os.path.join(out, "named", os.path.basename(group_path))], capture_output=True, text=True)
    check(probe.stdout.strip() == f"{group['width']},{group['height']}", "faces identify --save-dir writes a named copy ffprobe reads, at the picture's size")
    first, last = named_in_group[0], named_in_group[-1]
    same = faces("compare", portraits[first]["image"], group_path)
    check(same.returncode == 0 and "the same person" in same.stdout, f"faces compare: {first}'s portrait and the group photo show one person")
    # The person named last on the group photo is removed: a stranger from now on.
    removed = faces("rm", last)
    again = faces("rm", last)
    check(removed.returncode == 0 and again.returncode != 0 and f"no one named \"{last}\"" in again.stderr, "faces rm removes a person once, then says there is no one by that name")
    raw = open(gallery, "rb").read() + (open(gallery + "-wal", "rb").read() if os.path.exists(gallery + "-wal") else b"")
    check(last.encode() not in raw and os.path.basename(portraits[last]["image"]).encode() not in raw, "faces rm leaves nothing of the person in the gallery file")
    remaining = [n for n in portraits if n != last]
    after = [peer_name(f, remaining) for f in group_faces]
    rows = [json.loads(line) for line in faces("identify", pictures[0], "--json").stdout.splitlines()]
    check([f["name"] for f in sorted(rows[0]["faces"], key=lambda f: f["box"]["xmin"])] == after, f"after faces rm, {last} is unknown: {after}")
    # Face recognition on video: a 2 s clip of the group photo, with the person removed above a stranger.
    clip = os.path.join(out, "two.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-loop", "1", "-i", group_path, "-t", "2", "-r", "5",
                    "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-pix_fmt", "yuv420p", "-c:v", "libx264", clip], check=True)
    named = subprocess.run([spotter, "video", clip, "--output", os.path.join(out, "named.mp4"), "--jsonl", os.path.join(out, "named.jsonl"),
                            "--faces", gallery, "--model", model], capture_output=True, text=True, env=env)
    rows = [json.loads(line) for line in open(os.path.join(out, "named.jsonl"))] if named.returncode == 0 else []
    identities = [sorted(((d["box"]["xmin"], d["identity"]["name"]) for d in r["detections"] if "identity" in d), key=lambda p: p[0]) for r in rows]
    check(len(rows) == 10 and all([name for _, name in i] == after for i in identities),
          f"video --faces names the person boxes as the faces in them, {after} (identity in --jsonl)")
    strangers = subprocess.run([spotter, "record", clip, "--album", os.path.join(out, "strangers"), "--faces", gallery,
                                "--trigger", "unknown-face", "--model", model, "--json"], capture_output=True, text=True, env=env)
    check(strangers.returncode == 0 and sum('"clip_finished"' in line for line in strangers.stdout.splitlines()) == 1,
          "record --trigger unknown-face records a clip while a stranger is in view")
    faces("enroll", last, portraits[last]["image"])
    known = subprocess.run([spotter, "record", clip, "--album", os.path.join(out, "known"), "--faces", gallery,
                            "--trigger", "unknown-face", "--model", model, "--json"], capture_output=True, text=True, env=env)
    check(known.returncode == 0 and ('"clip_finished"' in known.stdout) == (None in group_names),
          "record --trigger unknown-face records nothing when everyone is known" if None not in group_names
          else "record --trigger unknown-face records the group's stranger")
    bad_config = os.path.join(out, "bad-serve.json")
    with open(bad_config, "w") as f:
        json.dump({"webhooks": ["ftp://example.com/hook"]}, f)
    refused = subprocess.run([spotter, "serve", "--album", os.path.join(out, "never"), "--config", bad_config, "--model", "/nonexistent.tflite"],
                             capture_output=True, text=True, env=env)
    check(refused.returncode != 0 and "webhook ftp://example.com/hook is not an http(s) URL" in refused.stderr
          and "nonexistent" not in refused.stderr and "spotter serve" in refused.stderr,
          "serve checks its config file's webhooks before loading a model, with its own usage line")
    missing = subprocess.run([spotter, "serve", "--album", os.path.join(out, "never"), "--config", os.path.join(out, "missing.json")],
                             capture_output=True, text=True, env=env)
    check(missing.returncode != 0 and "missing.json: no such file" in missing.stderr and "could not be completed" not in missing.stderr,
          "serve names a missing config file in its own words")
    # The server names people too: a looping source of the same clip, detection events read from its SSE stream.
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    # The config file in YAML (the refusal above read JSON).
    config = os.path.join(out, "serve.yaml")
    with open(config, "w") as f:
        f.write(f"sources:\n  - input: {json.dumps(clip)}\n    record: false\n    realtime: true\n    loop: true\n")
    server = subprocess.Popen([spotter, "serve", "--album", os.path.join(out, "served"), "--port", str(port), "--config", config,
                               "--faces", gallery, "--model", model], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    served, stream = [], None
    try:
        for _ in range(100):
            try:
                stream = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/events?types=detection", timeout=30)
                break
            except OSError:
                time.sleep(0.2)
        for raw in stream or []:
            line = raw.decode()
            if line.startswith("data: "):
                event = json.loads(line[6:])
                served.append(sorted((d["box"]["xmin"], d["identity"]["name"]) for d in event["detections"] if "identity" in d))
                if len(served) == 5:
                    break
    except OSError as error:
        print(f"serve --faces: {error}")
    named_upload, deepstack = None, None
    try:
        picture = open(group_path, "rb").read()
        upload = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/detect?classes=person", data=picture,
                                        headers={"Content-Type": "image/jpeg"})
        named_upload = json.load(urllib.request.urlopen(upload, timeout=60))
        upload = urllib.request.Request(f"http://127.0.0.1:{port}/v1/vision/detection", data=picture,
                                        headers={"Content-Type": "image/jpeg"})
        deepstack = json.load(urllib.request.urlopen(upload, timeout=60))
    except OSError as error:
        print(f"serve --faces detect: {error}")
    server.send_signal(signal.SIGTERM)
    server_rc = server.wait(timeout=30)
    check(len(served) == 5 and all([name for _, name in people] == group_names for people in served),
          f"serve --faces with a YAML config names {group_names} in the live detection events ({served[:1]})")
    uploaded_names = sorted(d["identity"]["name"] or "unknown" for d in (named_upload or {}).get("detections", []) if d.get("identity"))
    deepstack_names = sorted(p["userid"] for p in (deepstack or {}).get("predictions", []) if "userid" in p)
    expected_names = sorted(n or "unknown" for n in group_names)
    check(uploaded_names == expected_names and deepstack_names == expected_names,
          f"serve --faces names the people of an uploaded picture on /api/v1/detect and DeepStack's endpoint ({uploaded_names}, {deepstack_names})")
    check(server_rc == 0, "serve --faces stops on SIGTERM with exit 0")
    # A plain grey picture (made here): a photo with no face in it for certain.
    grey = os.path.join(out, "grey.png")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=gray:s=320x240", "-frames:v", "1", grey], check=True)
    noface = faces("enroll", "Grey", grey)
    check(noface.returncode != 0 and "no face found" in noface.stderr, "faces enroll says when a photo has no face")

print(f"{len(checked) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
