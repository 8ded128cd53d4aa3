#!/usr/bin/env bash
# Runs the Python client's pytest suite in the torch 2.x environment's
# Python, with the package as Bazel built it (remat/*.py and _core.so,
# staged together), the real rematd and the remat CLI. Arguments: python,
# _core.so, rematd, remat.
set -euo pipefail
python=$1 core=$2 rematd=$3 cli=$4
site="${TEST_TMPDIR:-$(mktemp -d)}/site"
mkdir -p "$site/remat"
cp client/python/remat/*.py client/python/remat/*.pyi "$site/remat/"
cp "$core" "$site/remat/_core.so"
export PYTHONPATH="$site" REMATD="$PWD/$rematd" REMAT_CLI="$PWD/$cli"
# One torch thread: tests run side by side on few cores, where spinning
# worker threads starve the copy engine's and the daemon's.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$python" -m pytest -q -p no:cacheprovider -rA \
  --junitxml="${XML_OUTPUT_FILE:-$site/pytest.xml}" client/python/tests
