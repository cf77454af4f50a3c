#!/usr/bin/env bash
# Runs every quadsock test on this machine, as root: installs what is missing (setup.sh), then
# `bazel test //...` in the default build and again under AddressSanitizer and
# UndefinedBehaviorSanitizer, the concurrency tests under ThreadSanitizer, quadsockd's container
# image against a kernel peer (docker/smoke.sh), the Debian package installed in a fresh
# Debian 12 container (packaging/deb_test.sh), the main job (scripts/demo.sh), which checks its
# own report, and each fuzz target under libFuzzer for 35 s (scripts/fuzz.sh). Privileged
# tests (BPF, AF_XDP, network namespaces) run too; one that cannot run fails, never skipped.
#
#   scripts/test.sh                              # everything; ends with "N passed, N failed"
#   QUADSOCK_TEST_CONFIGS=default scripts/test.sh    # only the plain build
#   QUADSOCK_TEST_DEMO=0 scripts/test.sh             # without the main job (scripts/demo.sh)
#   QUADSOCK_TEST_CONTAINER=0 scripts/test.sh        # without the container (docker/smoke.sh)
#   QUADSOCK_TEST_DEB=0 scripts/test.sh              # without the .deb (packaging/deb_test.sh)
#   QUADSOCK_TEST_FUZZ=0 scripts/test.sh             # without the fuzz step (scripts/fuzz.sh)
#   QUADSOCK_TEST_SETUP=0 scripts/test.sh            # without setup.sh (the machine is ready)
#
# Each test target counts once per configuration it runs in, and every one really runs: no
# verdict is replayed from Bazel's cache (the disk cache speeds up builds, not verdicts).
# Benchmark smoke runs (tag "benchmark") run in the default configuration only: a sanitizer
# tells nothing about a benchmark harness. A configuration with no tests to run, or whose run
# reports no test at all, is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) echo "scripts/test.sh: takes no arguments (settings are environment variables; see --help)" >&2
     exit 2 ;;
esac

configs=${QUADSOCK_TEST_CONFIGS:-"default asan ubsan tsan"}
logdir=${QUADSOCK_TEST_LOGS:-"$(mktemp -d /tmp/quadsock-test.XXXXXX)"}
mkdir -p "$logdir"
passed=0
failed=0

finish() {
  echo "test logs: $logdir"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

if [ "${QUADSOCK_TEST_SETUP:-1}" = 1 ] && ! scripts/setup.sh; then
  echo "setup failed: nothing could be tested"
  failed=1
  finish
fi

# Which targets each configuration runs: all of them, except ThreadSanitizer, which runs the
# tests tagged "tsan" (the concurrency tests; TSan makes everything else slow for no insight).
# Fails when the query does.
targets_for() {
  case "$1" in
    tsan) bazel query 'attr(tags, "\btsan\b", tests(//...))' 2>"$logdir/$1.query.log" ;;
    *) echo "//..." ;;
  esac
}

for config in $configs; do
  flags=(--nocache_test_results)
  [ "$config" = default ] || flags+=(--config="$config" --test_tag_filters=-benchmark)
  if ! targets_text=$(targets_for "$config"); then
    echo "== $config: FAILED: the query for its tests failed; the end of its output:"
    tail -n 30 "$logdir/$config.query.log" | sed 's/^/     /'
    failed=$((failed + 1))
    continue
  fi
  mapfile -t targets < <(printf '%s' "$targets_text" | grep .)
  if [ ${#targets[@]} -eq 0 ]; then
    echo "== $config: FAILED: no tests to run"
    failed=$((failed + 1))
    continue
  fi
  echo "== bazel test ${flags[*]} ${targets[*]}"
  log="$logdir/$config.log"
  bazel test --keep_going "${flags[@]}" -- "${targets[@]}" >"$log" 2>&1
  status=$?
  # The summary: one line per test target, e.g. "//stack/net:ip_test  PASSED in 0.1s". A
  # "(cached) PASSED" was not run here: it does not count as passed.
  summary=$(grep -E '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|FLAKY|TIMEOUT|NO STATUS|INCOMPLETE|FAILED TO BUILD|REMOTE FAILURE)' "$log")
  p=$(grep -cE '^//[^ ]+ +PASSED( |$)' <<<"$summary")
  f=$(grep -cvE '^//[^ ]+ +PASSED( |$)' <<<"$summary")
  [ -n "$summary" ] || f=0
  printf '%s\n' "$summary" | sed "s/^/   [$config] /"
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$status" -eq 0 ]; then
    # Bazel says all is well, and not one test said so: nothing was tested.
    echo "   [$config] FAILED: bazel ran and no test reported a result; the end of its output:"
    grep -vE '^INFO: (From|Elapsed)' "$log" | tail -n 30 | sed 's/^/     /'
    f=1
  elif [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
    # Bazel failed before any test could report (a BUILD error, a failed fetch): say so.
    echo "   [$config] bazel exited with $status before tests ran; the end of its output:"
    grep -vE '^INFO: (From|Elapsed)' "$log" | tail -n 30 | sed 's/^/     /'
    f=1
  elif [ "$f" -gt 0 ]; then
    echo "   [$config] failures (from $log):"
    grep -E ' \(cached\) ' <<<"$summary" | sed 's/^/     not run here, replayed from the cache: /'
    grep -E '^(ERROR|FAIL:)|\[  FAILED  \]|error:' "$log" | head -n 40 | sed 's/^/     /'
  fi
  passed=$((passed + p))
  failed=$((failed + f))
done

# A script that checks itself counts as one test: passed when it exits 0.
run_script() {  # run_script NAME TITLE COMMAND...
  local name=$1 title=$2
  shift 2
  echo "== $title"
  if "$@" >"$logdir/$name.log" 2>&1; then
    echo "   [$name] PASSED"
    passed=$((passed + 1))
  else
    echo "   [$name] FAILED; the end of its output:"
    tail -n 30 "$logdir/$name.log" | sed 's/^/     /'
    failed=$((failed + 1))
  fi
}

# quadsockd's container image, run with its minimal capabilities against a kernel peer.
if [ "${QUADSOCK_TEST_CONTAINER:-1}" = 1 ]; then
  run_script container "docker/smoke.sh (the container image)" docker/smoke.sh
fi
# The .deb, installed with apt in a fresh Debian 12 container and used there.
if [ "${QUADSOCK_TEST_DEB:-1}" = 1 ]; then
  run_script deb "packaging/deb_test.sh (the Debian package)" packaging/deb_test.sh
fi
# The main job, which checks its own report (every datagram accounted for).
if [ "${QUADSOCK_TEST_DEMO:-1}" = 1 ]; then
  run_script demo "scripts/demo.sh (the README's main job)" scripts/demo.sh
fi
# The fuzz targets under libFuzzer, a bounded time each, seven in about 4 minutes (last:
# --config=fuzz builds with clang).
# Each target counts as one test; a crash keeps its reproducer in the log's work directory.
if [ "${QUADSOCK_TEST_FUZZ:-1}" = 1 ]; then
  echo "== scripts/fuzz.sh --seconds=${QUADSOCK_FUZZ_SECONDS:-35}"
  scripts/fuzz.sh --seconds="${QUADSOCK_FUZZ_SECONDS:-35}" --workdir="$logdir/fuzz" \
    >"$logdir/fuzz.log" 2>&1
  grep -E '^   \[' "$logdir/fuzz.log"
  p=$(grep -cE '^   \[[^]]+\] PASSED' "$logdir/fuzz.log")
  f=$(grep -cE '^   \[[^]]+\] FAILED' "$logdir/fuzz.log")
  if [ $((p + f)) -eq 0 ]; then
    echo "   [fuzz] FAILED: no target ran; the end of its output:"
    tail -n 30 "$logdir/fuzz.log" | sed 's/^/     /'
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
fi
finish
