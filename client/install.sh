#!/usr/bin/env bash
# Installs remat's C++ client library for CMake projects into PREFIX:
#   PREFIX/lib/libremat_client.so      runtime, collector, planners, copy engine
#   PREFIX/include/remat/...           its headers
#   PREFIX/lib/cmake/remat/            remat-config.cmake: find_package(remat),
#                                      target remat::client
#
#   bash client/install.sh PREFIX                 # against Debian's LibTorch 1.13
#   bash client/install.sh PREFIX --torch2        # against the torch 2.x
#                                                 # environment's LibTorch
#
# The sources are those of Bazel's //client:runtime (bazel cquery), built by
# CMake with the same LibTorch a consumer's find_package(Torch) finds. The
# in-process planner only: rematd's client (RemotePlanner) needs the
# project's gRPC build.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(realpath -m "${1:?usage: install.sh PREFIX [--torch2]}")
config=() torch_cmake=
case "${2:-}" in
  --torch2)
    config=(--config=torch2)
    venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}
    # Prefix paths, not Torch_DIR: TorchConfig finds Caffe2 and libc10
    # beside it only when they are searched before Debian's LibTorch in the
    # system's paths.
    torch_root=$("$venv/bin/python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
    torch_cmake="$torch_root;$torch_root/share/cmake"
    ;;
  "") ;;
  *) echo "install.sh: unknown argument $2 (known: --torch2)" >&2; exit 2 ;;
esac
version=$(sed -nE 's/^__version__ = "(.*)"$/\1/p' client/python/remat/_version.py)

files=$(bazel cquery "${config[@]}" --output=label \
          'kind("source file", deps(//client:runtime) + deps(//collector:cpu_memory_tracker)) except deps(//third_party/...)' 2>/dev/null |
        sed -E 's/ \(null\)$//; s|^//([^:]*):|\1/|; s|^/||' | grep -v '^@' | sort -u)
sources=$(grep -E '\.cc$' <<<"$files" | paste -sd';')
headers=$(grep -E '\.h$' <<<"$files" | paste -sd';')

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cmake -S client/cmake -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DREMAT_ROOT="$PWD" \
  -DREMAT_VERSION="$version" "-DREMAT_SOURCES=$sources" \
  "-DREMAT_HEADERS=$headers" ${torch_cmake:+-DCMAKE_PREFIX_PATH="$torch_cmake"} >/dev/null
cmake --build "$build" -j "$(nproc)"
cmake --install "$build" >/dev/null
echo "installed remat $version's client into $prefix"
