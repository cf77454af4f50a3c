#!/usr/bin/env bash
# scripts/test.sh judged with a stand-in bazel: each case is what a real bazel run can print,
# and test.sh must count it right (a verdict replayed from the cache, a flaky test, a build
# error, an empty query and a run that reports nothing are failures; only a test that ran and
# passed is a pass).
#
#   bazel test //scripts:test_sh_test        (or run it directly: scripts/test_sh_test.sh)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The stand-in: `bazel query ...` and `bazel test ...` answer as $FAKE_BAZEL says.
mkdir "$work/bin"
cat >"$work/bin/bazel" <<'FAKE'
#!/usr/bin/env bash
case "$1:$FAKE_BAZEL" in
  query:empty-query) exit 0 ;;
  query:*) echo "//x:a_test" ;;
  test:pass) echo "//x:a_test                PASSED in 0.1s" ;;
  test:cached) echo "//x:a_test                (cached) PASSED in 0.1s" ;;
  test:flaky) echo "//x:a_test                FLAKY, failed in 1 out of 2 in 0.2s" ;;
  test:failed) echo "//x:a_test                FAILED in 0.1s"; exit 3 ;;
  test:build-error) echo "ERROR: /x/BUILD.bazel:3:1: no such target '//x:b'"; exit 1 ;;
  test:nothing-reported) echo "INFO: Build completed successfully, 0 total actions" ;;
  *) echo "stand-in bazel: no case $1:$FAKE_BAZEL" >&2; exit 2 ;;
esac
FAKE
chmod +x "$work/bin/bazel"

passed=0
failed=0
# expect CASE CONFIG WANTED_LAST_LINE WANTED_EXIT [WANTED_TEXT]
expect() {
  local case=$1 config=$2 last=$3 code=$4 text=${5:-}
  local out status
  out=$(env PATH="$work/bin:$PATH" FAKE_BAZEL="$case" QUADSOCK_TEST_CONFIGS="$config" \
    QUADSOCK_TEST_SETUP=0 QUADSOCK_TEST_CONTAINER=0 QUADSOCK_TEST_DEB=0 QUADSOCK_TEST_DEMO=0 \
    QUADSOCK_TEST_FUZZ=0 QUADSOCK_TEST_LOGS="$work/logs-$case" "$here/test.sh" </dev/null 2>&1)
  status=$?
  local got_last
  got_last=$(printf '%s\n' "$out" | tail -n 1)
  if [ "$got_last" = "$last" ] && [ "$status" -eq "$code" ] &&
     { [ -z "$text" ] || grep -qF -- "$text" <<<"$out"; }; then
    echo "PASSED $case: $got_last (exit $status)"
    passed=$((passed + 1))
  else
    echo "FAILED $case: wanted \"$last\" (exit $code)${text:+ and \"$text\"}; got \"$got_last\" (exit $status):"
    printf '%s\n' "$out" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

expect pass default "1 passed, 0 failed" 0
expect cached default "0 passed, 1 failed" 1 "not run here, replayed from the cache"
expect flaky default "0 passed, 1 failed" 1
expect failed default "0 passed, 1 failed" 1
expect build-error default "0 passed, 1 failed" 1 "bazel exited with 1 before tests ran"
expect nothing-reported default "0 passed, 1 failed" 1 "no test reported a result"
expect empty-query tsan "0 passed, 1 failed" 1 "no tests to run"
expect pass "default asan" "2 passed, 0 failed" 0

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
