#!/usr/bin/env python3
"""LiteRT's raw outputs of the shared models beyond the SSD detector, for Spotter's kernel tests.

Writes, under OUTDIR (default: fixtures-generated/models/ at the repository root), for each model
that Spotter runs and each shared picture:

  MODEL/NAME/input.npy      the model input: the picture resized with OpenCV bilinear to the
                            input size, RGB, in the input's type
  MODEL/NAME/ref.npy        LiteRT BUILTIN_REF (reference kernels) output 0
  MODEL/NAME/xnnpack.npy    LiteRT's default (XNNPACK) output 0
  MODEL/peer-ref.jsonl      detections of the YOLO peer (scripts/peer_yolo.py: letterbox, LiteRT,
  MODEL/peer-xnnpack.jsonl  NMS) on every shared picture, threshold 0.25, with LiteRT's reference
                            kernels and with its default (XNNPACK) path
  mobilefacenet/FACE/...    input.npy, ref.npy, xnnpack.npy as above for the face photos of
                            ../shared/images/faces (input (p - 128) / 128, float32; hybrid int8
                            weights, so LiteRT's own two paths differ slightly)
  blazeface/FACE/...        input.npy (letterboxed with black bars, (p - 127.5) / 127.5), ref.npy and
                            xnnpack.npy (regressors [1, 896, 16]), ref-scores.npy and
                            xnnpack-scores.npy (logits [1, 896, 1]) for every face photo
  faces/peer.jsonl          the face recognition peer (scripts/peer_faces.py) on the face photos and
                            astronaut.png: boxes, keypoints, alignment transforms, embeddings;
  faces/crops/NAME-K.npy    and its aligned 112x112 crops (cv2.warpAffine)
  blazeface/peer-*.jsonl    detections of the face peer (scripts/peer_blazeface.py) on the face
                            photos and astronaut.png, threshold 0.5, both LiteRT paths

Spotter's outputs are never used here. Tool versions: ../shared/reference/requirements.txt.
"""
import argparse
import os
import subprocess
import sys

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODELS = {"yolov5n": os.path.join(SHARED, "models", "yolov5n", "yolov5n-int8.tflite"),
          "yolov8n": os.path.join(SHARED, "models", "yolov8n", "yolov8n_full_integer_quant.tflite"),
          # YOLO11's attention patterns (scripts/make_attention_yolo.py): full-integer and hybrid.
          "attention-yolo-int8": os.path.join(ROOT, "Tests", "Fixtures", "models", "attention-yolo", "attention-yolo-int8.tflite"),
          "attention-yolo-hybrid": os.path.join(ROOT, "Tests", "Fixtures", "models", "attention-yolo", "attention-yolo-hybrid.tflite")}
PICTURES = ["coffee", "astronaut"]
ALL_PICTURES = ["astronaut", "coffee", "chelsea", "camera", "page"]
FACES = sorted(os.listdir(os.path.join(SHARED, "images", "faces")))


def both_paths(model, value):
    """LiteRT's outputs for `value` on its reference kernels and its default path, by output width."""
    result = {}
    for kind, resolver in [("ref", OpResolverType.BUILTIN_REF), ("xnnpack", OpResolverType.AUTO)]:
        interpreter = Interpreter(model_path=model, experimental_op_resolver_type=resolver, num_threads=1)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], value)
        interpreter.invoke()
        result[kind] = {tuple(d["shape"])[-1]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}
    return result


def peer_lines(script, *arguments):
    """What a peer script prints on LiteRT's reference kernels and its default path."""
    return {kind: subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), *arguments, "--resolver", resolver],
                                 check=True, capture_output=True, text=True).stdout
            for resolver, kind in [("ref", "ref"), ("default", "xnnpack")]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--outdir", default=os.path.join(ROOT, "fixtures-generated", "models"))
    args = parser.parse_args()
    for model, path in MODELS.items():
        for picture in PICTURES:
            folder = os.path.join(args.outdir, model, picture)
            os.makedirs(folder, exist_ok=True)
            outputs = {}
            for kind, resolver in [("ref", OpResolverType.BUILTIN_REF), ("xnnpack", OpResolverType.AUTO)]:
                interpreter = Interpreter(model_path=path, experimental_op_resolver_type=resolver, num_threads=1)
                interpreter.allocate_tensors()
                detail = interpreter.get_input_details()[0]
                _, height, width, _ = detail["shape"]
                rgb = cv2.cvtColor(cv2.imread(os.path.join(SHARED, "images", picture + ".png")), cv2.COLOR_BGR2RGB)
                value = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_LINEAR)[None]
                if detail["dtype"] == np.float32:
                    value = value.astype(np.float32) / 255  # Ultralytics' float input: RGB 0..1
                value = value.astype(detail["dtype"])
                interpreter.set_tensor(detail["index"], value)
                interpreter.invoke()
                outputs[kind] = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
                np.save(os.path.join(folder, "input.npy"), value)
            for kind, value in outputs.items():
                np.save(os.path.join(folder, kind + ".npy"), value)
        pictures = [os.path.join(SHARED, "images", name + ".png") for name in ALL_PICTURES]
        for kind, lines in peer_lines("peer_yolo.py", path, "--threshold", "0.25", *pictures).items():
            with open(os.path.join(args.outdir, model, f"peer-{kind}.jsonl"), "w") as f:
                f.write(lines)
    embedder = os.path.join(SHARED, "models", "mobilefacenet", "mobile_face_net.tflite")
    for face in FACES:
        folder = os.path.join(args.outdir, "mobilefacenet", os.path.splitext(face)[0])
        os.makedirs(folder, exist_ok=True)
        rgb = cv2.cvtColor(cv2.imread(os.path.join(SHARED, "images", "faces", face)), cv2.COLOR_BGR2RGB)
        value = ((cv2.resize(rgb, (112, 112), interpolation=cv2.INTER_LINEAR).astype(np.float32) - 128) / 128)[None]
        np.save(os.path.join(folder, "input.npy"), value)
        for kind, outputs in both_paths(embedder, value).items():
            np.save(os.path.join(folder, kind + ".npy"), outputs[128])
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from peer_blazeface import letterbox
    faces = os.path.join(SHARED, "models", "blazeface-short-range", "face_detection_short_range.tflite")
    for face in FACES:
        folder = os.path.join(args.outdir, "blazeface", os.path.splitext(face)[0])
        os.makedirs(folder, exist_ok=True)
        rgb = cv2.cvtColor(cv2.imread(os.path.join(SHARED, "images", "faces", face)), cv2.COLOR_BGR2RGB)
        value = ((letterbox(rgb, 128, 128)[0].astype(np.float32) - 127.5) / 127.5)[None]
        np.save(os.path.join(folder, "input.npy"), value)
        for kind, outputs in both_paths(faces, value).items():
            np.save(os.path.join(folder, kind + ".npy"), outputs[16])
            np.save(os.path.join(folder, kind + "-scores.npy"), outputs[1])
    pictures = [os.path.join(SHARED, "images", "faces", face) for face in FACES] + [os.path.join(SHARED, "images", "astronaut.png")]
    for kind, lines in peer_lines("peer_blazeface.py", faces, *pictures).items():
        with open(os.path.join(args.outdir, "blazeface", f"peer-{kind}.jsonl"), "w") as f:
            f.write(lines)
    recognition = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "peer_faces.py"), "--crops",
                                  os.path.join(args.outdir, "faces", "crops")] + pictures, check=True, capture_output=True, text=True).stdout
    with open(os.path.join(args.outdir, "faces", "peer.jsonl"), "w") as f:
        f.write(recognition)
    print(f"wrote LiteRT outputs of {len(MODELS) + 2} model(s) on {len(PICTURES)} pictures and {len(FACES)} faces to {args.outdir}")


if __name__ == "__main__":
    main()
