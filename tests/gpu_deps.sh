#!/usr/bin/env bash
# Copies what tests/gpu_build.sh needs besides PyTorch from this machine's
# Debian packages into one folder (default .gpu-deps, which git ignores), for
# a GPU machine that has PyTorch, a compiler and CUDA but none of these:
# abseil's headers and shared libraries (links dereferenced, under both
# names), Eigen 3, nlohmann/json, CLI11 and Catch2 v2 headers. About 20 MB.
# Then, there: REMAT_GPU_DEPS=.gpu-deps tests/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-deps}
rm -rf "$out"
mkdir -p "$out/include" "$out/lib"
for d in absl eigen3 nlohmann CLI catch2; do
  [ -e "/usr/include/$d" ] || { echo "gpu_deps: /usr/include/$d missing; run ./setup.sh" >&2; exit 1; }
  cp -rL "/usr/include/$d" "$out/include/"
done
cp -L /usr/lib/x86_64-linux-gnu/libabsl_*.so /usr/lib/x86_64-linux-gnu/libabsl_*.so.* "$out/lib/"
echo "gpu_deps: $(du -sh "$out" | cut -f1) in $out"
