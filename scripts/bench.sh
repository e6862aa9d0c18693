#!/usr/bin/env bash
# Benchmarks Spotter against the peer side by side: sets up, builds release, runs both.
#   scripts/bench.sh [--threads 1,2] [--runs 200] [--rounds 3] [--model yolov8n]   invoke() latency against LiteRT
#   scripts/bench.sh --pipeline [--rounds 2] [--long|--clips|--tracking]  video and record against pipeline_py.py
#   scripts/bench.sh --startup [--rounds 5]                         one picture, short clips, a busy core
#   scripts/bench.sh --serve [--seconds 10] [--connections 4]       detect endpoint against a Python HTTP peer
#   scripts/bench.sh --sources [--seconds 15] [--rounds 3] [--viewers-only|--motion]  live sources per machine, cost of viewers
#   scripts/bench.sh --rectangles                                   accuracy and time against the OpenCV recipe
#   scripts/bench.sh --faces [--threads 1,2] [--runs 60]            find, align and embed a face against peer_faces.py's steps
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
venv="${SPOTTER_REF_VENV:-$HOME/.cache/spotter-ref-venv}"
[ -f fixtures-generated/detect/inputs/one-by-one-person-detection-f0300.npy ] || "$venv/bin/python" scripts/make_litert_fixtures.py >/dev/null 2>&1
swift build -c release --product spotter 2>&1 | tail -1
if [ "${1:-}" = "--pipeline" ]; then
  shift
  "$venv/bin/python" scripts/bench_pipeline.py .build/release/spotter "$@"
elif [ "${1:-}" = "--serve" ]; then
  shift
  "$venv/bin/python" scripts/bench_serve.py .build/release/spotter "$@"
elif [ "${1:-}" = "--sources" ]; then
  shift
  "$venv/bin/python" scripts/bench_sources.py .build/release/spotter "$@"
elif [ "${1:-}" = "--rectangles" ]; then
  shift
  # The set tuned on (seed 12), two other seeds of the same family (7, 99), three seeds of the
  # held-out family (1, 2, 3), and the marked real photos; corners within 2.5% of the diagonal.
  for set in tuned:12 tuned:7 tuned:99 heldout:1 heldout:2 heldout:3; do
    folder=fixtures-generated/rectangles-bench-${set/:/-}
    [ "$folder/truth.json" -nt scripts/make_rectangle_set.py ] || "$venv/bin/python" scripts/make_rectangle_set.py --family "${set%%:*}" --seed "${set##*:}" --out "$folder" 2>&1 | grep -v "libpng warning"
    echo "== $set"
    # Both on one thread: Spotter's detector is single-threaded, OpenCV is told so.
    "$venv/bin/python" scripts/check_rectangles.py .build/release/spotter "$folder" --peer --rounds 3 "$@" 2>&1 | grep -v -e "libpng warning" -e "^passed" -e "^FAILED" || true
  done
  echo "== real photos (scripts/rectangles-real-photos.json)"
  "$venv/bin/python" scripts/check_rectangles.py .build/release/spotter scripts/rectangles-real-photos.json --peer --misses "$@" 2>&1 | grep -v -e "libpng warning" -e "^passed" -e "^FAILED" || true
elif [ "${1:-}" = "--faces" ]; then
  shift
  "$venv/bin/python" scripts/bench_faces.py .build/release/spotter "$@"
elif [ "${1:-}" = "--startup" ]; then
  shift
  "$venv/bin/python" scripts/bench_startup.py .build/release/spotter "$@"
else
  # OpenVINO is measured beside LiteRT; only the benchmark needs it, so it is installed here.
  "$venv/bin/python" -c "import openvino" 2>/dev/null || "$venv/bin/pip" install -q --disable-pip-version-check "openvino==2026.4.1" \
    || echo "bench: OpenVINO could not be installed; pass --no-openvino" >&2
  "$venv/bin/python" scripts/bench_inference.py .build/release/spotter "$@"
fi
