#!/usr/bin/env python3
"""Expected outputs from LiteRT (TensorFlow Lite's own runtime) for Spotter's tests.

Writes, under OUTDIR (default: fixtures-generated/ at the repository root):

  detect/inputs/NAME.npy       300x300x3 uint8 RGB inputs: the shared PNG images and frames of the
                               shared videos, resized with OpenCV bilinear as the peer pipeline does
  detect/ref/NAME/*.npy        LiteRT BUILTIN_REF (reference kernels) results: the two predictor
                               tensors that feed the post-process op (Squeeze, convert_scores) and
                               the four post-processed outputs
  detect/xnnpack/NAME/*.npy    the same from LiteRT's default XNNPACK path
  detect/halves/NAME.npy       the shared images (RGB) at exactly half their size, cropped to even
                               sizes first, with OpenCV bilinear (OpenCV takes its 2x2 mean path)
  golden-inputs/one-by-one-person-detection/FRAME.npy
                               the 300x300 inputs behind ../shared/reference/golden (every 10th
                               frame), dumped by the peer's own golden.py and checked against the
                               golden files' input_sha1

Spotter's outputs are never used here. Tool versions: ../shared/reference/requirements.txt
(ai-edge-litert 2.3.0, opencv-python-headless 5.0.0.93, numpy 2.4.6).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODEL = os.path.join(SHARED, "models", "coco-ssd-mobilenet-v1", "detect.tflite")
PREDICTORS = ["Squeeze", "convert_scores"]


def to_input(bgr):
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    return cv2.resize(rgb, (300, 300), interpolation=cv2.INTER_LINEAR).astype(np.uint8)


def pictures():
    """The shared pictures (../shared/images/*.png) by name without extension, sorted."""
    folder = os.path.join(SHARED, "images")
    return sorted(name[:-4] for name in os.listdir(folder) if name.endswith(".png") and os.path.isfile(os.path.join(folder, name)))


def inputs():
    for name in pictures():
        image = cv2.imread(os.path.join(SHARED, "images", name + ".png"), cv2.IMREAD_COLOR)
        yield name, to_input(image)
    videos = {
        "one-by-one-person-detection.mp4": [0, 70, 150, 300, 450, 600, 760, 900, 1050, 1200, 1390],
        "asl-walk.mkv": [0, 30, 60, 85],
        "asl-again.mkv": [0, 40, 80],
    }
    for video, frames in videos.items():
        capture = cv2.VideoCapture(os.path.join(SHARED, "videos", video))
        index, wanted = 0, set(frames)
        while wanted:
            ok, frame = capture.read()
            if not ok:
                break
            if index in wanted:
                wanted.discard(index)
                yield f"{video.split('.')[0]}-f{index:04d}", to_input(frame)
            index += 1
        capture.release()


def run(resolver, data):
    kwargs = {"experimental_preserve_all_tensors": True}
    if resolver is not None:
        kwargs["experimental_op_resolver_type"] = resolver
    interpreter = Interpreter(model_path=MODEL, num_threads=1, **kwargs)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], data[None])
    interpreter.invoke()
    by_name = {d["name"]: d["index"] for d in interpreter.get_tensor_details()}
    results = {name: interpreter.get_tensor(by_name[name]) for name in PREDICTORS}
    for detail in interpreter.get_output_details():
        results[detail["name"]] = interpreter.get_tensor(detail["index"])
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outdir", default=os.path.join(ROOT, "fixtures-generated"))
    args = parser.parse_args()
    base = os.path.join(args.outdir, "detect")
    os.makedirs(os.path.join(base, "inputs"), exist_ok=True)
    count = 0
    for name, data in inputs():
        np.save(os.path.join(base, "inputs", name + ".npy"), data)
        for label, resolver in [("ref", OpResolverType.BUILTIN_REF), ("xnnpack", None)]:
            folder = os.path.join(base, label, name)
            os.makedirs(folder, exist_ok=True)
            for tensor, value in run(resolver, data).items():
                np.save(os.path.join(folder, tensor.replace(":", "_") + ".npy"), value)
        count += 1
    print(f"wrote {count} inputs with LiteRT reference and XNNPACK outputs to {base}")
    if count < 20:
        sys.exit("expected at least 20 inputs; are ../shared/images and ../shared/videos complete?")
    os.makedirs(os.path.join(base, "halves"), exist_ok=True)
    for name in pictures():
        rgb = cv2.cvtColor(cv2.imread(os.path.join(SHARED, "images", name + ".png"), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        rgb = rgb[:rgb.shape[0] // 2 * 2, :rgb.shape[1] // 2 * 2]
        half = cv2.resize(rgb, (rgb.shape[1] // 2, rgb.shape[0] // 2), interpolation=cv2.INTER_LINEAR)
        np.save(os.path.join(base, "halves", name + ".npy"), half.astype(np.uint8))
    dump_golden_inputs(args.outdir)


def dump_golden_inputs(outdir):
    reference = os.path.join(SHARED, "reference")
    video = "one-by-one-person-detection"
    inputs = os.path.join(outdir, "golden-inputs")
    subprocess.run([sys.executable, os.path.join(reference, "golden.py"), os.path.join(SHARED, "videos", video + ".mp4"),
                    "--outdir", os.path.join(outdir, "golden-run"), "--dump-inputs", inputs],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    golden = os.path.join(reference, "golden", "litert-xnnpack", video + ".jsonl")
    checked = 0
    for line in open(golden):
        entry = json.loads(line)
        path = os.path.join(inputs, video, f"{entry['frame']}.npy")
        if not os.path.exists(path):
            path = os.path.join(inputs, video, f"{entry['frame']:06d}.npy")
        data = np.load(path)
        if hashlib.sha1(np.ascontiguousarray(data).tobytes()).hexdigest() != entry["input_sha1"]:
            sys.exit(f"{path} does not match the golden input_sha1 of frame {entry['frame']}")
        checked += 1
    print(f"dumped {checked} golden inputs to {inputs}, each matching its input_sha1")


if __name__ == "__main__":
    main()
