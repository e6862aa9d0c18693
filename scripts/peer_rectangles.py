#!/usr/bin/env python3
"""The OpenCV peer for rectangle detection: the classic recipe (grey, Gaussian blur, Canny, dilate,
findContours, approxPolyDP to four points, convexity, size, aspect and angle checks), with the
same options and measures as `spotter rectangles`.

Usage: peer_rectangles.py PICTURE... (prints one JSON object per picture per line)
"""
import json
import math
import sys
import time

import cv2
import numpy as np


def measures(corners):
    sides = [np.linalg.norm(corners[(i + 1) % 4] - corners[i]) for i in range(4)]
    a, b = (sides[0] + sides[2]) / 2, (sides[1] + sides[3]) / 2
    worst = 0.0
    for i in range(4):
        u, v = corners[i - 1] - corners[i], corners[(i + 1) % 4] - corners[i]
        cosine = float(u @ v / max(1e-12, np.linalg.norm(u) * np.linalg.norm(v)))
        worst = max(worst, abs(math.degrees(math.acos(max(-1.0, min(1.0, cosine)))) - 90))
    return min(a, b), min(a, b) / max(a, b, 1e-12), worst


def detect(bgr, minimum_aspect=0.5, maximum_aspect=1.0, tolerance=30.0, minimum_size=0.2, maximum=1):
    """Quadrilaterals, largest first, corners in continuous pixel coordinates (centres at +0.5)."""
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    blurred = cv2.GaussianBlur(gray, (5, 5), 0)
    # Thresholds from the median, the usual automatic Canny.
    median = float(np.median(blurred))
    edges = cv2.Canny(blurred, int(max(0, 0.66 * median)), int(min(255, 1.33 * median)))
    edges = cv2.dilate(edges, np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    shorter = min(gray.shape)
    found = []
    for contour in sorted(contours, key=cv2.contourArea, reverse=True)[:50]:
        approx = cv2.approxPolyDP(contour, 0.02 * cv2.arcLength(contour, True), True)
        if len(approx) != 4 or not cv2.isContourConvex(approx):
            continue
        corners = approx.reshape(4, 2).astype(np.float64)
        size, ratio, worst = measures(corners)
        if size < minimum_size * shorter or not (minimum_aspect <= ratio <= maximum_aspect) or worst > tolerance:
            continue
        box = cv2.boundingRect(approx)
        if any(abs(box[0] - b[0]) < 0.05 * shorter and abs(box[1] - b[1]) < 0.05 * shorter for b in (f[1] for f in found)):
            continue  # the inner and outer outline of one dilated edge
        found.append((corners + 0.5, box))
        if maximum and len(found) >= maximum:
            break
    return [corners for corners, _ in found]


def main():
    for path in sys.argv[1:]:
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        start = time.perf_counter()
        quads = detect(image)
        ms = (time.perf_counter() - start) * 1000
        print(json.dumps({"image": path, "milliseconds": round(ms, 3), "rectangles": [{"corners": q.round(3).tolist()} for q in quads]}))


if __name__ == "__main__":
    main()
