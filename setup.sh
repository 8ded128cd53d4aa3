#!/usr/bin/env bash
# Installs every Debian 12 package that building and testing remat needs.
# Idempotent: when all are present it installs nothing and says so.
# Run as root (or with sudo) on a Debian 12 machine.
#
# ./setup.sh --torch2 also makes the virtual environment that
# --config=torch2 and --config=cuda build against (the current PyTorch,
# CUDA-enabled, with the nvcc of its CUDA release): at $REMAT_TORCH2_VENV,
# by default $HOME/.cache/remat/torch2-venv (outside the repository; the
# same default as third_party/libtorch.bzl), with the exact versions of
# third_party/torch2/requirements.txt from PyPI (about 5.5 GB). Also
# idempotent: an environment already at those pins is left as it is.
set -euo pipefail
cd "$(dirname "$0")"

TORCH2=0
for arg in "$@"; do
  case "$arg" in
    --torch2) TORCH2=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument $arg (known: --torch2)" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  build-essential       # g++ 12, the C++17 compiler
  bazel-bootstrap       # Bazel 4.2.3, the build (works offline, see WORKSPACE)
  libtorch-dev          # LibTorch 1.13, CPU: the client runtime and collector
  libopenblas0-pthread  # a fast, threaded BLAS for LibTorch (the default
                        # reference BLAS makes CPU training ~10x slower)
  libgrpc++-dev         # gRPC C++ 1.51: rematd and the remote client
  libgoogle-perftools-dev  # tcmalloc for rematd (~9% more plans/s than
                        # glibc malloc, bench:grpc_load)
  protobuf-compiler-grpc  # grpc_cpp_plugin
  libprotobuf-dev
  protobuf-compiler
  grpc-proto            # health.proto
  libabsl-dev           # Status, StatusOr, Mutex
  libspdlog-dev         # rematd's logs
  catch2                # unit tests (Catch2 v2)
  libcli11-dev          # the remat CLI and flags
  libeigen3-dev         # least squares in the estimator
  libbenchmark-dev      # micro-benchmarks
  nlohmann-json3-dev    # JSON files: instances, configs, traces
  openssl               # test certificates for rematd's TLS (rematd_security_test)
  clang-14              # clang 14 (/usr/bin/clang-14) for --config=fuzz
  clang                 # /usr/bin/clang, what --config=fuzz names (CC=clang)
  libclang-rt-14-dev    # libFuzzer and the ASan/UBSan runtimes for clang 14
                        # (-fsanitize=fuzzer,address,undefined)
  python3-yaml          # //deploy:manifests_test reads the Kubernetes manifests
)
if [ "$TORCH2" = 1 ]; then
  PACKAGES+=(python3-venv)  # the torch 2.x virtual environment
fi

# The torch 2.x environment (--torch2), once Debian's packages are in.
torch2_env() {
  local venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}
  local req=third_party/torch2/requirements.txt
  local stamp="$venv/.remat-requirements"
  if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then
    echo "setup: torch 2.x environment at $venv matches $req; nothing to install."
    return
  fi
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating the virtual environment $venv (Debian's python3)"
    mkdir -p "$(dirname "$venv")"
    /usr/bin/python3 -m venv "$venv"
  fi
  local pins
  pins=$(grep -cE '^[A-Za-z]' "$req")
  echo "setup: installing into $venv from $req:" \
    "$(grep -E '^(torch|nvidia-cuda-nvcc)==' "$req" | tr '\n' ' ')" \
    "($pins pinned packages in all)"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  "$venv/bin/python" -c 'import torch; print("setup: torch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null
  cp "$req" "$stamp"
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present; nothing to install."
  [ "$TORCH2" = 1 ] && torch2_env
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
[ "$TORCH2" = 1 ] && torch2_env
echo "setup: done."
