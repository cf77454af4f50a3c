#!/bin/bash
# Runs a Google Benchmark binary briefly (its first argument; the rest are passed on) and fails
# when it fails or any of its cases reports an error (SkipWithError: a benchmark whose own check
# failed), so that a benchmark cannot rot between the runs that take its figures.
set -euo pipefail
binary="$1"
shift
out="${TEST_TMPDIR:-/tmp}/benchmark.json"
"$binary" --benchmark_min_time=0.01 --benchmark_format=json "$@" >"$out"
if grep -q '"error_occurred": true' "$out"; then
  grep -B3 -A3 '"error_occurred": true' "$out" >&2
  exit 1
fi
if ! grep -q '"name":' "$out"; then
  echo "no benchmark ran" >&2
  exit 1
fi
