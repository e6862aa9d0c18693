#!/usr/bin/env python3
"""Pictures with known rectangles for the Rectangles unit tests, drawn by OpenCV (lossless PNG).

Writes fixtures-generated/rectangles-unit/: NAME.png and truth.json {NAME: [[[x, y] x4], ...]}
(corners in continuous pixel coordinates, the picture spanning 0...width), and for rectification
page-texture.png (the shared page, 480x240) and page-warped.png (it seen in perspective).
"""
import json
import math
import os

import cv2
import numpy as np

OUT = "fixtures-generated/rectangles-unit"
SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
rng = np.random.default_rng(5)


def canvas(width=640, height=480):
    """Mid-grey with soft noise: no straight edges of its own."""
    noise = rng.normal(0, 10, (height // 8 + 1, width // 8 + 1)).astype(np.float32)
    base = 110 + cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
    return np.clip(np.repeat(base[..., None], 3, axis=2), 0, 255).astype(np.uint8)


def fill(image, corners, colour):
    """Anti-aliased polygon: coverage from a 4x4 supersampled mask. `corners` are continuous
    coordinates; OpenCV's integer pixel centres sit at +0.5 in them."""
    h, w = image.shape[:2]
    big = np.zeros((h * 4, w * 4), np.uint8)
    cv2.fillConvexPoly(big, np.int32(np.round((np.array(corners) * 4 - 0.5) * 16)), 255, shift=4)
    alpha = cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA).astype(np.float32)[..., None] / 255
    image[:] = (image * (1 - alpha) + np.array(colour, np.float32) * alpha).astype(np.uint8)


def rectangle(cx, cy, width, height, degrees):
    a = math.radians(degrees)
    u, v = np.array([math.cos(a), math.sin(a)]), np.array([-math.sin(a), math.cos(a)])
    c = np.array([cx, cy])
    return [c - u * width / 2 - v * height / 2, c + u * width / 2 - v * height / 2,
            c + u * width / 2 + v * height / 2, c - u * width / 2 + v * height / 2]


def parallelogram(cx, cy, side, degrees):
    """A rhombus with corner angles `degrees` and 180 - `degrees`."""
    a = math.radians(degrees)
    p0 = np.array([0.0, 0.0]); p1 = np.array([side, 0.0]); p3 = np.array([side * math.cos(a), side * math.sin(a)])
    p2 = p1 + p3
    centre = (p0 + p1 + p2 + p3) / 4
    return [p + np.array([cx, cy]) - centre for p in (p0, p1, p2, p3)]


def main():
    os.makedirs(OUT, exist_ok=True)
    truth = {}
    shapes = {
        # shorter/longer 0.5, 10 degrees turned
        "aspect-050": [rectangle(320, 240, 360, 180, 10)],
        "square": [rectangle(320, 240, 240, 240, -20)],
        # corner angles 70 and 110: 20 degrees from square
        "rhombus-70": [parallelogram(320, 240, 220, 70)],
        # shorter sides 0.30 of the picture's shorter side (480), aspect 0.75
        "size-030": [rectangle(320, 240, 192, 144, 25)],
        "three": [rectangle(140, 150, 180, 140, 5), rectangle(470, 140, 200, 150, -12), rectangle(360, 350, 200, 130, 30)],
    }
    colours = [(235, 235, 235), (30, 30, 30), (200, 220, 240)]
    for name, quads in shapes.items():
        image = canvas()
        for index, quad in enumerate(quads):
            fill(image, quad, colours[index % len(colours)])
        cv2.imwrite(os.path.join(OUT, name + ".png"), image)
        truth[name] = [np.array(q).round(4).tolist() for q in quads]

    # A box: its front face (the rectangle) and a darker side face sharing its right edge, thin
    # enough that front and side together make a candidate that encloses the front closely.
    front = rectangle(300, 250, 260, 180, 8)
    a = math.radians(8)
    depth = np.array([math.cos(a), math.sin(a)]) * 20 + np.array([-math.sin(a), math.cos(a)]) * -10
    image = canvas()
    fill(image, [front[1], front[1] + depth, front[2] + depth, front[2]], (40, 70, 110))
    fill(image, front, (60, 120, 200))
    cv2.imwrite(os.path.join(OUT, "box.png"), image)
    truth["box"] = [np.array(front).round(4).tolist()]

    page = cv2.imread(os.path.join(SHARED, "images", "page.png"), cv2.IMREAD_COLOR)
    texture = cv2.resize(page, (480, 240), interpolation=cv2.INTER_AREA)
    cv2.imwrite(os.path.join(OUT, "page-texture.png"), texture)
    corners = np.float32([[150, 90], [560, 130], [520, 400], [110, 350]])
    # The texture's pixel (i, j) centre is continuous (i + 0.5, j + 0.5); OpenCV maps integer coordinates.
    source = np.float32([[-0.5, -0.5], [479.5, -0.5], [479.5, 239.5], [-0.5, 239.5]])
    warp = cv2.getPerspectiveTransform(source, corners - 0.5)
    image = canvas()
    warped = cv2.warpPerspective(texture, warp, (640, 480), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    mask = np.zeros((480 * 4, 640 * 4), np.uint8)
    cv2.fillConvexPoly(mask, np.int32(np.round((corners * 4 - 0.5) * 16)), 255, shift=4)
    alpha = cv2.resize(mask, (640, 480), interpolation=cv2.INTER_AREA).astype(np.float32)[..., None] / 255
    image = (image * (1 - alpha) + warped * alpha).astype(np.uint8)
    cv2.imwrite(os.path.join(OUT, "page-warped.png"), image)
    truth["page-warped"] = [corners.tolist()]
    # A screen: a dark bezel round bright content, on grey, except at its bottom, where stripes of
    # white and of the bezel's own colour (16 and 8 pixels) meet it: the bezel's outer edge there
    # is only where a white stripe touches it, while its inner edge is strong all round.
    outer = rectangle(320, 220, 300, 200, 6)
    image = canvas()
    image[:] = (150, 150, 150)
    for x in range(0, 640, 24):
        image[280:, x:x + 16] = (245, 245, 245)
        image[280:, x + 16:x + 24] = (25, 25, 25)
    fill(image, outer, (25, 25, 25))
    fill(image, rectangle(320, 220, 300 - 2 * 14, 200 - 2 * 14, 6), (230, 200, 120))
    cv2.imwrite(os.path.join(OUT, "screen-striped.png"), image)
    truth["screen-striped"] = [np.array(outer).round(4).tolist()]

    # A red sign on green leaves of about its luma (88 and 89 grey levels), with a dark branch
    # along its left side 4 pixels out: in luma alone the only edge near that side is the branch's.
    sign = rectangle(330, 240, 280, 200, 12)
    a = math.radians(12)
    across = np.array([math.cos(a), math.sin(a)])
    image = np.zeros((480, 640, 3), np.uint8)
    image[:] = (55, 105, 70)  # BGR
    branch = [sign[0] - across * 14, sign[0] - across * 4, sign[3] - across * 4, sign[3] - across * 14]
    fill(image, [branch[0] + (branch[0] - branch[3]) * 0.2, branch[1] + (branch[1] - branch[2]) * 0.2,
                 branch[2] + (branch[2] - branch[1]) * 0.2, branch[3] + (branch[3] - branch[0]) * 0.2], (25, 30, 35))
    fill(image, sign, (40, 40, 200))
    cv2.imwrite(os.path.join(OUT, "sign-by-branch.png"), image)
    truth["sign-by-branch"] = [np.array(sign).round(4).tolist()]

    # A yellow card beside a larger frame of light wire (2 pixels thick) with the background on
    # both sides of it: both are rectangles, the card's sides are boundaries, the frame's are not.
    # Truth: the card, then the wire's centre line.
    card, frame = rectangle(180, 240, 200, 140, 8), rectangle(470, 240, 240, 170, -6)
    image = canvas()
    fill(image, card, (60, 200, 220))
    for k in range(4):
        a, b = np.array(frame[k]), np.array(frame[(k + 1) % 4])
        u = (b - a) / np.linalg.norm(b - a); n = np.array([-u[1], u[0]])
        fill(image, [a - u - n, b + u - n, b + u + n, a - u + n], (215, 215, 215))
    cv2.imwrite(os.path.join(OUT, "card-and-wire-frame.png"), image)
    truth["card-and-wire-frame"] = [np.array(card).round(4).tolist(), np.array(frame).round(4).tolist()]

    with open(os.path.join(OUT, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print(f"make_rectangle_fixtures: {len(truth)} pictures in {OUT}")


if __name__ == "__main__":
    main()
