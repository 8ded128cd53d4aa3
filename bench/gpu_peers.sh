#!/usr/bin/env bash
# remat beside what a PyTorch user would pick instead (bench/python/peers.py:
# Hugging Face checkpointing, selective checkpointing, torch.compile's
# memory budget, save_on_cpu, remat, its offload, compiled and hindsight
# variants) on a GPU, without Bazel: builds remat's Python extension with
# the C++ compiler alone against the installed CUDA PyTorch (without gRPC:
# it plans in process; tests/gpu_build.sh says what else it needs), then
# runs peers.py on a Llama of width 1024 (8 layers, 16 heads, vocabulary
# 32000, SDPA attention), batch 8, lengths 32..2048 (log-normal, median
# 512), under 0.45 of its no-checkpoint peak at 2048 tokens. Peaks come
# from CUDA's caching-allocator statistics. Every strategy's copy of the
# model stays on the GPU (about 3 GiB each with its optimizer state), so
# the largest step runs beside them within an H100's 80 GB. Prints
# peers.py's JSON lines and table; sized to finish, build included,
# within 10 minutes on one H100.
#
# It needs Python's headers (python3-dev) for $PYTHON and the packages
# peers.py imports (transformers) beside that PyTorch.
#
# On a machine without a GPU it builds the extension, runs three strategies
# for two tiny CPU steps with it and stops with exit 77 (CI's rehearsal).
# Exit codes: 0 ran; 77 skipped; else failed.
# Usage: bench/gpu_peers.sh [more peers.py flags, e.g. --steps 80]
#   (PYTHON=/path/to/python3 for another PyTorch)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=gpu_peers
source tests/gpu_build.sh

gpu_probe
"$PYTHON" -c 'import transformers' 2>/dev/null ||
  skip "transformers is not installed for $PYTHON"
PY_INCLUDE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -e "$PY_INCLUDE/Python.h" ] ||
  fail "Python.h not found in $PY_INCLUDE; install Python's headers (python3-dev)"

# The extension's own source, with the flags a Python module needs (its
# one exported symbol; pybind11 comes with PyTorch's headers); the rest as
# the other GPU scripts build it, so a shared build folder is reused.
gpu_compile "${RUNTIME_SRCS[@]}"
CXXFLAGS+=(-DREMAT_NO_REMOTE_PLANNER -fvisibility=hidden -isystem "$PY_INCLUDE")
gpu_compile client/python/core_module.cc
site=$BUILD_DIR/site
mkdir -p "$site/remat"
cp client/python/remat/*.py "$site/remat/"
objs=()
while read -r src; do objs+=("$(_obj "$src")"); done < <(
  gpu_sources client/python/core_module.cc "${RUNTIME_SRCS[@]}")
"$CXX" -shared -o "$site/remat/_core.so" "${objs[@]}" "${LIBS[@]}" \
  -ltorch_python || fail "linking _core.so"
echo "$NAME: built $site/remat/_core.so"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}

# Two tiny steps on the CPU prove the extension loads and plans (on any
# machine: a rehearsal's check), before the GPU is asked for.
"$PYTHON" bench/python/peers.py --device cpu --strategies none,remat,hindsight \
  --steps 2 --rounds 1 --layers 2 --width 32 --heads 2 --vocab 64 \
  --batch 2 --max-seq 64 --median-seq 48 >"$BUILD_DIR/peers_cpu.txt" ||
  fail "peers.py failed on the CPU"
[ "$(grep -c '"bench": "peers"' "$BUILD_DIR/peers_cpu.txt")" = 3 ] ||
  fail "the CPU run printed $(grep -c '"bench": "peers"' "$BUILD_DIR/peers_cpu.txt") lines, not one per strategy"
echo "$NAME: CPU smoke run: 3 strategies"
gpu_require_gpu

echo "$NAME: Llama, width 1024, on $("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0))' 2>/dev/null)"
start=$SECONDS
"$PYTHON" bench/python/peers.py --device cuda --layers 8 --width 1024 \
  --heads 16 --vocab 32000 --attention sdpa --batch 8 --max-seq 2048 \
  --median-seq 512 --steps 40 --rounds 4 "$@" || fail "the benchmark failed"
echo "$NAME: PASSED in $((SECONDS - start)) s (run only)"
