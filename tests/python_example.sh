#!/usr/bin/env bash
# The Python commands of the README and docs/python.md, as written: build
# the wheel (it builds the extension with Bazel) and install it into the
# torch 2.x environment, then train the example for its 100 steps in
# process. Passes when the installed package imports from outside the
# checkout, the example exits 0 (no step over its budget) and the loss
# fell.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}
# Building the extension leaves the default build's bazel-bin as it was.
before=$(readlink bazel-bin || true)
wheel=$(bash client/python/build_wheel.sh | tail -1)
[ "$(readlink bazel-bin || true)" = "$before" ] ||
  { echo "python_example: building the wheel moved bazel-bin" >&2; exit 1; }
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall \
  --no-deps "$wheel"
(cd / && "$venv/bin/python" -c 'import remat.torch, sys; print("installed:", remat.__file__)')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$venv/bin/python" examples/python/train_encoder.py | tee "$out"
# "loss: FIRST (mean of first 10 steps) -> LAST (mean of last 10)"
awk '/^loss: / { fell = ($9 + 0 < $2 + 0) } END { exit fell ? 0 : 1 }' "$out" ||
  { echo "python_example: the loss did not fall" >&2; exit 1; }
