#!/usr/bin/env bash
# Installs every Debian 12 package that building and testing remat needs.
# Idempotent: when all are present it installs nothing and says so.
# Run as root (or with sudo) on a Debian 12 machine.
set -euo pipefail

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

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present; nothing to install."
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
echo "setup: done."
