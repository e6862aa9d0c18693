"""What the check and benchmark scripts share: where the repository and ../shared are, one line per
check with the count at the end, a free port on 127.0.0.1, and waiting for a condition.

    from checklib import MODEL, check, free_port, summary
    check("the answer is 42", answer == 42, answer)
    sys.exit(summary())   # prints `N passed, M failed`; 1 when any failed
"""
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODEL = os.path.join(SHARED, "models", "coco-ssd-mobilenet-v1", "detect.tflite")

_results = []


def check(name, condition, detail=""):
    """Prints `ok    NAME`, or `FAIL  NAME  DETAIL` (detail cut to 1,500 characters); returns the outcome."""
    _results.append(bool(condition))
    print(("ok    " if condition else "FAIL  ") + name + ("" if condition or not detail else f"  {str(detail)[:1500]}"), flush=True)
    return bool(condition)


def summary():
    """Prints `N passed, M failed` (the line scripts/test.sh reads) and returns the exit status."""
    passed = sum(_results)
    print(f"{passed} passed, {len(_results) - passed} failed", flush=True)
    return 0 if passed == len(_results) else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, seconds, step=0.2):
    """`condition()`'s first true value within `seconds` (exceptions count as false), else None."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception:
            pass
        time.sleep(step)
    return None


def serve_sample(work, name, route="files"):
    """Serves ../shared/videos' people video on 127.0.0.1 (Tests/Fixtures/http_server.py; `route`
    "crawl" sends it slowly) and writes a catalog naming it as the sample `name`. Returns the
    server's process (terminate it when done) and the catalog's path (for SPOTTER_CATALOG)."""
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "Tests", "Fixtures", "http_server.py"), SHARED],
                              stdout=subprocess.PIPE, text=True)
    served = json.loads(server.stdout.readline())
    video = served["files"]["video.mkv"]
    catalog = os.path.join(work, "catalog.json")
    with open(catalog, "w") as f:
        json.dump([{"name": name, "kind": "sample", "url": f"http://127.0.0.1:{served['port']}/{route}/video.mkv",
                    "packaging": "file", "files": [f"{name}.mkv"], "size": video["size"], "sha256": video["sha256"],
                    "license": "CC-BY 4.0", "summary": "a person signing"}], f)
    return server, catalog


def litert_detections(name):
    """LiteRT's detections on ../shared/images/NAME.png, strongest first, as scripts/make_litert_fixtures.py
    saved them (its default XNNPACK path): dicts with label (the model's label map), score and box
    (xmin, ymin, xmax, ymax in the picture's pixels)."""
    import struct
    import numpy as np
    folder = os.path.join(ROOT, "fixtures-generated", "detect", "xnnpack", name)
    boxes, classes, scores, count = (np.load(os.path.join(folder, f"TFLite_Detection_PostProcess{s}.npy"))[0] for s in ["", "_1", "_2", "_3"])
    with open(os.path.join(os.path.dirname(MODEL), "labelmap.txt")) as f:
        labels = f.read().splitlines()[1:]  # the first line is the background
    with open(os.path.join(SHARED, "images", name + ".png"), "rb") as f:
        width, height = struct.unpack(">II", f.read(24)[16:24])  # the PNG's IHDR chunk comes first
    found = [{"label": labels[int(classes[i])], "score": float(scores[i]),
              "box": [float(v) for v in (max(0.0, boxes[i][1] * width), max(0.0, boxes[i][0] * height), min(width, boxes[i][3] * width), min(height, boxes[i][2] * height))]}
             for i in range(int(count))]
    return sorted(found, key=lambda d: -d["score"])


def surest_picture():
    """The shared picture whose top detection LiteRT is surest of (at least 0.53, clear of the
    detector's 0.5 threshold): its path and LiteRT's detections on it. Checks that need a picture
    with an object on it take it from here, not from what ../shared/README.md says a picture shows."""
    folder = os.path.join(ROOT, "fixtures-generated", "detect", "xnnpack")
    names = [n for n in sorted(os.listdir(folder)) if os.path.isfile(os.path.join(SHARED, "images", n + ".png"))]
    tops = [(litert_detections(n), n) for n in names]
    detections, name = max(((d, n) for d, n in tops if d and d[0]["score"] >= 0.53), key=lambda t: t[0][0]["score"])
    return os.path.join(SHARED, "images", name + ".png"), detections
