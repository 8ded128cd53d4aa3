#!/usr/bin/env bash
# Validates the CUDA path on a machine with a GPU, without Bazel: builds the
# CUDA memory source, the checkpoint runtime and the collector and runtime
# tests with the C++ compiler against the LibTorch inside the installed
# PyTorch (tests/gpu_build.sh says what else it needs), then runs them: the
# [cuda] cases must run, not skip, and the runtime's bit-for-bit checks
# must hold under that LibTorch's version (collector/torch_compat.h).
#
# On a machine without a GPU it compiles and links everything (CUDA too,
# when that PyTorch has it), runs what needs no GPU and stops with exit 77:
# CI's rehearsal, so that a GPU run never finds a build error.
#
# Exit codes: 0 passed; 77 skipped (no PyTorch, or no GPU); else failed.
# Usage: tests/gpu_check.sh   (PYTHON=/path/to/python3 for another PyTorch)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=gpu_check
source tests/gpu_build.sh

LIB_SRCS=("${RUNTIME_SRCS[@]}" third_party/catch2_main.cc)

gpu_probe
gpu_compile "${LIB_SRCS[@]}" collector/collector_torch_test.cc client/runtime_test.cc
gpu_link "$BUILD_DIR/collector_torch_test" "${LIB_SRCS[@]}" collector/collector_torch_test.cc
gpu_link "$BUILD_DIR/runtime_test" "${LIB_SRCS[@]}" client/runtime_test.cc

# Everything runs on any machine (the [cuda] cases skip without a GPU), so a
# rehearsal also proves the binaries load and pass; only then is a GPU needed.
echo "gpu_check: collector cases"
"$BUILD_DIR/collector_torch_test" || fail "collector_torch_test"
echo "gpu_check: runtime cases (checkpoint correctness under this LibTorch)"
"$BUILD_DIR/runtime_test" || fail "runtime_test"
gpu_require_gpu

echo "gpu_check: [cuda] cases"
out=$("$BUILD_DIR/collector_torch_test" "[cuda]" --success 2>&1) || {
  echo "$out"; fail "[cuda] cases"; }
echo "$out" | tail -3
if grep -qi "skipped" <<<"$out"; then
  echo "$out" | grep -i -B2 -A2 skipped
  fail "[cuda] cases skipped on a GPU machine"
fi
echo "gpu_check: PASSED"
