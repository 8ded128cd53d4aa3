#!/usr/bin/env bash
# The strategy benchmark (bench:e2e: none, all, sqrt, static_max,
# mimose_greedy, exact) on a GPU, without Bazel: builds it and the demo
# trainer's library with the C++ compiler against the LibTorch inside the
# installed CUDA PyTorch (tests/gpu_build.sh says what else it needs), then
# trains a BERT-base-like encoder (12 layers, width 768, 12 heads, FFN 3072,
# vocabulary 30522, batch 32, sequence lengths 32..512 drawn as in the demo:
# log-normal, median 150) under a budget of 0.45 of its no-checkpoint peak
# at 512 tokens, for every strategy, each in a process of its own. Peaks
# come from CUDA's caching-allocator statistics (CudaMemorySource). Prints
# bench:e2e's JSON lines, one per strategy; sized to finish, build included,
# within 8 minutes on one H200.
#
# On a machine without a GPU it compiles and links everything, runs a few
# tiny CPU steps and stops with exit 77 (CI's rehearsal). Exit codes: 0 ran; 77 skipped; else failed.
# Usage: bench/gpu_e2e.sh [more bench:e2e flags, e.g. --steps 100 --svg FILE]
#   (PYTHON=/path/to/python3 for another PyTorch)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=gpu_e2e
source tests/gpu_build.sh

SRCS=(bench/e2e.cc bench/lockstep.cc bench/svg_chart.cc
  examples/cnn.cc examples/decoder.cc examples/encoder.cc examples/models.cc
  examples/trainer.cc examples/trainer_flags.cc
  examples/workload.cc "${RUNTIME_SRCS[@]}")

gpu_probe
gpu_compile "${SRCS[@]}"
gpu_link "$BUILD_DIR/e2e" "${SRCS[@]}"
# A few tiny steps on the CPU prove the binary runs every strategy (on any
# machine: a rehearsal's check), before the GPU is asked for.
"$BUILD_DIR/e2e" --device cpu --steps 4 --depth 2 --width 32 --heads 2 \
  --ffn 32 --vocab 64 --batch 2 --max-seq 64 --svg "" >"$BUILD_DIR/cpu.jsonl" ||
  fail "the benchmark failed on the CPU"
[ "$(grep -c '"bench":"e2e"' "$BUILD_DIR/cpu.jsonl")" = 8 ] ||
  fail "the CPU run printed $(wc -l <"$BUILD_DIR/cpu.jsonl") lines, not one per strategy"
echo "gpu_e2e: CPU smoke run: 8 strategies"
gpu_require_gpu

echo "gpu_e2e: BERT-base-like encoder on $("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0))' 2>/dev/null)"
start=$SECONDS
"$BUILD_DIR/e2e" --device cuda --depth 12 --width 768 --heads 12 --ffn 3072 \
  --vocab 30522 --batch 32 --min-seq 32 --max-seq 512 --median-seq 150 \
  --steps 200 --budget-fraction 0.45 --svg bench/gpu_e2e.svg "$@" ||
  fail "the benchmark failed"
echo "gpu_e2e: PASSED in $((SECONDS - start)) s (run only)"
