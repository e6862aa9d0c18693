#!/usr/bin/env python3
"""Writes Tests/EvaluationTests/Fixtures/cocoeval-cases.json: hand-made and seeded random COCO box
evaluation cases, each with pycocotools' 12 summarize() numbers and per-category AP, for the
Swift evaluator's unit tests.

    ~/.cache/spotter-ref-venv/bin/python scripts/make_eval_fixtures.py

Made with pycocotools 2.0.11 and numpy (see scripts/requirements-fixtures.txt)."""
import contextlib, io, json, os, random, sys

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def evaluate(gt, dets):
    coco = COCO()
    coco.dataset = json.loads(json.dumps(gt))
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
        if not dets:
            return None
        res = coco.loadRes(json.loads(json.dumps(dets)))
        e = COCOeval(coco, res, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    per = {}
    for k, cat in enumerate(e.params.catIds):
        p = e.eval["precision"][:, :, k, 0, -1]
        per[str(cat)] = float(np.mean(p[p > -1])) if (p > -1).any() else -1.0
    return {"stats": [float(s) for s in e.stats], "per_category": per}


def dataset(images, objects, categories):
    return {"images": [{"id": i, "file_name": f"{i}.jpg", "width": 640, "height": 480} for i in images],
            "annotations": [dict(o, id=o.get("id", n + 1), area=o.get("area", o["bbox"][2] * o["bbox"][3]),
                                 iscrowd=o.get("iscrowd", 0)) for n, o in enumerate(objects)],
            "categories": [{"id": c, "name": f"class{c}"} for c in categories]}


def case(name, gt, dets):
    return {"name": name, "ground_truth": gt, "detections": dets, "pycocotools": evaluate(gt, dets)}


def hand_made():
    cases = []
    person = lambda img, box, **kw: dict(image_id=img, category_id=1, bbox=box, **kw)
    det = lambda img, box, score, cat=1: {"image_id": img, "category_id": cat, "bbox": box, "score": score}
    # A crowd region absorbs several detections; one real object beside it.
    cases.append(case("crowd region", dataset([1], [person(1, [10, 10, 200, 200], iscrowd=1, area=30000), person(1, [300, 50, 80, 160])], [1]),
                      [det(1, [20, 20, 50, 50], 0.9), det(1, [100, 100, 60, 60], 0.8), det(1, [302, 52, 78, 150], 0.7), det(1, [500, 300, 40, 40], 0.6)]))
    # One detection overlapping two objects: it takes the better one; the other is missed.
    cases.append(case("detection over two objects", dataset([1], [person(1, [100, 100, 100, 100]), person(1, [150, 100, 100, 100])], [1]),
                      [det(1, [140, 100, 100, 100], 0.9), det(1, [400, 400, 30, 30], 0.5)]))
    # Ties in score: the order given decides, as numpy's stable sort does.
    cases.append(case("ties in score", dataset([1, 2], [person(1, [0, 0, 50, 50]), person(2, [0, 0, 50, 50])], [1]),
                      [det(1, [200, 200, 50, 50], 0.5), det(1, [0, 0, 50, 50], 0.5), det(2, [0, 0, 50, 50], 0.5), det(2, [300, 0, 50, 50], 0.5)]))
    # Pictures without objects (false positives only) and pictures without detections (misses only).
    cases.append(case("empty pictures", dataset([1, 2, 3], [person(1, [10, 10, 100, 100]), person(3, [50, 50, 40, 40])], [1]),
                      [det(1, [12, 10, 100, 100], 0.8), det(2, [0, 0, 64, 64], 0.9)]))
    # A category with no objects anywhere (left out of the means), another with some.
    cases.append(case("category without objects", dataset([1], [person(1, [10, 10, 100, 100])], [1, 2]),
                      [det(1, [10, 10, 100, 100], 0.9), det(1, [10, 10, 100, 100], 0.8, cat=2)]))
    # Small, medium and large objects; detections outside the range matched to nothing are ignored.
    cases.append(case("area ranges", dataset([1], [person(1, [0, 0, 20, 20]), person(1, [100, 100, 60, 60]), person(1, [300, 100, 200, 200])], [1]),
                      [det(1, [0, 0, 20, 21], 0.9), det(1, [100, 100, 60, 55], 0.8), det(1, [300, 100, 190, 200], 0.7), det(1, [10, 400, 10, 10], 0.95)]))
    # More than 100 detections in one picture: only the best 100 count.
    many = [det(1, [i * 3, 0, 30, 30], round(1 - i / 300, 6)) for i in range(150)]
    cases.append(case("over 100 detections", dataset([1], [person(1, [i * 30, 0, 30, 30]) for i in range(20)] + [person(1, [447, 0, 30, 30])], [1]), many))
    return cases


def random_case(seed):
    rng = random.Random(seed)
    categories = sorted(rng.sample(range(1, 15), rng.randint(1, 5)))
    images = sorted(rng.sample(range(1, 1000), rng.randint(1, 12)))
    objects, dets = [], []
    for img in images:
        for _ in range(rng.choice([0, 0, 1, 2, 4, 8])):
            w, h = rng.choice([rng.uniform(4, 30), rng.uniform(30, 100), rng.uniform(100, 400)]), rng.uniform(4, 300)
            x, y = rng.uniform(0, 600), rng.uniform(0, 450)
            cat = rng.choice(categories)
            crowd = rng.random() < 0.05
            objects.append(dict(image_id=img, category_id=cat, bbox=[x, y, w, h], iscrowd=int(crowd),
                                area=w * h * rng.uniform(0.4, 1.0)))
            for _ in range(rng.choice([0, 1, 1, 2, 3])):
                jitter = lambda v, s: v + rng.gauss(0, s)
                box = [jitter(x, w * 0.15), jitter(y, h * 0.15), max(1, jitter(w, w * 0.15)), max(1, jitter(h, h * 0.15))]
                # SSD-like scores: steps of 1/256, so ties are frequent.
                score = rng.randint(1, 256) / 256 if rng.random() < 0.7 else rng.random()
                dets.append({"image_id": img, "category_id": rng.choice(categories) if rng.random() < 0.1 else cat, "bbox": box, "score": score})
        for _ in range(rng.choice([0, 1, 3, 20])):
            dets.append({"image_id": img, "category_id": rng.choice(categories + [99]),
                         "bbox": [rng.uniform(0, 600), rng.uniform(0, 450), rng.uniform(2, 200), rng.uniform(2, 200)],
                         "score": rng.randint(1, 256) / 256})
    rng.shuffle(dets)
    if not dets:
        dets.append({"image_id": images[0], "category_id": categories[0], "bbox": [0, 0, 10, 10], "score": 0.5})
    return case(f"random {seed}", dataset(images, objects, categories), dets)


def main():
    cases = hand_made() + [random_case(seed) for seed in range(40)]
    out = os.path.join(os.path.dirname(__file__), "..", "Tests", "EvaluationTests", "Fixtures", "cocoeval-cases.json")
    with open(out, "w") as f:
        json.dump({"made_by": "scripts/make_eval_fixtures.py (pycocotools 2.0.11)", "cases": cases}, f, separators=(",", ":"))
    print(f"{len(cases)} cases -> {os.path.normpath(out)} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
