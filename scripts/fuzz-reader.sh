#!/usr/bin/env bash
# Fuzzes the .tflite reader (FlatBuffers, FlexBuffers, metadata, zip) with libFuzzer and
# AddressSanitizer for a given time, then prints executions and crashes. A tool, not part of CI.
#   scripts/fuzz-reader.sh [SECONDS]    (default 60)
# Crashing inputs are kept in .build/fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=.build/fuzz
mkdir -p "$out/corpus" "$out/crashes"
swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name FuzzReader \
  Sources/TFLiteFormat/*.swift Fuzz/ReaderFuzzer.swift -o "$out/reader" 2>"$out/build.log" \
  || { cat "$out/build.log" >&2; exit 1; }
# Seeds: small real models (the op fixtures and the metadata fixture).
for f in Tests/Fixtures/ops/*/model.tflite Tests/Fixtures/metadata/*.tflite Tests/Fixtures/invalid/*.tflite; do
  cp "$f" "$out/corpus/$(echo "$f" | tr '/' '_')"
done
log="$out/last-run.log"
set +e
"$out/reader" "$out/corpus" -max_total_time="$seconds" -max_len=65536 -artifact_prefix="$out/crashes/" \
  -print_final_stats=1 >"$log" 2>&1
status=$?
set -e
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
crashes=$(find "$out/crashes" -type f | wc -l)
echo "fuzzed for ${seconds}s: ${executions:-?} executions, $crashes crashing inputs (log: $log)"
[ "$status" -eq 0 ] && [ "$crashes" -eq 0 ]
