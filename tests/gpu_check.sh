#!/usr/bin/env bash
# Validates the CUDA path on a machine with a GPU, without Bazel: builds the
# CUDA memory source, the copy engines, the checkpoint and offload runtime
# and the collector, runtime and CUDA copy engine tests with the C++
# compiler against the LibTorch inside the installed PyTorch
# (tests/gpu_build.sh says what else it needs), then runs them: the [cuda]
# cases must run, not skip (bit-for-bit offload on the GPU, a copy that
# overlaps compute, a warm pinned pool), and the runtime's bit-for-bit
# checks must hold under that LibTorch's version (collector/torch_compat.h).
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
TESTS=(collector/collector_torch_test client/runtime_test
  kernels/cuda_copy_engine_test)
gpu_compile "${LIB_SRCS[@]}" "${TESTS[@]/%/.cc}"
for t in "${TESTS[@]}"; do
  gpu_link "$BUILD_DIR/$(basename "$t")" "${LIB_SRCS[@]}" "$t.cc"
done

# Everything runs on any machine (the [cuda] cases skip without a GPU), so a
# rehearsal also proves the binaries load and pass; only then is a GPU needed.
echo "gpu_check: collector cases"
"$BUILD_DIR/collector_torch_test" || fail "collector_torch_test"
echo "gpu_check: runtime cases (checkpoint correctness under this LibTorch)"
"$BUILD_DIR/runtime_test" || fail "runtime_test"
echo "gpu_check: copy engine cases"
"$BUILD_DIR/cuda_copy_engine_test" || fail "cuda_copy_engine_test"
gpu_require_gpu

for t in "${TESTS[@]}"; do
  name=$(basename "$t")
  echo "gpu_check: [cuda] cases of $name"
  out=$("$BUILD_DIR/$name" "[cuda]" --success 2>&1) || {
    echo "$out"; fail "[cuda] cases of $name"; }
  echo "$out" | grep -E "overlap:" || true
  echo "$out" | tail -3
  if grep -qi "skipped" <<<"$out"; then
    echo "$out" | grep -i -B2 -A2 skipped
    fail "[cuda] cases of $name skipped on a GPU machine"
  fi
done
echo "gpu_check: PASSED"
