#!/usr/bin/env python3
"""JPEG variants and the pixels OpenCV's imread decodes from them, for Spotter's JPEG tests.

Writes, under OUTDIR (default: fixtures-generated/jpeg/ at the repository root):

  NAME.jpg    a variant of a shared picture: baseline and progressive; 4:2:0, 4:2:2 and 4:4:4
              chroma; grayscale; CMYK (Adobe, inverted); restart markers; odd sizes; EXIF
              orientations 1-8; a phone-style photo (4:2:0, quality 85, noise)
  NAME.npy    cv2.imread(NAME.jpg) (EXIF orientation applied, as imread does), converted to RGB

OpenCV and Pillow write the files; OpenCV decodes them. Spotter's decoder is never used here.
Tool versions: ../shared/reference/requirements.txt and scripts/requirements-fixtures.txt.
"""
import argparse
import os

import cv2
import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "images")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--outdir", default=os.path.join(ROOT, "fixtures-generated", "jpeg"))
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    chelsea = cv2.imread(os.path.join(SHARED, "chelsea.png"))
    coffee = cv2.imread(os.path.join(SHARED, "coffee.png"))
    camera = cv2.imread(os.path.join(SHARED, "camera.png"), cv2.IMREAD_GRAYSCALE)
    rng = np.random.default_rng(7)
    photo = np.clip(coffee.astype(np.int16) + rng.integers(-12, 13, coffee.shape), 0, 255).astype(np.uint8)

    files = {}

    def cv_write(name, image, *params):
        path = os.path.join(args.outdir, name + ".jpg")
        assert cv2.imwrite(path, image, list(params)), name
        files[name] = path

    s = cv2.IMWRITE_JPEG_SAMPLING_FACTOR
    cv_write("baseline-420", chelsea, cv2.IMWRITE_JPEG_QUALITY, 90, s, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420)
    cv_write("baseline-422", chelsea, cv2.IMWRITE_JPEG_QUALITY, 90, s, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422)
    cv_write("baseline-444", chelsea, cv2.IMWRITE_JPEG_QUALITY, 90, s, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444)
    cv_write("progressive-420", coffee, cv2.IMWRITE_JPEG_PROGRESSIVE, 1)
    cv_write("progressive-444", coffee, cv2.IMWRITE_JPEG_PROGRESSIVE, 1, s, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444)
    cv_write("grayscale", camera, cv2.IMWRITE_JPEG_QUALITY, 92)
    cv_write("restart-markers", coffee, cv2.IMWRITE_JPEG_RST_INTERVAL, 4)
    cv_write("odd-size-420", chelsea[:299, :451], cv2.IMWRITE_JPEG_QUALITY, 80)
    cv_write("tiny-3x5", chelsea[100:105, 200:203])
    cv_write("phone-photo", photo, cv2.IMWRITE_JPEG_QUALITY, 85)

    rgb = Image.fromarray(cv2.cvtColor(chelsea, cv2.COLOR_BGR2RGB))
    cmyk = os.path.join(args.outdir, "cmyk.jpg")
    rgb.convert("CMYK").save(cmyk, quality=90)
    files["cmyk"] = cmyk
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        path = os.path.join(args.outdir, f"exif-orientation-{orientation}.jpg")
        rgb.save(path, quality=90, exif=exif)
        files[f"exif-orientation-{orientation}"] = path

    for name, path in files.items():
        decoded = cv2.imread(path, cv2.IMREAD_COLOR)
        assert decoded is not None, path
        np.save(os.path.join(args.outdir, name + ".npy"), np.ascontiguousarray(cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)))
    print(f"{len(files)} JPEG variants with OpenCV's pixels in {args.outdir}")


if __name__ == "__main__":
    main()
