#!/usr/bin/env python3
"""`spotter val` against its Python peer (scripts/val_peer.py: LiteRT + OpenCV + pycocotools), side
by side in one run, and the evaluator alone against pycocotools (and faster-coco-eval when
installed) on 5,120 pictures' detections.

    bench_val.py SPOTTER [--repeat 3] [--threads 2] [--models ssd,yolov8n,yolov5n]

Whole process, 128 COCO pictures (../shared/coco128): median wall time of --repeat runs each,
alternating, and the ratio of pictures per second. Evaluator alone: coco128's annotations and
Spotter's saved YOLOv8n detections repeated 40 times under new picture ids; pycocotools' time is
loadRes + evaluate + accumulate + summarize in process, Spotter's the `evaluation_seconds` it reports
(matching, accumulation, summary; reading the JSON is not counted on either side)."""
import argparse, contextlib, io, json, os, statistics, subprocess, sys, tempfile, time

# The shared data and models, as check_val.py names them.
from check_val import ANNOTATIONS, IMAGES, MODELS, ROOT, SHARED


def timed(command):
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def whole_process(spotter, repeat, threads, names):
    print(f"Whole process on {len(os.listdir(IMAGES))} pictures, {threads} threads, median of {repeat} (wall seconds):")
    print(f"{'model':10} {'peer s':>7} {'spotter s':>9} {'ratio':>6}   {'peer AP':>7} {'spotter AP':>10}")
    for name in names:
        model = MODELS[name]
        peer_runs, ours_runs = [], []
        for _ in range(repeat):
            peer_runs.append(timed([sys.executable, os.path.join(ROOT, "scripts", "val_peer.py"), "--model", model, "--images", IMAGES,
                                    "--annotations", ANNOTATIONS, "--threads", str(threads), "--json"]))
            ours_runs.append(timed([spotter, "val", "--model", model, "--images", IMAGES, "--annotations", ANNOTATIONS,
                                    "--threads", str(threads), "--json"]))
        peer = statistics.median(s for s, _ in peer_runs)
        ours = statistics.median(s for s, _ in ours_runs)
        print(f"{name:10} {peer:7.2f} {ours:9.2f} {peer / ours:5.2f}x   {peer_runs[0][1]['AP']:7.3f} {ours_runs[0][1]['AP']:10.3f}", flush=True)


def evaluator_alone(spotter, repeat):
    with open(ANNOTATIONS) as f:
        base = json.load(f)
    work = tempfile.mkdtemp(prefix="spotter-bench-val-")
    detections_file = os.path.join(work, "base.json")
    subprocess.run([spotter, "val", "--model", MODELS["yolov8n"], "--images", IMAGES, "--annotations", ANNOTATIONS,
                    "--save-json", detections_file, "--json"], check=True, capture_output=True)
    with open(detections_file) as f:
        base_detections = json.load(f)
    copies = 40
    step = max(i["id"] for i in base["images"]) + 1
    big = {"images": [], "annotations": [], "categories": base["categories"]}
    detections = []
    for n in range(copies):
        big["images"] += [dict(i, id=i["id"] + n * step) for i in base["images"]]
        big["annotations"] += [dict(a, id=a["id"] + n * 10_000_000, image_id=a["image_id"] + n * step) for a in base["annotations"]]
        detections += [dict(d, image_id=d["image_id"] + n * step) for d in base_detections]
    big_annotations, big_detections = os.path.join(work, "annotations.json"), os.path.join(work, "detections.json")
    with open(big_annotations, "w") as f:
        json.dump(big, f)
    with open(big_detections, "w") as f:
        json.dump(detections, f)
    print(f"\nEvaluator alone: {len(big['images'])} pictures, {len(big['annotations'])} objects, {len(detections)} detections, best of {repeat}:")
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(big_annotations)
    pyco = []
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            e = COCOeval(gt, gt.loadRes(big_detections), "bbox")
            e.evaluate(); e.accumulate(); e.summarize()
        pyco.append(time.perf_counter() - start)
    rows = [("pycocotools 2.0.11", min(pyco), e.stats[0])]
    try:
        from faster_coco_eval import COCO as FCOCO, COCOeval_faster
        with contextlib.redirect_stdout(io.StringIO()):
            fgt = FCOCO(big_annotations)
        fast = []
        for _ in range(repeat):
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                fe = COCOeval_faster(fgt, fgt.loadRes(big_detections), "bbox")
                fe.evaluate(); fe.accumulate(); fe.summarize()
            fast.append(time.perf_counter() - start)
        rows.append(("faster-coco-eval", min(fast), fe.stats[0]))
    except ImportError:
        pass
    ours = [timed([spotter, "val", "--annotations", big_annotations, "--detections", big_detections, "--json"]) for _ in range(repeat)]
    ours_seconds = min(r["evaluation_seconds"] for _, r in ours)
    rows.append(("spotter", ours_seconds, ours[0][1]["AP"]))
    for name, seconds, ap in rows:
        print(f"  {name:20} {seconds:7.3f} s  AP {ap:.4f}  ({rows[0][1] / seconds:5.1f}x pycocotools' speed)")
    print(f"  spotter whole process (reading both JSON files too): {min(s for s, _ in ours):.2f} s")


def model_table(spotter):
    """The README's model table: AP, AP50 and milliseconds per picture (detection loop: decoding,
    preparing, inference, decoding the outputs) at 1 and 2 threads."""
    print(f"\n| model | AP@[.5:.95] | AP50 | ms per picture, 1 thread | 2 threads |")
    print("|---|---|---|---|---|")
    for name, model in MODELS.items():
        rows = {}
        for threads in (1, 2):
            _, report = timed([spotter, "val", "--model", model, "--images", IMAGES, "--annotations", ANNOTATIONS,
                               "--threads", str(threads), "--json"])
            rows[threads] = report
        print(f"| `{os.path.relpath(model, os.path.join(SHARED, 'models'))}` | {rows[1]['AP']:.3f} | {rows[1]['AP50']:.3f} | "
              f"{1000 / rows[1]['images_per_second']:.1f} | {1000 / rows[2]['images_per_second']:.1f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", default="ssd,yolov8n,yolov5n")
    parser.add_argument("--evaluator-only", action="store_true")
    parser.add_argument("--table", action="store_true", help="print the README's model table only")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs")
    if args.table:
        model_table(args.spotter)
        return
    if not args.evaluator_only:
        whole_process(args.spotter, args.repeat, args.threads, args.models.split(","))
    evaluator_alone(args.spotter, args.repeat)


if __name__ == "__main__":
    main()
