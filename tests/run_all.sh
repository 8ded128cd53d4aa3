#!/usr/bin/env bash
# The test command: installs what the build needs, builds everything, runs
# every test target, then the tests tagged "asan" under ASan+UBSan
# (--config=asan, see .bazelrc) and those tagged "tsan" under TSan
# (--config=tsan), the fuzz targets, the Debian package and the
# documentation's commands, and ends with one line "N passed, N failed"
# counting test targets over all runs.
set -uo pipefail
cd "$(dirname "$0")/.."
./setup.sh || exit 1

source tests/run_lib.sh

run_tests //...
run_tests --config=asan --test_tag_filters=asan --build_tests_only //...
run_tests --config=tsan --test_tag_filters=tsan --build_tests_only //...

# The fuzz targets under real libFuzzer (clang, ASan+UBSan, --config=fuzz),
# from the seed corpus, each for 20,000 inputs or 30 seconds, whichever comes
# first (the service and WAL targets, whose every input refits and writes a
# log, reach about 2,500 and 5,000 in that time); one test per target.
fuzz_log=$(mktemp)
tests/fuzz_long.sh --runs 20000 --seconds 30 2>&1 | tee "$fuzz_log"
fuzz_rc=${PIPESTATUS[0]}
fuzz_passed=$(grep -cE '^fuzz //[^ ]+ PASSED' "$fuzz_log")
fuzz_failed=$(grep -cE '^fuzz //[^ ]+ FAILED' "$fuzz_log")
if [ "$fuzz_rc" -ne 0 ] && [ "$fuzz_failed" -eq 0 ]; then
  fuzz_failed=1
fi
rm -f "$fuzz_log"
passed=$((passed + fuzz_passed))
failed=$((failed + fuzz_failed))

# The daemon's Debian package: built, unpacked into a throwaway root, run.
check debian_package deploy/deb_test.sh
# Every command of the README, bench/README.md and docs/: run as written,
# built, or named with the check that runs it.
check doc_commands tests/doc_commands.sh

counts
[ "$failed" -eq 0 ]
