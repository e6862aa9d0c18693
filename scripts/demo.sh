#!/usr/bin/env bash
# Sets everything up and runs the main job: detection on pictures with the shared SSD MobileNet,
# printing what it finds and writing annotated copies to ./annotated/.
#   scripts/demo.sh [IMAGE|DIR ...]        (default: ../shared/images)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
swift build -c release --product spotter 2>&1 | tail -1
[ "$#" -gt 0 ] || set -- ../shared/images
.build/release/spotter detect "$@" --model ../shared/models/coco-ssd-mobilenet-v1/detect.tflite --save-dir annotated
echo "annotated copies: $(pwd)/annotated"
