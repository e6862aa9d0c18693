#!/usr/bin/env bash
# Sets everything up and runs the main job: the shared SSD MobileNet on an image, printing what it finds.
#   scripts/demo.sh [IMAGE]        (default: ../shared/images/astronaut.png)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
venv="${SPOTTER_REF_VENV:-$HOME/.cache/spotter-ref-venv}"
image="${1:-../shared/images/astronaut.png}"
model=../shared/models/coco-ssd-mobilenet-v1
swift build -c release --product spotter 2>&1 | tail -1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Until `spotter detect` decodes images itself, OpenCV prepares the 300x300 RGB input as the peer does.
"$venv/bin/python" - "$image" "$work/input.npy" <<'PY'
import sys, cv2, numpy as np
image = cv2.imread(sys.argv[1], cv2.IMREAD_COLOR)
if image is None:
    sys.exit(f"cannot read image {sys.argv[1]}")
np.save(sys.argv[2], cv2.resize(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), (300, 300), interpolation=cv2.INTER_LINEAR))
PY
.build/release/spotter run "$model/detect.tflite" --input "$work/input.npy" --output-dir "$work/out" >/dev/null
"$venv/bin/python" - "$work/out" "$model/labelmap.txt" "$image" <<'PY'
import sys, numpy as np, cv2
out, labels = sys.argv[1], [l.strip() for l in open(sys.argv[2])]
h, w = cv2.imread(sys.argv[3]).shape[:2]
boxes = np.load(f"{out}/TFLite_Detection_PostProcess.npy")[0]
classes = np.load(f"{out}/TFLite_Detection_PostProcess_1.npy")[0]
scores = np.load(f"{out}/TFLite_Detection_PostProcess_2.npy")[0]
count = int(np.load(f"{out}/TFLite_Detection_PostProcess_3.npy")[0])
print(f"{sys.argv[3]} ({w}x{h}): detections scoring >= 0.5")
for i in range(count):
    if scores[i] >= 0.5:
        y0, x0, y1, x1 = boxes[i]
        print(f"  {labels[int(classes[i]) + 1]:<14} {scores[i]:.3f}  x {max(0, x0 * w):.0f}-{min(w, x1 * w):.0f}  y {max(0, y0 * h):.0f}-{min(h, y1 * h):.0f}")
PY
