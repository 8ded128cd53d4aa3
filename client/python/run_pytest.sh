#!/usr/bin/env bash
# Runs the Python client's pytest suite in the torch 2.x environment's
# Python, with the package as Bazel built it (remat/*.py and _core.so,
# staged together) and the real rematd. Arguments: python, _core.so, rematd.
set -euo pipefail
python=$1 core=$2 rematd=$3
site="${TEST_TMPDIR:-$(mktemp -d)}/site"
mkdir -p "$site/remat"
cp client/python/remat/*.py "$site/remat/"
cp "$core" "$site/remat/_core.so"
export PYTHONPATH="$site" REMATD="$PWD/$rematd"
# One torch thread: tests run side by side on few cores, where spinning
# worker threads starve the copy engine's and the daemon's.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$python" -m pytest -q -p no:cacheprovider -rA \
  --junitxml="${XML_OUTPUT_FILE:-$site/pytest.xml}" client/python/tests
