#!/usr/bin/env python3
"""The peer for YOLO detection: what a Python user writes with LiteRT and OpenCV, as Ultralytics'
own TFLite inference prepares and decodes (letterbox with gray 114 bars, centre boxes relative to
the input, class-aware greedy NMS at IoU 0.45), boxes mapped back to the picture's pixels.

Usage: peer_yolo.py MODEL PICTURE... [--threshold 0.25] [--resolver default|ref]
prints one JSON object per picture; `--resolver ref` runs TFLite's reference kernels.
"""
import argparse
import json

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def letterbox(rgb, width, height):
    h, w = rgb.shape[:2]
    s = min(width / w, height / h)
    iw, ih = max(1, round(w * s)), max(1, round(h * s))
    ox, oy = (width - iw) // 2, (height - ih) // 2
    canvas = np.full((height, width, 3), 114, np.uint8)
    canvas[oy:oy + ih, ox:ox + iw] = cv2.resize(rgb, (iw, ih), interpolation=cv2.INTER_LINEAR)
    return canvas, (iw / w, ih / h, ox, oy)


def detect(interpreter, path, threshold, iou=0.45):
    detail = interpreter.get_input_details()[0]
    _, height, width, _ = detail["shape"]
    rgb = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    canvas, (sx, sy, ox, oy) = letterbox(rgb, width, height)
    if detail["dtype"] == np.float32:
        value = canvas.astype(np.float32) / 255
    else:
        scale, zero = detail["quantization"]
        value = canvas if scale == 0 or abs(scale - 1 / 255) < 1e-6 and zero == 0 else np.clip(np.round(canvas / 255 / scale + zero), -128, 127)
        value = value.astype(detail["dtype"])
    interpreter.set_tensor(detail["index"], value[None])
    interpreter.invoke()
    out_detail = interpreter.get_output_details()[0]
    out = interpreter.get_tensor(out_detail["index"])[0]
    scale, zero = out_detail["quantization"]
    out = (out.astype(np.float32) - zero) * scale if scale else out.astype(np.float32)
    if out.shape[0] < out.shape[1]:  # YOLOv8/11: [4 + C, N]
        out = out.T
        boxes, scores = out[:, :4], out[:, 4:]
    else:  # YOLOv5: [N, 5 + C]
        boxes, scores = out[:, :4], out[:, 5:] * out[:, 4:5]
    classes = scores.argmax(1)
    best = scores[np.arange(len(scores)), classes]
    keep = best >= threshold
    boxes, best, classes = boxes[keep], best[keep], classes[keep]
    if boxes.size and boxes.max() > 1.5:
        boxes = boxes / np.array([width, height, width, height], np.float32)
    x0, y0 = (boxes[:, 0] - boxes[:, 2] / 2) * width, (boxes[:, 1] - boxes[:, 3] / 2) * height
    x1, y1 = (boxes[:, 0] + boxes[:, 2] / 2) * width, (boxes[:, 1] + boxes[:, 3] / 2) * height
    order, kept = np.argsort(-best, kind="stable"), []
    for i in order:
        ok = True
        for j in kept:
            if classes[i] != classes[j]:
                continue
            ih = max(0.0, min(y1[i], y1[j]) - max(y0[i], y0[j]))
            iw = max(0.0, min(x1[i], x1[j]) - max(x0[i], x0[j]))
            inter = ih * iw
            union = (y1[i] - y0[i]) * (x1[i] - x0[i]) + (y1[j] - y0[j]) * (x1[j] - x0[j]) - inter
            if union > 0 and inter / union > iou:
                ok = False
                break
        if ok:
            kept.append(i)
    h, w = rgb.shape[:2]
    detections = [{"class_id": int(classes[i]), "score": float(best[i]),
                   "box": {"xmin": float(np.clip((x0[i] - ox) / sx, 0, w)), "ymin": float(np.clip((y0[i] - oy) / sy, 0, h)),
                           "xmax": float(np.clip((x1[i] - ox) / sx, 0, w)), "ymax": float(np.clip((y1[i] - oy) / sy, 0, h))}}
                  for i in kept]
    return {"image": path, "width": w, "height": h, "detections": detections}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("pictures", nargs="+")
    parser.add_argument("--threshold", type=float, default=0.25)
    parser.add_argument("--resolver", choices=["default", "ref"], default="default")
    args = parser.parse_args()
    resolver = OpResolverType.BUILTIN_REF if args.resolver == "ref" else OpResolverType.AUTO
    interpreter = Interpreter(model_path=args.model, num_threads=2, experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    for picture in args.pictures:
        print(json.dumps(detect(interpreter, picture, args.threshold)))


if __name__ == "__main__":
    main()
