#!/usr/bin/env python3
"""Checks `spotter val` against pycocotools and against the Python peer (scripts/val_peer.py).

    check_val.py SPOTTER [--models ssd,yolov8n,yolov5n] [--skip-peer]

For each model on ../shared/coco128: the 12 numbers Spotter prints equal pycocotools' evaluation of
the detections Spotter saved (within 1e-4), and Spotter's AP@[.5:.95] is at least the peer's minus
0.01 (printed side by side). Then bad input: annotations that are not COCO, pictures missing on
disk (named, the rest evaluated and equal to pycocotools on those, exit status 1), a model whose
labels do not map, and --detections scoring another tool's results file. Exit status 1 on any
failure."""
import argparse, contextlib, io, json, os, shutil, subprocess, sys, tempfile

from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
COCO128 = os.path.join(SHARED, "coco128")
ANNOTATIONS = os.path.join(COCO128, "annotations", "instances_train2017.json")
IMAGES = os.path.join(COCO128, "train2017")
MODELS = {
    "ssd": os.path.join(SHARED, "models", "coco-ssd-mobilenet-v1", "detect.tflite"),
    "yolov8n": os.path.join(SHARED, "models", "yolov8n", "yolov8n_full_integer_quant.tflite"),
    "yolov5n": os.path.join(SHARED, "models", "yolov5n", "yolov5n-int8.tflite"),
}
KEYS = ["AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"]
failures = []
checks = 0


def check(condition, message):
    global checks
    checks += 1
    print(("ok   " if condition else "FAIL ") + message, flush=True)
    if not condition:
        failures.append(message)


def pycocotools(annotations, detections_file, image_ids=None):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(annotations)
        with open(detections_file) as f:
            detections = json.load(f)
        e = COCOeval(gt, gt.loadRes(detections), "bbox")
        if image_ids is not None:
            e.params.imgIds = sorted(image_ids)
        e.evaluate(); e.accumulate(); e.summarize()
    return list(map(float, e.stats))


def spotter_val(spotter, *arguments):
    done = subprocess.run([spotter, "val", *arguments], capture_output=True, text=True)
    report = None
    if done.stdout.strip():
        try:
            report = json.loads(done.stdout.strip().splitlines()[-1])
        except json.JSONDecodeError:
            pass
    return done, report


def listed_images():
    """The pictures the annotations list, by id."""
    with open(ANNOTATIONS) as f:
        return sorted(json.load(f)["images"], key=lambda i: i["id"])


def compare(name, report, expected):
    worst = max(abs(report[k] - v) for k, v in zip(KEYS, expected))
    check(worst < 1e-4, f"{name}: the 12 numbers equal pycocotools' on the saved detections (largest difference {worst:.2e})")


def models(spotter, names, skip_peer, work):
    print(f"{'model':8} {'spotter AP':>10} {'peer AP':>8} {'spotter AP50':>12} {'peer AP50':>9}")
    for name in names:
        saved = os.path.join(work, f"{name}.json")
        done, report = spotter_val(spotter, "--model", MODELS[name], "--images", IMAGES, "--annotations", ANNOTATIONS,
                                   "--save-json", saved, "--json")
        check(done.returncode == 0 and report is not None, f"{name}: spotter val ran ({done.stderr.strip()[-300:]})")
        if report is None:
            continue
        compare(name, report, pycocotools(ANNOTATIONS, saved))
        check(report["images"] == len(listed_images()), f"{name}: every picture evaluated ({report['images']} of {len(listed_images())})")
        if skip_peer:
            continue
        peer = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "val_peer.py"), "--model", MODELS[name], "--images", IMAGES,
                               "--annotations", ANNOTATIONS, "--json"], capture_output=True, text=True)
        peer_report = json.loads(peer.stdout.strip().splitlines()[-1])
        print(f"{name:8} {report['AP']:10.4f} {peer_report['AP']:8.4f} {report['AP50']:12.4f} {peer_report['AP50']:9.4f}")
        check(report["AP"] >= peer_report["AP"] - 0.01, f"{name}: AP@[.5:.95] {report['AP']:.4f} is at least the peer's {peer_report['AP']:.4f} - 0.01")


def bad_input(spotter, work):
    model = MODELS["ssd"]
    # Not COCO: a results list, a truncated file, an object on an unlisted picture.
    cases = {
        "results.json": ("[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [0, 0, 1, 1], \"score\": 0.5}]", "not COCO instances JSON"),
        "truncated.json": (open(ANNOTATIONS).read()[:5000], "not COCO instances JSON"),
        "stray.json": (json.dumps({"images": [{"id": 1, "file_name": "a.jpg"}], "categories": [{"id": 1, "name": "person"}],
                                   "annotations": [{"id": 1, "image_id": 7, "category_id": 1, "bbox": [0, 0, 5, 5], "area": 25}]}), "picture 7"),
    }
    for file, (text, expected) in cases.items():
        path = os.path.join(work, file)
        with open(path, "w") as f:
            f.write(text)
        done, _ = spotter_val(spotter, "--model", model, "--images", IMAGES, "--annotations", path)
        check(done.returncode != 0 and expected in done.stderr and "Error" in done.stderr,
              f"annotations {file}: refused, saying {expected!r} ({done.stderr.strip()[:200]})")
    # Missing pictures: a copy of coco128 without 5 of them.
    folder = os.path.join(work, "pictures")
    shutil.copytree(IMAGES, folder)
    images = listed_images()
    gone = images[3::max(1, len(images) // 5)][:5]
    for image in gone:
        os.remove(os.path.join(folder, image["file_name"]))
    # One more that is not a picture.
    broken = next(i for i in images[1:] if i not in gone)
    with open(os.path.join(folder, broken["file_name"]), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 not really a jpeg")
    saved = os.path.join(work, "partial.json")
    done, report = spotter_val(spotter, "--model", model, "--images", folder, "--annotations", ANNOTATIONS, "--save-json", saved, "--json")
    check(done.returncode == 1, f"missing pictures: exit status 1 ({done.returncode})")
    named = all(image["file_name"] in done.stderr for image in gone + [broken])
    missing, left = len(gone) + 1, len(images) - len(gone) - 1
    check(named and f"{missing} of the {len(images)} pictures" in done.stderr, f"missing pictures: each named and counted ({done.stderr.strip()[-200:]})")
    if report:
        check(report["images"] == left and report["missing"] == missing,
              f"missing pictures: the other {left} evaluated ({report['images']}, {report['missing']})")
        kept = [i["id"] for i in images if i not in gone and i is not broken]
        compare("missing pictures", report, pycocotools(ANNOTATIONS, saved, kept))
    else:
        check(False, "missing pictures: a report was printed")
    # Labels that do not map: BlazeFace's "face", and a labels file with a stranger's names.
    face = os.path.join(SHARED, "models", "blazeface-short-range")
    face_model = next((os.path.join(face, f) for f in sorted(os.listdir(face)) if f.endswith(".tflite")), None)
    if face_model:
        done, _ = spotter_val(spotter, "--model", face_model, "--images", IMAGES, "--annotations", ANNOTATIONS)
        check(done.returncode != 0 and "face" in done.stderr and "name no category" in done.stderr,
              f"BlazeFace: its label \"face\" maps to no category, said clearly ({done.stderr.strip()[:200]})")
    labels = os.path.join(work, "labels.txt")
    with open(labels, "w") as f:
        f.write("???\n" + "\n".join(["human", "bike"] + [f"thing{i}" for i in range(88)]) + "\n")
    done, _ = spotter_val(spotter, "--model", model, "--labels", labels, "--images", IMAGES, "--annotations", ANNOTATIONS)
    check(done.returncode != 0 and "human" in done.stderr and "--labels" in done.stderr,
          f"labels that do not map: named, with what to do ({done.stderr.strip()[:200]})")
    # Another tool's results: the peer-style file of the missing-pictures run, scored alone.
    done, report = spotter_val(spotter, "--annotations", ANNOTATIONS, "--detections", saved, "--json")
    check(done.returncode == 0 and report is not None, f"--detections: scored ({done.stderr.strip()[:200]})")
    if report:
        compare("--detections", report, pycocotools(ANNOTATIONS, saved))
    # The output never replaces the annotations.
    before = open(ANNOTATIONS, "rb").read()
    copy = os.path.join(work, "copy.json")
    shutil.copy(ANNOTATIONS, copy)
    done, _ = spotter_val(spotter, "--model", model, "--images", IMAGES, "--annotations", copy, "--save-json", copy)
    check(done.returncode != 0 and open(copy, "rb").read() == before, "--save-json onto the annotations: refused, the file unchanged")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--models", default="ssd,yolov8n,yolov5n")
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spotter-check-val-")
    try:
        models(os.path.abspath(args.spotter), args.models.split(","), args.skip_peer, work)
        bad_input(os.path.abspath(args.spotter), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{checks - len(failures)} of {checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
