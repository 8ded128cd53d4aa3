# Sourced by the test commands (tests/run_all.sh, tests/run_torch2.sh):
# counts test targets over several `bazel test` runs and checks.
#   run_tests ARGS...   one `bazel test` run; adds its targets to the counts
#   check NAME CMD...   one check that is not a Bazel test; passes when CMD
#                       exits 0 (or 77, "skipped", where it says so)
#   counts              prints the last line: "N passed, N failed"
passed=0
failed=0
_log=$(mktemp)
trap 'rm -f "$_log"' EXIT

# Always runs the tests: a cached result proves nothing about this machine.
run_tests() {
  bazel test --test_summary=short --nocache_test_results "$@" 2>&1 | tee "$_log"
  local rc=${PIPESTATUS[0]} p f
  p=$(grep -cE '^//[^ ]+ .*PASSED' "$_log")
  f=$(grep -cE '^//[^ ]+ .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$_log")
  # A build failure leaves tests unrun: count the run as failed.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
}

# `check --skip-ok NAME CMD...` also counts exit 77 as passed.
check() {
  local skip_ok=0
  if [ "$1" = --skip-ok ]; then skip_ok=1; shift; fi
  local name=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" -eq 0 ] || { [ "$skip_ok" = 1 ] && [ "$rc" -eq 77 ]; }; then
    echo "check $name PASSED"
    passed=$((passed + 1))
  else
    echo "check $name FAILED (exit $rc)"
    failed=$((failed + 1))
  fi
}

counts() {
  echo "${passed} passed, ${failed} failed"
}
