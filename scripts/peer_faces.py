#!/usr/bin/env python3
"""The peer for face recognition, as the seed app does it in Python with LiteRT and OpenCV: BlazeFace
finds faces and keypoints (scripts/peer_blazeface.py), then finds each face's keypoints again on a
square region 2.5 times the face (cv2.warpAffine to 256x256, black beyond the picture; the detection
nearest the region's centre), a similarity transform (Umeyama's least
squares, as scikit-image's SimilarityTransform) maps the eyes, nose tip and mouth centre onto
ArcFace's 112x112 template, cv2.warpAffine (bilinear, black border) cuts the aligned crop, and
MobileFaceNet embeds it ((p - 128) / 128 in, 128 unit-length floats out).

Usage: peer_faces.py PICTURE... [--crops DIR] [--unaligned] [--single-pass] [--threads N]
prints one JSON object per picture: faces with box, score, keypoints, the 2x3 transform and the
embedding; `--crops DIR` saves each aligned crop as DIR/NAME-K.npy (uint8 RGB 112x112x3);
`--unaligned` embeds a square crop of the box instead (to measure what alignment is worth);
`--single-pass` keeps the first pass's keypoints.
"""
import argparse
import json
import os
import sys

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_blazeface import detect, detect_rgb  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(os.path.dirname(ROOT), "shared", "models")
# ArcFace's template: eye on the picture's left, the other eye, nose tip, mouth centre (the mean of
# its two mouth corners), in pixels of the 112x112 crop.
TEMPLATE = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [56.1396, 92.2848]], np.float64)


def similarity(src, dst):
    """Umeyama (1991): the rotation, uniform scale and translation that best map src onto dst."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    s, d = src - mu_s, dst - mu_d
    cov = d.T @ s / len(src)
    u, sig, vt = np.linalg.svd(cov)
    sign = np.ones(2)
    if np.linalg.det(cov) < 0:
        sign[1] = -1
    rotation = u @ np.diag(sign) @ vt
    scale = (sig * sign).sum() / s.var(0).sum()
    shift = mu_d - scale * rotation @ mu_s
    return np.hstack([scale * rotation, shift[:, None]])


def refine(finder, rgb, box, size=256):
    """The keypoints found again on a square region 2.5 times the face around its centre."""
    side = 2.5 * max(box["xmax"] - box["xmin"], box["ymax"] - box["ymin"])
    scale, centre = size / side, size / 2
    cx, cy = (box["xmin"] + box["xmax"]) / 2, (box["ymin"] + box["ymax"]) / 2
    to_region = np.array([[scale, 0, centre - cx * scale], [0, scale, centre - cy * scale]])
    region = cv2.warpAffine(rgb, to_region, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    again = detect_rgb(finder, region, 0.5)["detections"]
    if not again:
        return None
    def off_centre(d):
        b = d["box"]
        return ((b["xmin"] + b["xmax"]) / 2 - centre) ** 2 + ((b["ymin"] + b["ymax"]) / 2 - centre) ** 2
    nearest = min(again, key=off_centre)
    return [[(x - to_region[0, 2]) / scale, (y - to_region[1, 2]) / scale] for x, y in nearest["keypoints"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pictures", nargs="+")
    parser.add_argument("--crops")
    parser.add_argument("--unaligned", action="store_true")
    parser.add_argument("--single-pass", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    finder = Interpreter(model_path=os.path.join(MODELS, "blazeface-short-range", "face_detection_short_range.tflite"), num_threads=args.threads)
    finder.allocate_tensors()
    embedder = Interpreter(model_path=os.path.join(MODELS, "mobilefacenet", "mobile_face_net.tflite"), num_threads=args.threads)
    embedder.allocate_tensors()
    for path in args.pictures:
        found = detect(finder, path, 0.5)
        rgb = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        faces = []
        for k, face in enumerate(found["detections"]):
            refined = None if args.single_pass else refine(finder, rgb, face["box"])
            if refined:
                face = {**face, "keypoints": refined}
            points = np.array(face["keypoints"][:4], np.float64)
            if args.unaligned:
                b = face["box"]
                side = max(b["xmax"] - b["xmin"], b["ymax"] - b["ymin"])
                cx, cy = (b["xmin"] + b["xmax"]) / 2, (b["ymin"] + b["ymax"]) / 2
                matrix = np.array([[112 / side, 0, 56 - cx * 112 / side], [0, 112 / side, 56 - cy * 112 / side]])
            else:
                matrix = similarity(points, TEMPLATE)
            crop = cv2.warpAffine(rgb, matrix, (112, 112), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            if args.crops:
                os.makedirs(args.crops, exist_ok=True)
                np.save(os.path.join(args.crops, f"{os.path.splitext(os.path.basename(path))[0]}-{k}.npy"), crop)
            embedder.set_tensor(embedder.get_input_details()[0]["index"], ((crop.astype(np.float32) - 128) / 128)[None])
            embedder.invoke()
            embedding = embedder.get_tensor(embedder.get_output_details()[0]["index"])[0]
            faces.append({**face, "transform": matrix.tolist(), "embedding": [float(v) for v in embedding]})
        print(json.dumps({"image": path, "width": found["width"], "height": found["height"], "faces": faces}))


if __name__ == "__main__":
    main()
