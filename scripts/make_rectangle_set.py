#!/usr/bin/env python3
"""Renders the rectangle-detection test set: seeded, from the shared pictures and videos.

Each picture shows at most one rectangle (a page, card, photo or flat panel) seen by a pinhole
camera: random rotation, tilt up to 60 degrees, scale and position, over a cluttered background
(the shared photos; video frames only as faces), with partial occlusion of one side, a lighting gradient,
a cast shadow, blur, noise and JPEG compression. Some pictures have no rectangle at all.

Writes DIR/NNNN.jpg and DIR/truth.json: {"pictures": [{"image", "width", "height",
"corners": [[x, y] x4] or []}]}, corners in pixels, clockwise from the corner nearest the
picture's top-left (the order `spotter rectangles` reports).

The set only holds rectangles a detector can be asked to find with the options
scripts/check_rectangles.py uses: sides at least 0.25 of the shorter picture side, corner angles
within 40 degrees of square, a shorter/longer ratio of at least 0.3 as displayed, the border differing from its surroundings by at least 20 grey levels
on average and 12 on every side (a detector sees brightness edges, as Vision does), and every
corner visible.

Two families (issue 36: tune on one, measure on the other):
- `tuned` (the default): the set the detector's thresholds and weights were fitted on.
- `heldout`: never tuned on. Backgrounds are `../shared/coco128` pictures whose annotations are
  only animals and food (and photo faces any coco128 picture); besides photos and pages it draws
  screens (a dark bezel around bright content), cards with rounded corners (the corners reported
  are where the straight sides meet, as Vision does), signs, and boxes in perspective (a side
  face shares an edge with the rectangle); lighting ramps, spotlights and motion blur.

Usage: make_rectangle_set.py [--out DIR] [--count N] [--empty N] [--seed S] [--family tuned|heldout]
"""
import argparse
import glob
import json
import math
import os
import sys

import cv2
import numpy as np

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
SIZES = [(640, 480), (640, 480), (800, 600), (960, 540), (1280, 720), (480, 640)]


def load_sources():
    """Backgrounds: the shared photos (no page, no video: their panels and doors are rectangles a
    detector rightly finds). Faces: those plus the page and video frames."""
    pictures = []
    for path in sorted(glob.glob(os.path.join(SHARED, "images", "*.png")) +
                       glob.glob(os.path.join(SHARED, "images", "faces", "*"))):
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        if image is not None and not path.endswith("page.png"):
            pictures.append(image)
    faces = list(pictures) + [cv2.imread(os.path.join(SHARED, "images", "page.png"), cv2.IMREAD_COLOR)]
    for path in sorted(glob.glob(os.path.join(SHARED, "videos", "*"))):
        capture = cv2.VideoCapture(path)
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or 300
        for index in np.linspace(0, count - 1, 8).astype(int):
            capture.set(cv2.CAP_PROP_POS_FRAMES, int(index))
            ok, frame = capture.read()
            if ok:
                faces.append(frame)
        capture.release()
    if len(pictures) < 5:
        sys.exit(f"make_rectangle_set: too few shared pictures under {SHARED}")
    return pictures, [face for face in faces if face is not None]


def load_coco():
    """Held-out backgrounds: coco128 pictures annotated with animals and food only; faces: all."""
    folder = os.path.join(SHARED, "coco128")
    annotations = json.load(open(os.path.join(folder, "annotations", "instances_train2017.json")))
    supercategory = {c["id"]: c["supercategory"] for c in annotations["categories"]}
    kinds = {}
    for a in annotations["annotations"]:
        kinds.setdefault(a["image_id"], set()).add(supercategory[a["category_id"]])
    backgrounds, faces = [], []
    for entry in annotations["images"]:
        image = cv2.imread(os.path.join(folder, "train2017", entry["file_name"]), cv2.IMREAD_COLOR)
        if image is None:
            continue
        faces.append(image)
        if kinds.get(entry["id"]) and kinds[entry["id"]] <= {"animal", "food"}:
            backgrounds.append(image)
    if len(backgrounds) < 5:
        sys.exit(f"make_rectangle_set: too few coco128 pictures of animals and food under {folder}")
    return backgrounds, faces


def background(rng, sources, width, height):
    """A random crop of a shared picture, scaled to fill the frame."""
    def crop(w, h):
        source = sources[rng.integers(len(sources))]
        sh, sw = source.shape[:2]
        scale = max(w / sw, h / sh) * rng.uniform(1.0, 1.8)
        scaled = cv2.resize(source, (max(w, int(sw * scale + 1)), max(h, int(sh * scale + 1))), interpolation=cv2.INTER_AREA)
        y = rng.integers(scaled.shape[0] - h + 1)
        x = rng.integers(scaled.shape[1] - w + 1)
        out = scaled[y:y + h, x:x + w]
        return cv2.flip(out, 1) if rng.random() < 0.5 else out
    return crop(width, height).copy()


def texture(rng, sources, faces, long_side, aspect, kind):
    """The rectangle's face: a photo (with or without a white border), a printed page, a flat colour,
    a screen (dark bezel, bright content) or a sign (one colour, a white inner border, lettering)."""
    w, h = int(long_side), int(long_side * aspect)
    if rng.random() < 0.5:
        w, h = h, w
    if kind is None:
        kind = rng.choice(["photo", "photo", "page", "flat"])
    if kind == "screen":
        bezel = max(3, int(min(w, h) * rng.uniform(0.02, 0.07)))
        face = np.full((h, w, 3), rng.integers(5, 45), np.uint8)
        content = cv2.convertScaleAbs(background(rng, faces, w - 2 * bezel, h - 2 * bezel), alpha=rng.uniform(1.0, 1.4), beta=rng.uniform(30, 80))
        face[bezel:h - bezel, bezel:w - bezel] = content
        return face
    if kind == "sign":
        face = np.empty((h, w, 3), np.uint8)
        face[:] = rng.choice([(40, 40, 200), (30, 120, 30), (160, 80, 20), (20, 160, 220), (30, 30, 30)])
        inset = max(3, min(w, h) // 14)
        cv2.rectangle(face, (inset, inset), (w - inset, h - inset), (245, 245, 245), max(2, inset // 3), cv2.LINE_AA)
        words = "".join(rng.choice(list("ABCDEFGHKLMNOPRSTUVWXYZ")) for _ in range(int(rng.integers(3, 8))))
        cv2.putText(face, words, (2 * inset, h // 2 + inset), cv2.FONT_HERSHEY_DUPLEX, max(0.4, w / (len(words) * 28)), (245, 245, 245), 2, cv2.LINE_AA)
        return face
    if kind == "flat":
        face = np.empty((h, w, 3), np.uint8)
        face[:] = rng.integers(0, 256, 3)
        return face
    if kind == "page":
        face = np.full((h, w, 3), rng.integers(200, 256), np.uint8)
        margin = max(4, w // 12)
        y = margin + 12
        while y < h - margin:
            words = "".join(rng.choice(list("abcdefghij klmnopqrstuvwxyz")) for _ in range(40))
            cv2.putText(face, words, (margin, y), cv2.FONT_HERSHEY_SIMPLEX, max(0.25, w / 1400), (30, 30, 30), 1, cv2.LINE_AA)
            y += max(8, h // 28)
        if rng.random() < 0.5:
            inset = cv2.resize(background(rng, sources, w // 3, h // 4), (w // 3, h // 4))
            face[margin + h // 6:margin + h // 6 + h // 4, w - margin - w // 3:w - margin] = inset
        return face
    face = background(rng, faces, w, h)
    if rng.random() < 0.5:
        border = max(3, int(min(w, h) * rng.uniform(0.03, 0.08)))
        framed = np.full((h, w, 3), rng.integers(215, 256), np.uint8)
        framed[border:h - border, border:w - border] = cv2.resize(face, (w - 2 * border, h - 2 * border))
        face = framed
    return face


def rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def pose(rng, width, height, aspect):
    """Projects a 1 x aspect rectangle through a pinhole camera; None when the view is unusable."""
    focal = rng.uniform(0.8, 1.6) * width
    tilt = math.radians(rng.uniform(0, 60))
    phi = rng.uniform(0, 2 * math.pi)
    r = rotation([math.cos(phi), math.sin(phi), 0], tilt) @ rotation([0, 0, 1], rng.uniform(0, 2 * math.pi))
    local = np.array([[-0.5, -aspect / 2, 0], [0.5, -aspect / 2, 0], [0.5, aspect / 2, 0], [-0.5, aspect / 2, 0]])
    target = rng.uniform(0.35, 0.95) * min(width, height)
    depth = focal / target
    offset = np.array([rng.uniform(-0.35, 0.35) * width / focal * depth, rng.uniform(-0.35, 0.35) * height / focal * depth, depth])
    def project(points, world=False):
        placed = points @ r.T + offset
        if world:
            return placed
        return np.stack([focal * placed[:, 0] / placed[:, 2] + width / 2, focal * placed[:, 1] / placed[:, 2] + height / 2], axis=1)
    if np.any(project(local, world=True)[:, 2] < 0.2 * depth):
        return None
    return project(local), project


def measures(corners):
    """Sides, the shorter/longer ratio of opposite-side means, and the worst corner angle's deviation from 90."""
    sides = [np.linalg.norm(corners[(i + 1) % 4] - corners[i]) for i in range(4)]
    pair_a, pair_b = (sides[0] + sides[2]) / 2, (sides[1] + sides[3]) / 2
    worst = 0.0
    for i in range(4):
        u = corners[i - 1] - corners[i]
        v = corners[(i + 1) % 4] - corners[i]
        angle = math.degrees(math.acos(np.clip(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)), -1, 1)))
        worst = max(worst, abs(angle - 90))
    return min(pair_a, pair_b), min(pair_a, pair_b) / max(pair_a, pair_b), worst


def displayed_order(corners):
    """Clockwise (y down) from the corner nearest the picture's top-left."""
    center = corners.mean(axis=0)
    angles = np.arctan2(corners[:, 1] - center[1], corners[:, 0] - center[0])
    clockwise = corners[np.argsort(angles)]
    first = int(np.argmin(clockwise[:, 0] + clockwise[:, 1] + 1e-6 * clockwise[:, 1]))
    return np.roll(clockwise, -first, axis=0)


def border_contrast(gray, corners):
    """Per side, the mean absolute grey difference between points 3 px inside and 3 px outside it."""
    center = corners.mean(axis=0)
    sides = []
    for i in range(4):
        a, b = corners[i], corners[(i + 1) % 4]
        direction = (b - a) / np.linalg.norm(b - a)
        normal = np.array([-direction[1], direction[0]])
        if normal @ (center - a) < 0:
            normal = -normal
        diffs = []
        for t in np.linspace(0.1, 0.9, 24):
            p = a + (b - a) * t
            inside, outside = p + 3 * normal, p - 3 * normal
            xi, yi, xo, yo = int(inside[0]), int(inside[1]), int(outside[0]), int(outside[1])
            if 0 <= xi < gray.shape[1] and 0 <= yi < gray.shape[0] and 0 <= xo < gray.shape[1] and 0 <= yo < gray.shape[0]:
                diffs.append(abs(float(gray[yi, xi]) - float(gray[yo, xo])))
        sides.append(float(np.mean(diffs)) if diffs else 0.0)
    return sides


def paste(rng, canvas, face, corners, radius=0.0):
    """Draws the face into the quadrilateral; radius > 0 rounds its corners (a share of the shorter side)."""
    fh, fw = face.shape[:2]
    source = np.float32([[0, 0], [fw, 0], [fw, fh], [0, fh]])
    h = cv2.getPerspectiveTransform(source, np.float32(corners))
    size = (canvas.shape[1], canvas.shape[0])
    warped = cv2.warpPerspective(face, h, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    # Coverage rendered at 4x and averaged: anti-aliased edges, as a camera sees them.
    big = np.zeros((canvas.shape[0] * 4, canvas.shape[1] * 4), np.uint8)
    cv2.fillConvexPoly(big, np.int32(np.round(corners * 4 * 16)), 255, lineType=cv2.LINE_8, shift=4)
    alpha = cv2.resize(big, size, interpolation=cv2.INTER_AREA).astype(np.float32) / 255
    if radius > 0:
        r = max(2, int(radius * min(fw, fh)))
        mask = np.zeros((fh, fw), np.uint8)
        cv2.rectangle(mask, (r, 0), (fw - 1 - r, fh - 1), 255, -1)
        cv2.rectangle(mask, (0, r), (fw - 1, fh - 1 - r), 255, -1)
        for cx, cy in [(r, r), (fw - 1 - r, r), (fw - 1 - r, fh - 1 - r), (r, fh - 1 - r)]:
            cv2.circle(mask, (cx, cy), r, 255, -1, cv2.LINE_AA)
        alpha *= cv2.warpPerspective(mask, h, size, flags=cv2.INTER_LINEAR).astype(np.float32) / 255
    alpha = alpha[..., None]
    return (canvas * (1 - alpha) + warped * alpha).astype(np.uint8)


def box_sides(rng, canvas, project, aspect, corners):
    """The visible side faces of a box whose front face is the rectangle, shaded flat with a little
    texture (drawn before the front face, which shares an edge with each)."""
    depth = rng.uniform(0.1, 0.45)
    front = np.array([[-0.5, -aspect / 2, 0], [0.5, -aspect / 2, 0], [0.5, aspect / 2, 0], [-0.5, aspect / 2, 0]])
    back = front + np.array([0, 0, depth])
    world_front, world_back = project(front, world=True), project(back, world=True)
    if world_back[:, 2].mean() < world_front[:, 2].mean():
        back = front - np.array([0, 0, depth])
        world_back = project(back, world=True)
    if np.any(world_back[:, 2] <= 0):
        return canvas
    image_back = project(back)
    box_centre = np.concatenate([world_front, world_back]).mean(axis=0)
    base = rng.integers(40, 220, 3).astype(np.float32)
    out = canvas.copy()
    for i in range(4):
        j = (i + 1) % 4
        quad_world = np.array([world_front[i], world_front[j], world_back[j], world_back[i]])
        normal = np.cross(quad_world[1] - quad_world[0], quad_world[3] - quad_world[0])
        centre = quad_world.mean(axis=0)
        if normal @ (centre - box_centre) < 0:
            normal = -normal
        if normal @ centre >= 0:  # faces away from the camera
            continue
        shade = np.clip(base * rng.uniform(0.5, 0.9) + rng.normal(0, 4, 3), 0, 255)
        quad = np.array([corners[i], corners[j], image_back[j], image_back[i]])
        side = np.empty((64, 64, 3), np.uint8)
        side[:] = shade
        side = np.clip(side + rng.normal(0, 3, side.shape), 0, 255).astype(np.uint8)
        out = paste(rng, out, side, quad)
    return out


def occlude(rng, image, corners, sources):
    """Covers part of one side (up to about a third of it), never a corner."""
    side = rng.integers(4)
    a, b = corners[side], corners[(side + 1) % 4]
    length = np.linalg.norm(b - a)
    radius = length * rng.uniform(0.06, 0.15)
    center = a + (b - a) * rng.uniform(0.35, 0.65)
    center = center + rng.uniform(-0.5, 0.5) * radius * np.array([-(b - a)[1], (b - a)[0]]) / length
    mask = np.zeros(image.shape[:2], np.uint8)
    axes = (int(radius), int(radius * rng.uniform(0.6, 1.6)))
    cv2.ellipse(mask, (int(center[0]), int(center[1])), axes, rng.uniform(0, 180), 0, 360, 255, -1, cv2.LINE_AA)
    patch = background(rng, sources, image.shape[1], image.shape[0])
    if rng.random() < 0.5:
        patch[:] = rng.integers(0, 256, 3)
    alpha = mask.astype(np.float32)[..., None] / 255
    return (image * (1 - alpha) + patch * alpha).astype(np.uint8)


def light(rng, image, heldout=False):
    h, w = image.shape[:2]
    out = image.astype(np.float32)
    if heldout and rng.random() < 0.3:
        # A spotlight: bright in one place, falling off to a third.
        cx, cy, spread = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(0.3, 0.8) * max(w, h)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        out *= (0.35 + 0.75 * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * spread ** 2)))[..., None]
    if heldout and rng.random() < 0.3:
        # Motion blur: the camera moved 4-14 px during the exposure.
        length = int(rng.integers(4, 15))
        kernel = np.zeros((length, length), np.float32)
        kernel[length // 2, :] = 1 / length
        rotate = cv2.getRotationMatrix2D(((length - 1) / 2, (length - 1) / 2), rng.uniform(0, 180), 1)
        kernel = cv2.warpAffine(kernel, rotate, (length, length))
        out = cv2.filter2D(out, -1, kernel / max(1e-6, kernel.sum()))
    if rng.random() < 0.5:
        angle = rng.uniform(0, 2 * math.pi)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        ramp = (xx * math.cos(angle) + yy * math.sin(angle)) / max(w, h)
        ramp = (ramp - ramp.min()) / max(1e-6, ramp.max() - ramp.min())
        out *= (rng.uniform(0.55, 0.85) + ramp * rng.uniform(0.3, 0.6))[..., None]
    if rng.random() < 0.3:
        # A soft-edged shadow over part of the frame.
        mask = np.zeros((h, w), np.float32)
        points = np.int32([[rng.uniform(0, w), rng.uniform(0, h)] for _ in range(3)] + [[0, 0]])
        cv2.fillConvexPoly(mask, cv2.convexHull(points), 1.0)
        mask = cv2.GaussianBlur(mask, (0, 0), rng.uniform(2, 8))
        out *= (1 - mask * rng.uniform(0.2, 0.45))[..., None]
    if rng.random() < 0.5:
        out = cv2.GaussianBlur(out, (0, 0), rng.uniform(0.5, 1.6))
    out += rng.normal(0, rng.uniform(0, 6), out.shape).astype(np.float32)
    return np.clip(out, 0, 255).astype(np.uint8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="fixtures-generated/rectangles")
    parser.add_argument("--count", type=int, default=480, help="pictures with a rectangle")
    parser.add_argument("--empty", type=int, default=60, help="pictures without one")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--family", choices=["tuned", "heldout"], default="tuned")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    heldout = args.family == "heldout"
    sources, faces = load_coco() if heldout else load_sources()
    kinds = ["photo", "photo", "page", "flat", "screen", "card", "sign", "box"]
    os.makedirs(args.out, exist_ok=True)
    pictures = []
    for index in range(args.count + args.empty):
        width, height = SIZES[rng.integers(len(SIZES))]
        with_rectangle = index < args.count
        while True:
            canvas = background(rng, sources, width, height)
            corners, kind = [], None
            if with_rectangle:
                aspect = rng.uniform(0.55, 1.0)
                posed = pose(rng, width, height, aspect)
                if posed is None:
                    continue
                projected, project = posed
                margin = 0.02 * min(width, height)
                if projected[:, 0].min() < margin or projected[:, 1].min() < margin \
                        or projected[:, 0].max() > width - margin or projected[:, 1].max() > height - margin:
                    continue
                size, ratio, worst = measures(projected)
                if size < 0.25 * min(width, height) or worst > 40 or ratio < 0.3:
                    continue
                kind = rng.choice(kinds) if heldout else None  # the tuned family draws it in texture(), as it always has
                face_kind = ("flat" if rng.random() < 0.5 else "photo") if kind in ("card", "box") else kind
                face = texture(rng, sources, faces, max(64, np.linalg.norm(projected[1] - projected[0]) * 1.2), aspect, face_kind)
                if kind == "box":
                    canvas = box_sides(rng, canvas, project, aspect, projected)
                canvas = paste(rng, canvas, face, projected, rng.uniform(0.04, 0.12) if kind == "card" else 0.0)
                contrast = border_contrast(cv2.cvtColor(canvas, cv2.COLOR_BGR2GRAY), projected)
                if min(contrast) < 12 or np.mean(contrast) < 20:
                    continue
                if rng.random() < 0.4:
                    canvas = occlude(rng, canvas, projected, sources)
                corners = displayed_order(projected).round(3).tolist()
            break
        canvas = light(rng, canvas, heldout)
        name = f"{index:04d}.jpg"
        cv2.imwrite(os.path.join(args.out, name), canvas, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(40, 96))])
        entry = {"image": name, "width": width, "height": height, "corners": corners}
        if heldout:
            entry["kind"] = str(kind) if corners else "empty"
        pictures.append(entry)
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump({"seed": args.seed, "family": args.family, "pictures": pictures}, f, indent=1)
    print(f"make_rectangle_set: {len(pictures)} {args.family} pictures ({args.count} with a rectangle, seed {args.seed}) in {args.out}")


if __name__ == "__main__":
    main()
