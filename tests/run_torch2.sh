#!/usr/bin/env bash
# The second test command: the targets that link LibTorch or CUDA (their
# tests among them) against the current PyTorch's LibTorch (2.x) with every
# CUDA code path compiled and linked (--config=cuda, which implies
# --config=torch2; see .bazelrc), then the checks that are not Bazel tests:
#   * the planning core is free of LibTorch and gRPC under both configs;
#   * the Python package installs with pip and its example trains 100
#     steps within budget with the loss falling (tests/python_example.sh);
#     the examples on Hugging Face's and torchvision's models run a few
#     steps each within budget (tests/python_model_examples.sh);
#   * the GPU scripts' rehearsal: tests/gpu_check.sh, bench/gpu_e2e.sh and
#     bench/gpu_peers.sh build everything (CUDA included; the last, remat's
#     Python extension) with the C++ compiler alone against
#     that PyTorch and the folder tests/gpu_deps.sh packs for a GPU machine,
#     run what needs no GPU, and stop with 77 where there is none.
# On a machine without a GPU the [cuda] cases skip; their reasons are
# listed. Installs what it needs first (./setup.sh --torch2: PyPI, ~5.5 GB
# once). Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
./setup.sh --torch2 || exit 1

source tests/run_lib.sh
venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}

# What links LibTorch, CUDA or torch's Python, the tests among it: all
# that this config builds differently. The rest (the planning core, the
# daemon, their tests) is the same code, which tests/run_all.sh tests; the
# targets here build much of it again, as C++20, on the way.
targets=$(bazel query 'rdeps(//..., //third_party:torch + //third_party:cuda_runtime
  + //third_party:nvcc + //third_party:torch_python)' 2>/dev/null)
[ -n "$targets" ] || { echo "run_torch2: no targets link LibTorch?" >&2; exit 1; }
run_tests --config=cuda -- $targets

echo "CUDA cases skipped in this run, and why:"
testlogs=$(bazel info --config=cuda bazel-testlogs 2>/dev/null)
find "$testlogs" -name test.log -print0 2>/dev/null | xargs -0 -r awk '
  /^[^ ]+\.cc:[0-9]+:/ { where = $1 }
  /SKIPPED:/ { reason = $0; getline more; if (more !~ /^$/) reason = reason " " more
               gsub(/ +/, " ", reason); print "  " where reason }'
echo

check core_light_default tests/core_light.sh
check core_light_torch2 tests/core_light.sh --config=torch2
check core_light_cuda tests/core_light.sh --config=cuda

# The Python install and example commands of the README and docs/python.md.
check python_example tests/python_example.sh
# The examples on Hugging Face's and torchvision's models, a few steps each.
check python_model_examples tests/python_model_examples.sh
# The wheel in a new environment, from outside the checkout.
check python_wheel tests/wheel_check.sh
# A CMake project links the installed C++ client (client/install.sh).
check cmake_consumer tests/cmake_consumer.sh
# remat beside PyTorch's own tools (bench/python/peers.py), a tiny model
# for a few steps: it runs, and every strategy prints its line.
check python_peers bash -c "\"$venv/bin/python\" bench/python/peers.py \
  --steps 4 --rounds 2 --layers 2 --width 64 --max-seq 128 --median-seq 64 \
  --compile-budgets 0.5 |
  tee /dev/stderr | grep -c '\"bench\": \"peers\"' | grep -qx 10"

# One build folder for all three, so each compiles only its own files.
deps=$(mktemp -d)
trap 'rm -rf "$deps" "$_log"' EXIT
tests/gpu_deps.sh "$deps/gpu-deps"
check --skip-ok gpu_check_rehearsal env PYTHON="$venv/bin/python" \
  REMAT_GPU_DEPS="$deps/gpu-deps" REMAT_GPU_BUILD_DIR="$deps/build" \
  tests/gpu_check.sh
check --skip-ok gpu_e2e_rehearsal env PYTHON="$venv/bin/python" \
  REMAT_GPU_DEPS="$deps/gpu-deps" REMAT_GPU_BUILD_DIR="$deps/build" \
  bench/gpu_e2e.sh
check --skip-ok gpu_peers_rehearsal env PYTHON="$venv/bin/python" \
  REMAT_GPU_DEPS="$deps/gpu-deps" REMAT_GPU_BUILD_DIR="$deps/build" \
  bench/gpu_peers.sh

counts
[ "$failed" -eq 0 ]
