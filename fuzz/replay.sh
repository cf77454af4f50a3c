#!/bin/sh
# Runs a fuzz target's replay driver over its seed corpus (bazel/fuzz.bzl): passes when every
# input ran without a crash or a failed check.
set -eu
fuzzer=$1
shift
[ "$#" -gt 0 ] || { echo "replay.sh: no corpus files" >&2; exit 1; }
out=$("$fuzzer" "$@")
echo "$out"
[ "$out" = "$# inputs ran" ]
