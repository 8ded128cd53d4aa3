#!/usr/bin/env bash
# The C++ client as a CMake project links it: client/install.sh installs
# it (against the torch 2.x environment's LibTorch 2.x) into a throwaway
# prefix, then examples/cmake (find_package(Torch), find_package(remat))
# is configured, built and run there, twice: with the in-process planner,
# then with RemotePlanner against a real rematd on a unix socket, which
# must then hold the trainer's model and samples. The trainer exits 0 when
# steps ran a planner's plan and none went over budget.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}
bash client/install.sh "$work/prefix" --torch2
ls "$work/prefix/lib/libremat_client.so" "$work/prefix/lib/cmake/remat/remat-config.cmake"
torch_root=$("$venv/bin/python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
# PyPI's CUDA torch: libtorch_cuda needs the NVIDIA libraries of the
# packages beside it, which the linker finds only when told where
# (-rpath-link); at run time libtorch's own RUNPATH finds them.
nvidia=$(find "$torch_root/../nvidia" -maxdepth 3 \
           -type d -name lib 2>/dev/null | paste -sd:)
cmake -S examples/cmake -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix;$torch_root;$torch_root/share/cmake" \
  ${nvidia:+-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$nvidia} >/dev/null
cmake --build "$work/build" -j "$(nproc)"
"$work/build/train_mlp"

# rematd and its CLI from this checkout's build (the config CI built last).
bazel build --config=cuda //planner/service:rematd //client:remat 2>/dev/null
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)
mkdir -m 0750 "$work/run"
"$bin/planner/service/rematd" --listen "" --unix-socket "$work/run/rematd.sock" \
  --state-dir "$work/state" --metrics-port -1 2>"$work/rematd.log" &
pid=$!
address="unix:$work/run/rematd.sock"
"$bin/client/remat" health --wait --timeout-ms 30000 --address "$address" ||
  { cat "$work/rematd.log" >&2; exit 1; }
"$work/build/train_mlp" --planner "$address"
"$bin/client/remat" models --address "$address" | tee "$work/models"
grep -qE '^cmake_mlp .*cpu' "$work/models" ||
  { echo "FAIL: rematd does not hold cmake_mlp's cpu profile" >&2; exit 1; }
kill -TERM "$pid"
wait "$pid"
pid=
