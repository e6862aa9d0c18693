#!/usr/bin/env bash
# Sets everything up and runs all tests: expected outputs from LiteRT, the Swift test suites
# (release build: the reference kernels run real models), and end-to-end checks of the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's time, so that a slow run says where its time went.
mark=$SECONDS
took() { echo "[test.sh] $1 took $((SECONDS - mark)) s ($((SECONDS / 60)) min so far)"; mark=$SECONDS; }
scripts/setup.sh
took "setup"
venv="${SPOTTER_REF_VENV:-$HOME/.cache/spotter-ref-venv}"

# Expected outputs from LiteRT and OpenCV, each regenerated when its script (or a peer it runs) changes.
# They are made while the release build compiles: much of its Swift half keeps one core busy.
# fixture NAME ARGUMENTS...: runs Python on them, its output kept in the log beside NAME and shown
# (with the failure) only when it fails.
fixture() {
  local name=$1
  shift
  "$venv/bin/python" "$@" > "$fixtures_log.$name" 2>&1 || { cat "$fixtures_log.$name"; echo "$* failed"; return 1; }
}
make_fixtures() {
  for script in make_litert_fixtures make_anatomy_fixtures make_jpeg_fixtures make_model_fixtures make_rectangle_fixtures make_rectangle_set make_picture_bombs make_recording_fixtures; do
    stamp=fixtures-generated/.stamp-$script
    sources="scripts/$script.py"
    [ "$script" = make_recording_fixtures ] && sources="$sources ../shared/reference/pipeline_py.py"
    [ "$script" = make_litert_fixtures ] && sources="$sources $(find ../shared/images -maxdepth 1 -name '*.png' | sort)"
    [ "$script" = make_anatomy_fixtures ] && sources="$sources $(find ../shared/models Tests/Fixtures/models -name '*.tflite' | sort)"
    [ "$script" = make_model_fixtures ] && sources="$sources scripts/peer_yolo.py scripts/peer_blazeface.py scripts/peer_faces.py Tests/Fixtures/models/attention-yolo/*.tflite $(find ../shared/images -type f | sort)"
    # shellcheck disable=SC2086
    if ! cat $sources | cmp -s - "$stamp" 2>/dev/null; then
      fixture "$script" "scripts/$script.py" || return 1
      grep -v -e "UserWarning" -e "warnings.warn" -e "XNNPACK delegate" -e "libpng warning" "$fixtures_log.$script" || true
      # shellcheck disable=SC2086
      cat $sources > "$stamp"
    fi
  done
  # The held-out rectangle set (issue 36), rendered by the same script as the tuned one.
  stamp=fixtures-generated/.stamp-rectangles-heldout
  if ! cmp -s scripts/make_rectangle_set.py "$stamp" || [ ! -f fixtures-generated/rectangles-heldout/truth.json ]; then
    fixture heldout scripts/make_rectangle_set.py --family heldout --seed 1 --out fixtures-generated/rectangles-heldout || return 1
    cp scripts/make_rectangle_set.py "$stamp"
  fi
}
mkdir -p fixtures-generated
fixtures_log=fixtures-generated/.log
make_fixtures > "$fixtures_log" 2>&1 &
fixtures_job=$!

# One release build serves the test suites and the command line the end-to-end checks run.
swift build -c release --build-tests || { kill "$fixtures_job" 2>/dev/null; exit 1; }
took "release build"
wait "$fixtures_job" || { cat "$fixtures_log"; echo "making the expected outputs failed"; exit 1; }
cat "$fixtures_log"
took "expected outputs (the rest of them, after the build)"

# The suites that also run under AddressSanitizer below run only there (the same checks, and
# memory errors besides): here, the rest of them.
memory_checked='^(ImagingTests|DetectionTests|PipelineTests|RectanglesTests|FacesTests)\.|OperatorFixtureTests'
swift test -c release --skip-build --skip "ClusterTests|$memory_checked" 2>&1 | tee .build/swift-test.log | grep -v -e "^✔ Test [^r].* passed" -e "^◇ Test .* started"
swift_tests=$(sed -n 's/.*Test run with \([0-9]*\) tests.* passed.*/\1/p' .build/swift-test.log)
[ -n "$swift_tests" ] || { echo "swift test failed"; exit 1; }
# The cluster's tests on their own: they time leases in seconds against throwaway PostgreSQL
# servers, which the suites above (every core busy with inference) would starve.
swift test -c release --skip-build --filter ClusterTests 2>&1 | tee .build/cluster-test.log | grep -v -e "^✔ Test [^r].* passed" -e "^◇ Test .* started"
cluster_tests=$(sed -n 's/.*Test run with \([0-9]*\) tests.* passed.*/\1/p' .build/cluster-test.log)
[ -n "$cluster_tests" ] || { echo "swift test of the cluster failed"; exit 1; }
took "Swift suites"

# AddressSanitizer over the suites that hand pixels, FFmpeg buffers and tensors to unsafe pointers
# (Imaging, Media, Detection, Pipeline with its frame-size sweep, Rectangles, Faces, the single-operator kernels);
# SPOTTER_MEMORY_CHECK=1 leaves the server, model store and command line out of this build.
export SPOTTER_MEMORY_CHECK=1
swift build -c release --sanitize=address --build-tests --build-path .build-asan > .build/asan-build.log 2>&1 \
  || { tail -40 .build/asan-build.log; echo "AddressSanitizer build failed"; exit 1; }
took "AddressSanitizer build"
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 swift test -c release --sanitize=address --build-path .build-asan --skip-build \
  --filter "$memory_checked" 2>&1 | tee .build/asan-test.log \
  | grep -v -e "^✔ Test [^r].* passed" -e "^◇ Test .* started"
asan_tests=$(sed -n 's/.*Test run with \([0-9]*\) tests.* passed.*/\1/p' .build/asan-test.log)
[ -n "$asan_tests" ] || { echo "swift test under AddressSanitizer failed"; exit 1; }
took "suites under AddressSanitizer"
unset SPOTTER_MEMORY_CHECK

# The command line, end to end, checked by LiteRT and Python's json module.
"$venv/bin/python" scripts/check_cli.py .build/release/spotter > .build/check-cli.log || { cat .build/check-cli.log; exit 1; }
cat .build/check-cli.log
cli=$(tail -1 .build/check-cli.log)
cli_passed=${cli%% passed*}
took "check_cli"

# Rectangle detection (issue 36: tuned on one family of rendered pictures, measured on others):
# - the set it was tuned on, against issue 12's bar (every corner within 5% of the diagonal);
# - a held-out set (other backgrounds and kinds of object, never tuned on), corners within 2.5%,
#   against a floor a little under what it reaches today (0.762 on this set), so that tuning
#   that helps only the tuned set cannot pass unnoticed;
# - real photos with hand-marked corners: no false rectangles beyond 2 of the 16 empty ones.
"$venv/bin/python" scripts/check_rectangles.py .build/release/spotter fixtures-generated/rectangles --within 0.05 --floor 0.95,0.01,0.1 \
  2>&1 | grep -v "libpng warning" | tee .build/check-rectangles.log
grep -q "^passed" .build/check-rectangles.log || { echo "rectangle detection fell below its floor on the tuned set"; exit 1; }
"$venv/bin/python" scripts/check_rectangles.py .build/release/spotter fixtures-generated/rectangles-heldout --floor 0.76,0.01,0.1 \
  2>&1 | grep -v "libpng warning" | tee .build/check-rectangles-heldout.log
grep -q "^passed" .build/check-rectangles-heldout.log || { echo "rectangle detection fell below its floor on the held-out set"; exit 1; }
"$venv/bin/python" scripts/check_rectangles.py .build/release/spotter scripts/rectangles-real-photos.json --floor 0,0.02,0.125 \
  2>&1 | grep -v "libpng warning" | tee .build/check-rectangles-real.log
grep -q "^passed" .build/check-rectangles-real.log || { echo "rectangle detection found false rectangles on real photos"; exit 1; }
took "rectangle checks"

# Hostile inputs (issue 31): sources naming private files, cross-site requests, picture bombs, tokens,
# FIFOs, slow clients, disguised uploads; then mutants of the shared models (no crash, no hang) and a
# bounded fuzzing run of the model reader and interpreter preparation under AddressSanitizer.
"$venv/bin/python" scripts/check_security.py .build/release/spotter > .build/check-security.log 2>&1 || { cat .build/check-security.log; exit 1; }
cat .build/check-security.log
security=$(tail -1 .build/check-security.log)
security_passed=${security%% passed*}
"$venv/bin/python" scripts/check_model_mutants.py .build/release/spotter --count 450 | tee .build/check-mutants.log | tail -3
grep -q "^passed" .build/check-mutants.log || { echo "a mutated model crashed or hung the reader"; exit 1; }
scripts/fuzz-model.sh "${SPOTTER_FUZZ_SECONDS:-90}" "${SPOTTER_FUZZ_RUNS:-15000}" "${SPOTTER_FUZZ_SEED:-1}"
took "hostile inputs, model mutants and fuzzing"

# Left in charge of cameras (issue 32): cameras that come back, stalls, restarts, albums that heal,
# settings, bodies, wall-clock times, DeepStack as Frigate calls it, a real RTSP camera.
"$venv/bin/python" scripts/check_recorder.py .build/release/spotter > .build/check-recorder.log 2>&1 || { cat .build/check-recorder.log; exit 1; }
cat .build/check-recorder.log
recorder=$(tail -1 .build/check-recorder.log)
recorder_passed=${recorder%% passed*}
took "check_recorder"

# Objects over time (issue 33): tracking quality against the anchors of Roboflow's `trackers` on the
# shared MOT15 sequences (its own venv), and zones and lines against an independent implementation.
scripts/bench_tracking.py .build/release/spotter --quality-only --rounds 1 | tee .build/bench-tracking.log
grep -q "^passed" .build/bench-tracking.log || { echo "tracking fell below the best anchor"; exit 1; }
"$venv/bin/python" scripts/check_zones.py .build/release/spotter > .build/check-zones.log 2>&1 || { cat .build/check-zones.log; exit 1; }
cat .build/check-zones.log
zones=$(tail -1 .build/check-zones.log)
zones_passed=${zones%%/*}
# Ids per visit, clips against the peer's rule, single-frame flashes, a parked object, motion gating
# (LiteRT's detections as the reference); then the server's JSON against its OpenAPI document.
"$venv/bin/python" scripts/check_objects.py .build/release/spotter 2>&1 | grep -v "^INFO: " > .build/check-objects.log || true
cat .build/check-objects.log
grep -q " 0 failed$" .build/check-objects.log || { echo "objects over time failed"; exit 1; }
objects=$(tail -1 .build/check-objects.log)
objects_passed=${objects%% passed*}
"$venv/bin/python" scripts/check_openapi.py .build/release/spotter > .build/check-openapi.log 2>&1 || { cat .build/check-openapi.log; exit 1; }
cat .build/check-openapi.log
openapi=$(tail -1 .build/check-openapi.log)
openapi_passed=${openapi%% passed*}
# `spotter val` (issue 35): the 12 COCO numbers against pycocotools on the saved detections, AP
# against the Python peer (scripts/val_peer.py) on ../shared/coco128, and bad input.
"$venv/bin/python" scripts/check_val.py .build/release/spotter 2>&1 | grep -v "^INFO: " > .build/check-val.log || { cat .build/check-val.log; exit 1; }
cat .build/check-val.log
val=$(tail -1 .build/check-val.log)
val_passed=${val%% of*}
took "tracking, zones, objects, OpenAPI and val checks"

# `spotter serve` in Debian's Chromium (screenshots in .build/artifacts/).
"$venv/bin/python" scripts/check_server.py .build/release/spotter > .build/check-server.log 2>&1 || { cat .build/check-server.log; exit 1; }
cat .build/check-server.log
server=$(tail -1 .build/check-server.log)
server_passed=${server%% passed*}
took "check_server"
# Several nodes on one PostgreSQL (issue 37): a throwaway server from Debian's package, three nodes,
# six sources spread over them, kill -9 and failover, graceful hand-over, the shared album's clips.
"$venv/bin/python" scripts/check_cluster.py .build/release/spotter > .build/check-cluster.log 2>&1 || { cat .build/check-cluster.log; exit 1; }
cat .build/check-cluster.log
cluster=$(tail -1 .build/check-cluster.log)
cluster_passed=${cluster%% passed*}
took "check_cluster"
echo "total: $((swift_tests + cluster_tests + asan_tests + cli_passed + 1 + security_passed + 2 + recorder_passed + zones_passed + objects_passed + openapi_passed + val_passed + server_passed + cluster_passed)) passed, 0 failed"
