#!/usr/bin/env bash
# Installs remat's C++ client library for CMake projects into PREFIX:
#   PREFIX/lib/libremat_client.so      runtime, collector, planners (the
#                                      in-process one and RemotePlanner,
#                                      rematd's client), copy engine
#   PREFIX/include/remat/...           its headers, the generated protos' too
#   PREFIX/lib/cmake/remat/            remat-config.cmake: find_package(remat),
#                                      target remat::client
#
#   bash client/install.sh PREFIX                 # against Debian's LibTorch 1.13
#   bash client/install.sh PREFIX --torch2        # against the torch 2.x
#                                                 # environment's LibTorch
#
# The sources are those of Bazel's //client:runtime and
# //client:remote_planner (bazel cquery), built by CMake with the same
# LibTorch a consumer's find_package(Torch) finds; the .proto files among
# them are compiled by the system's protoc and grpc_cpp_plugin, as Bazel
# compiles them. gRPC, protobuf and spdlog are the system's (Debian's -dev
# packages, which ./setup.sh installs).
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

# The source files (repository paths) of a Bazel query expression.
sources_of() {
  bazel cquery "${config[@]}" --output=label \
      "kind(\"source file\", $1) except deps(//third_party/...)" 2>/dev/null |
    sed -E 's/ \(null\)$//; s|^//([^:]*):|\1/|; s|^/||' | grep -v '^@' | sort -u
}
torch_side='deps(//client:runtime) + deps(//collector:cpu_memory_tracker)'
files=$(sources_of "$torch_side + deps(//client:remote_planner)")
# What RemotePlanner adds is compiled without LibTorch's include folders,
# as Bazel compiles it (LibTorch 2.x carries an fmt that is not the one
# the system's spdlog was built with).
rpc=$(sources_of "deps(//client:remote_planner) except ($torch_side)")
sources=$(grep -E '\.cc$' <<<"$files" | grep -vxF -f <(echo "$rpc") | paste -sd';')
rpc_sources=$(grep -E '\.cc$' <<<"$rpc" | paste -sd';')
headers=$(grep -E '\.h$' <<<"$files" | paste -sd';')
protos=$(grep -E '\.proto$' <<<"$rpc" | paste -sd';')

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cmake -S client/cmake -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DREMAT_ROOT="$PWD" \
  -DREMAT_VERSION="$version" "-DREMAT_SOURCES=$sources" \
  "-DREMAT_RPC_SOURCES=$rpc_sources" \
  "-DREMAT_HEADERS=$headers" "-DREMAT_PROTOS=$protos" \
  ${torch_cmake:+-DCMAKE_PREFIX_PATH="$torch_cmake"} >/dev/null
cmake --build "$build" -j "$(nproc)"
cmake --install "$build" >/dev/null
echo "installed remat $version's client into $prefix"
