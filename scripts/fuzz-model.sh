#!/usr/bin/env bash
# Fuzzes hostile model files with libFuzzer and AddressSanitizer: the .tflite reader (FlatBuffers,
# FlexBuffers, metadata, zip), the model report, and interpreter preparation on both backends
# (Fuzz/ModelFuzzer.swift). Seeds are the committed single-operator models, the invalid-model
# fixtures and, when ../shared is beside the repository, the shared models.
#   scripts/fuzz-model.sh [SECONDS] [RUNS SEED]   (default 60 s, random; scripts/test.sh runs a
#   fixed number of inputs from a fixed seed, so CI repeats itself; run it longer and unseeded by hand)
# Exits non-zero on a crash, a hang (-timeout, 10 s per input) or an allocation over 1 GiB
# (-malloc_limit_mb); the input that did it is kept in .build/fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
runs="${2:-}"
seed="${3:-}"
repeatable=()
[ -n "$runs" ] && repeatable+=(-runs="$runs")
[ -n "$seed" ] && repeatable+=(-seed="$seed")
out=.build/fuzz
mkdir -p "$out/obj" "$out/corpus" "$out/crashes"
flags=(-sanitize=fuzzer,address -parse-as-library -O -wmo -g -package-name Spotter)
{
  # TFLiteFormat and Inference as two modules, as the package builds them; the C kernels with clang.
  for c in Sources/CKernels/*.c; do
    clang -c -O2 -g -fsanitize=fuzzer-no-link,address -I Sources/CKernels/include "$c" -o "$out/obj/$(basename "$c" .c).o"
  done
  swiftc "${flags[@]}" -module-name TFLiteFormat -emit-module -emit-module-path "$out/obj/TFLiteFormat.swiftmodule" \
    -c Sources/TFLiteFormat/*.swift -o "$out/obj/TFLiteFormat.o"
  swiftc "${flags[@]}" -module-name Inference -emit-module -emit-module-path "$out/obj/Inference.swiftmodule" -I "$out/obj" \
    -I Sources/CXNNPACK -Xcc -fmodule-map-file=Sources/CXNNPACK/module.modulemap -I Sources/CKernels/include \
    -Xcc -fmodule-map-file="$out/obj/ckernels.modulemap" \
    -c $(find Sources/Inference -name '*.swift') -o "$out/obj/Inference.o"
  swiftc "${flags[@]}" -module-name ModelFuzzer -I "$out/obj" -I Sources/CXNNPACK -Xcc -fmodule-map-file=Sources/CXNNPACK/module.modulemap \
    -Xcc -fmodule-map-file="$out/obj/ckernels.modulemap" Fuzz/ModelFuzzer.swift "$out"/obj/*.o -lXNNPACK -lpthreadpool -o "$out/model"
} 2>"$out/build.log" < /dev/null || { cat "$out/build.log" >&2; exit 1; } &
printf 'module CKernels {\n  header "%s/Sources/CKernels/include/spotter_kernels.h"\n  export *\n}\n' "$PWD" > "$out/obj/ckernels.modulemap"
wait $! || exit 1
for f in Tests/Fixtures/ops/*/model.tflite Tests/Fixtures/metadata/*.tflite Tests/Fixtures/invalid/*.tflite Tests/Fixtures/models/*/*.tflite ../shared/models/*/*.tflite; do
  [ -f "$f" ] && cp "$f" "$out/corpus/$(echo "$f" | tr '/' '_')"
done
log="$out/last-run.log"
set +e
SWIFT_BACKTRACE=enable=no "$out/model" "$out/corpus" ${repeatable[@]+"${repeatable[@]}"} -max_total_time="$seconds" -max_len=5000000 -timeout=10 -malloc_limit_mb=1024 -rss_limit_mb=2048 \
  -artifact_prefix="$out/crashes/" -print_final_stats=1 >"$log" 2>&1
status=$?
set -e
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
crashes=$(find "$out/crashes" -type f -newer "$out/model" | wc -l)
echo "fuzzed model files for ${seconds}s: ${executions:-?} inputs, $crashes crashing, hanging or over-allocating (log: $log)"
if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  # What libFuzzer and AddressSanitizer said about the input, so that a failed CI run can be read
  # without the machine it ran on.
  echo "--- the report (from $log) ---"
  sed -n '/==ERROR\|ALARM\|out-of-memory\|Fatal error\|deadly signal\|SUMMARY/,$p' "$log" | grep -v '^#[0-9]' | head -80
  for f in $(find "$out/crashes" -type f -newer "$out/model"); do
    size=$(gzip -9 -c "$f" | wc -c)
    echo "--- $f: $(stat -c %s "$f") bytes, $size gzipped ---"
    # Small enough to carry in a log: `base64 -d | gunzip > crash.tflite` gives the input back.
    if [ "$size" -le 65536 ]; then gzip -9 -c "$f" | base64 -w 120; fi
  done
fi
[ "$status" -eq 0 ] && [ "$crashes" -eq 0 ]
