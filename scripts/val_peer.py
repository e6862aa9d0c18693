#!/usr/bin/env python3
"""The Python peer of `spotter val`: LiteRT + OpenCV running each model's standard recipe on COCO
pictures, scored by pycocotools.

    val_peer.py --model M --images DIR --annotations INSTANCES.json [--threads 2] [--save-json F] [--json]

SSD (TFLite detection post-process): RGB resized bilinearly to the input, the model's own outputs.
YOLO (Ultralytics exports, [1, 84, N] or [1, N, 85]): letterbox to the input with grey 114 as
Ultralytics does, confidence = best class score (YOLOv5: objectness x class score) >= 0.001,
class-wise NMS at IoU 0.7 (OpenCV), at most 300 per picture, boxes mapped back and clipped.
Prints pycocotools' summary (or one JSON object) with pictures per second."""
import argparse, contextlib, io, json, os, sys, time

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

COCO80 = ["person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light", "fire hydrant",
          "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe",
          "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat",
          "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl",
          "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
          "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone", "microwave",
          "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush"]


def quantize(image, detail):
    scale, zero = detail["quantization"]
    if detail["dtype"] == np.uint8 and abs(scale - 1 / 255) < 1e-6 and zero == 0:
        return image[None]
    if detail["dtype"] in (np.uint8, np.int8):
        info = np.iinfo(detail["dtype"])
        return np.clip(np.round(image.astype(np.float32) / 255 / scale) + zero, info.min, info.max).astype(detail["dtype"])[None]
    return (image.astype(np.float32) / 255)[None]


def dequantize(values, detail):
    scale, zero = detail["quantization"]
    return (values.astype(np.float32) - zero) * scale if scale else values.astype(np.float32)


class SSD:
    def __init__(self, interpreter, model):
        self.it = interpreter
        self.input = interpreter.get_input_details()[0]
        self.h, self.w = self.input["shape"][1:3]
        labelmap = os.path.join(os.path.dirname(model), "labelmap.txt")
        self.labels = [l.strip() for l in open(labelmap)]
        self.offset = 1 if self.labels[0] == "???" else 0
        self.outputs = interpreter.get_output_details()

    def __call__(self, bgr, threshold):
        height, width = bgr.shape[:2]
        rgb = cv2.cvtColor(cv2.resize(bgr, (self.w, self.h), interpolation=cv2.INTER_LINEAR), cv2.COLOR_BGR2RGB)
        self.it.set_tensor(self.input["index"], rgb[None] if self.input["dtype"] == np.uint8 else quantize(rgb, self.input))
        self.it.invoke()
        boxes, classes, scores, count = (self.it.get_tensor(o["index"]) for o in self.outputs[:4])
        found = []
        for i in range(int(count[0])):
            if scores[0, i] < threshold:
                continue
            ymin, xmin, ymax, xmax = np.clip(boxes[0, i], 0, 1)
            name = self.labels[int(classes[0, i]) + self.offset]
            found.append((name, float(scores[0, i]), [xmin * width, ymin * height, (xmax - xmin) * width, (ymax - ymin) * height]))
        return found


class YOLO:
    def __init__(self, interpreter, model):
        self.it = interpreter
        self.input = interpreter.get_input_details()[0]
        self.output = interpreter.get_output_details()[0]
        self.h, self.w = self.input["shape"][1:3]
        shape = self.output["shape"]
        self.v5 = shape[1] > shape[2]
        self.labels = COCO80

    def letterbox(self, bgr):
        height, width = bgr.shape[:2]
        r = min(self.h / height, self.w / width)
        new_w, new_h = int(round(width * r)), int(round(height * r))
        dw, dh = (self.w - new_w) / 2, (self.h - new_h) / 2
        if (width, height) != (new_w, new_h):
            bgr = cv2.resize(bgr, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
        top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
        left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
        bgr = cv2.copyMakeBorder(bgr, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), r, left, top

    def __call__(self, bgr, threshold):
        height, width = bgr.shape[:2]
        rgb, r, left, top = self.letterbox(bgr)
        self.it.set_tensor(self.input["index"], quantize(rgb, self.input))
        self.it.invoke()
        out = dequantize(self.it.get_tensor(self.output["index"])[0], self.output)
        if self.v5:
            objectness = out[:, 4]
            keep = objectness >= threshold
            out = out[keep]
            class_scores = out[:, 5:] * out[:, 4:5]
        else:
            out = out.T
            class_scores = out[:, 4:]
        classes = class_scores.argmax(1)
        scores = class_scores[np.arange(len(classes)), classes]
        keep = scores >= threshold
        boxes, scores, classes = out[keep, :4].copy(), scores[keep], classes[keep]
        if boxes.size and boxes.max() <= 1.5:
            boxes[:, [0, 2]] *= self.w
            boxes[:, [1, 3]] *= self.h
        xywh = np.stack([boxes[:, 0] - boxes[:, 2] / 2, boxes[:, 1] - boxes[:, 3] / 2, boxes[:, 2], boxes[:, 3]], 1)
        kept = cv2.dnn.NMSBoxesBatched(xywh.tolist(), scores.tolist(), classes.tolist(), threshold, 0.7) if len(scores) else []
        kept = sorted(np.array(kept).reshape(-1).tolist(), key=lambda i: -scores[i])[:300]
        found = []
        for i in kept:
            x, y, w, h = xywh[i]
            x1, y1 = np.clip((x - left) / r, 0, width), np.clip((y - top) / r, 0, height)
            x2, y2 = np.clip((x + w - left) / r, 0, width), np.clip((y + h - top) / r, 0, height)
            found.append((self.labels[int(classes[i])], float(scores[i]), [float(x1), float(y1), float(x2 - x1), float(y2 - y1)]))
        return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--images", required=True)
    parser.add_argument("--annotations", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=0.001)
    parser.add_argument("--save-json")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(args.annotations)
    interpreter = Interpreter(model_path=args.model, num_threads=args.threads)
    interpreter.allocate_tensors()
    outputs = interpreter.get_output_details()
    model = SSD(interpreter, args.model) if len(outputs) >= 4 else YOLO(interpreter, args.model)
    category = {c["name"]: c["id"] for c in gt.loadCats(gt.getCatIds())}
    results = []
    images = sorted(gt.getImgIds())
    detect_start = time.perf_counter()
    for image_id in images:
        info = gt.loadImgs(image_id)[0]
        bgr = cv2.imread(os.path.join(args.images, info["file_name"]), cv2.IMREAD_COLOR)
        for name, score, box in model(bgr, args.threshold):
            if name in category:
                results.append({"image_id": image_id, "category_id": category[name], "bbox": [float(v) for v in box], "score": score})
    detect_seconds = time.perf_counter() - detect_start
    eval_start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as text:
        evaluation = COCOeval(gt, gt.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    eval_seconds = time.perf_counter() - eval_start
    seconds = time.perf_counter() - start
    if args.save_json:
        with open(args.save_json, "w") as f:
            json.dump(results, f)
    keys = ["AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"]
    report = dict(zip(keys, map(float, evaluation.stats)), images=len(images), seconds=seconds,
                  images_per_second=len(images) / detect_seconds, evaluation_seconds=eval_seconds)
    if args.json:
        print(json.dumps(report))
    else:
        print(text.getvalue().strip())
        print(f"\n{len(images)} pictures, {len(results)} detections, {report['images_per_second']:.1f} pictures/s, {seconds:.1f} s in all")


if __name__ == "__main__":
    sys.exit(main())
