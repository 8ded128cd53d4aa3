#!/usr/bin/env bash
# The test command: installs what the build needs, builds everything, runs
# every test target, and ends with one line "N passed, N failed" counting
# test targets.
set -uo pipefail
cd "$(dirname "$0")/.."
./setup.sh || exit 1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Always run the tests: a cached result proves nothing about this machine.
bazel test //... --test_summary=short --nocache_test_results 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ .*PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
# A build failure leaves tests unrun: count the run as failed.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1
fi
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
