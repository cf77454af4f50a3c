#!/usr/bin/env bash
# Runs quadsock's fuzz targets (fuzz/, tagged "fuzzer") with libFuzzer: builds them under
# --config=fuzz (clang 14, -fsanitize=fuzzer,address,undefined), then runs each from a copy of
# its seed corpus (fuzz/corpus/NAME without "_fuzzer"; what it finds stays in the work
# directory), with its dictionary (fuzz/dicts/) and flags (fuzz/flags/) if it has them. A crash,
# a leak, a timeout or a failed check fails that target and keeps the reproducer
# (WORKDIR/NAME/crash-*; replay it: `bazel run --config=fuzz //fuzz:NAME -- FILE`). For each
# target it prints executions, their rate and the edges covered; it ends with "N passed, N
# failed".
#
#   scripts/fuzz.sh --minutes=10                       # each target ten minutes
#   scripts/fuzz.sh --seconds=35                       # the test command's bounded run
#   scripts/fuzz.sh --runs=10000000 --targets=frame_fuzzer   # ten million executions
#   scripts/fuzz.sh --runs=10000000 --jobs=2 --targets=service_fuzzer
#                     # two processes on one corpus (libFuzzer's -jobs), the runs shared out:
#                     # the executions are their sum, the rate too, the edges the larger
#   scripts/fuzz.sh --workdir=DIR                      # keep corpora and crashes there
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=60
runs=0
jobs=1
targets=""
workdir=""
for arg in "$@"; do
  case "$arg" in
    --minutes=*) seconds=$((${arg#*=} * 60)) ;;
    --seconds=*) seconds=${arg#*=} ;;
    --runs=*) runs=${arg#*=} ;;
    --jobs=*) jobs=${arg#*=} ;;
    --targets=*) targets=${arg#*=} ;;
    --workdir=*) workdir=${arg#*=} ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "scripts/fuzz.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
case "$jobs" in
  '' | *[!0-9]* | 0) echo "scripts/fuzz.sh: --jobs wants a number from 1" >&2; exit 2 ;;
esac
# AddressSanitizer's options for fuzzing, measured on service_fuzzer, which allocates on every
# call (replaying its 1,000 longest inputs twice: 7.0 s with the defaults, 4.7 s with these):
# - 32 MiB of freed memory in quarantine, not 256 (a use after free within an input is still
#   caught), and none given back to the kernel while a target runs (madvise's TLB shootdowns);
# - no stacks recorded at malloc and free: a report names the faulting access's stack only, so
#   replay the reproducer (see above) for where the memory was allocated and freed.
# Your own ASAN_OPTIONS come after these, and win.
asan="quarantine_size_mb=32:allocator_release_to_os_interval_ms=-1:malloc_context_size=0"
export ASAN_OPTIONS="$asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
[ -n "$workdir" ] || workdir=$(mktemp -d /tmp/quadsock-fuzz.XXXXXX)
mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)  # the jobs run in their own directory
if [ -z "$targets" ]; then
  targets=$(bazel query 'attr(tags, "\bfuzzer\b", //fuzz:all)' 2>/dev/null | sed 's|^//fuzz:||' | paste -sd,)
fi
[ -n "$targets" ] || { echo "scripts/fuzz.sh: no fuzz targets found"; echo "0 passed, 1 failed"; exit 1; }
IFS=, read -r -a names <<<"$targets"
labels=("${names[@]/#///fuzz:}")
echo "== bazel build --config=fuzz ${labels[*]}"
if ! bazel build --config=fuzz "${labels[@]}" >"$workdir/build.log" 2>&1; then
  tail -n 30 "$workdir/build.log"
  echo "0 passed, ${#names[@]} failed"
  exit 1
fi
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)/fuzz

passed=0
failed=0
for name in "${names[@]}"; do
  dir="$workdir/$name"
  mkdir -p "$dir/corpus"
  cp fuzz/corpus/"${name%_fuzzer}"/* "$dir/corpus/" 2>/dev/null
  flags=(-print_final_stats=1 -timeout=10 -rss_limit_mb=2048 "-artifact_prefix=$dir/")
  [ -f "fuzz/dicts/${name%_fuzzer}.dict" ] && flags+=("-dict=$PWD/fuzz/dicts/${name%_fuzzer}.dict")
  # A target's own libFuzzer flags, one per line (fuzz/flags/NAME.flags: e.g. -max_len).
  [ -f "fuzz/flags/${name%_fuzzer}.flags" ] && mapfile -t -O "${#flags[@]}" flags <"fuzz/flags/${name%_fuzzer}.flags"
  if [ "$runs" -gt 0 ]; then
    flags+=("-runs=$(((runs + jobs - 1) / jobs))")
  else
    flags+=("-max_total_time=$seconds")
  fi
  reproducers() { ls "$dir" | grep -cE '^(crash|leak|timeout|oom)-'; }
  found_before=$(reproducers)
  if [ "$jobs" -gt 1 ]; then
    # Each job writes DIR/fuzz-N.log (libFuzzer names them, in its working directory).
    flags+=("-jobs=$jobs" "-workers=$jobs")
    (cd "$dir" && "$bin/$name" "${flags[@]}" "$dir/corpus") >"$dir/log" 2>&1
    status=$?
    logs=("$dir"/fuzz-*.log)
  else
    "$bin/$name" "${flags[@]}" "$dir/corpus" >"$dir/log" 2>&1
    status=$?
    logs=("$dir/log")
  fi
  # A job that failed may leave its parent's exit 0: a new reproducer says so.
  [ "$(reproducers)" -gt "$found_before" ] && status=1
  stats() { sed -n "s/^stat::$1: *//p" "${logs[@]}"; }  # a line a job
  executed=$(stats number_of_executed_units | awk -v j=$jobs '{n += $1} END {if (NR == j) print n}')
  rate=$(stats average_exec_per_sec | awk '{n += $1} END {if (NR) print n}')
  edges=$(grep -ho 'cov: [0-9]*' "${logs[@]}" | cut -d' ' -f2 | sort -n | tail -n 1)
  summary="${executed:-?} executions, ${rate:-?}/s, ${edges:-?} edges, $(ls "$dir/corpus" | wc -l) corpus inputs"
  if [ "$status" -eq 0 ] && [ -n "$executed" ]; then
    echo "   [$name] PASSED: $summary"
    passed=$((passed + 1))
  else
    echo "   [$name] FAILED (exit $status): $summary; reproducer and log in $dir:"
    grep -hE 'ERROR|check failed|SUMMARY|Test unit written' "${logs[@]}" | head -n 10 |
      sed 's/^/     /'
    failed=$((failed + 1))
  fi
done
echo "fuzz work directory: $workdir"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
