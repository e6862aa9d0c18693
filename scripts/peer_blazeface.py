#!/usr/bin/env python3
"""The peer for face detection: what MediaPipe's face detector graph does, in Python with LiteRT and
OpenCV: letterbox to the model input with black bars, values in [-1, 1], anchors from MediaPipe's
SSD anchor options for the short-range model, boxes and six keypoints decoded relative to them,
sigmoid scores, weighted NMS at IoU 0.3; boxes and keypoints mapped back to the picture's pixels.

Usage: peer_blazeface.py MODEL PICTURE... [--threshold 0.5] [--resolver default|ref]
prints one JSON object per picture; `--resolver ref` runs TFLite's reference kernels.
"""
import argparse
import json

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def anchors(width, height, strides=(8, 16, 16, 16)):
    """MediaPipe's SsdAnchorsCalculator with fixed anchor size: one aspect ratio plus the
    interpolated one per layer, layers of equal stride on one grid."""
    centres, layer = [], 0
    while layer < len(strides):
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            last += 1
        per_cell = 2 * (last - layer)
        rows, cols = -(-height // strides[layer]), -(-width // strides[layer])
        for y in range(rows):
            for x in range(cols):
                centres += [((x + 0.5) / cols, (y + 0.5) / rows)] * per_cell
        layer = last
    return np.array(centres, np.float32)


def letterbox(rgb, width, height):
    h, w = rgb.shape[:2]
    s = min(width / w, height / h)
    iw, ih = max(1, round(w * s)), max(1, round(h * s))
    ox, oy = (width - iw) // 2, (height - ih) // 2
    canvas = np.zeros((height, width, 3), np.uint8)
    canvas[oy:oy + ih, ox:ox + iw] = cv2.resize(rgb, (iw, ih), interpolation=cv2.INTER_LINEAR)
    return canvas, (iw / w, ih / h, ox, oy)


def iou(a, b):
    ih = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iw = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ih * iw
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def weighted_nms(boxes, keypoints, scores, threshold=0.3):
    """MediaPipe's WEIGHTED non-maximum suppression: each group's box and keypoints are the
    score-weighted mean, its score the best one's."""
    remaining = list(np.argsort(-scores, kind="stable"))
    out = []
    while remaining:
        best = remaining[0]
        group = [i for i in remaining if i == best or iou(boxes[best], boxes[i]) > threshold]
        remaining = [i for i in remaining if i not in group]
        w = scores[group][:, None]
        out.append(((boxes[group] * w).sum(0) / w.sum(), (keypoints[group] * w[:, :, None]).sum(0) / w.sum(), scores[best]))
    return out


def detect(interpreter, path, threshold):
    rgb = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    return {"image": path, **detect_rgb(interpreter, rgb, threshold)}


def detect_rgb(interpreter, rgb, threshold):
    detail = interpreter.get_input_details()[0]
    _, height, width, _ = detail["shape"]
    canvas, (sx, sy, ox, oy) = letterbox(rgb, width, height)
    interpreter.set_tensor(detail["index"], ((canvas.astype(np.float32) - 127.5) / 127.5)[None])
    interpreter.invoke()
    outputs = {tuple(d["shape"])[-1]: interpreter.get_tensor(d["index"])[0] for d in interpreter.get_output_details()}
    raw, logits = outputs[16], outputs[1][:, 0]
    scores = 1 / (1 + np.exp(-np.clip(logits, -100, 100)))
    centres = anchors(width, height)
    keep = scores >= threshold
    raw, scores, centres = raw[keep], scores[keep], centres[keep]
    cx, cy = raw[:, 0] / width + centres[:, 0], raw[:, 1] / height + centres[:, 1]
    w, h = raw[:, 2] / width, raw[:, 3] / height
    boxes = np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], 1)
    keypoints = np.stack([raw[:, 4::2] / width + centres[:, :1], raw[:, 5::2] / height + centres[:, 1:]], 2)
    ih, iw = rgb.shape[:2]

    def to_picture(x, y):
        return (x * width - ox) / sx, (y * height - oy) / sy

    detections = []
    for box, points, score in weighted_nms(boxes, keypoints, scores):
        x0, y0 = to_picture(box[1], box[0])
        x1, y1 = to_picture(box[3], box[2])
        detections.append({"label": "face", "score": float(score),
                           "box": {"xmin": float(np.clip(x0, 0, iw)), "ymin": float(np.clip(y0, 0, ih)),
                                   "xmax": float(np.clip(x1, 0, iw)), "ymax": float(np.clip(y1, 0, ih))},
                           "keypoints": [[float(v) for v in to_picture(*p)] for p in points]})
    return {"width": iw, "height": ih, "detections": detections}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("pictures", nargs="+")
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--resolver", choices=["default", "ref"], default="default")
    args = parser.parse_args()
    resolver = OpResolverType.BUILTIN_REF if args.resolver == "ref" else OpResolverType.AUTO
    interpreter = Interpreter(model_path=args.model, num_threads=2, experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    for picture in args.pictures:
        print(json.dumps(detect(interpreter, picture, args.threshold)))


if __name__ == "__main__":
    main()
