#!/usr/bin/env bash
# The wheel stands alone: built by client/python/build_wheel.sh, installed
# into a new virtual environment that holds only what PyPI serves (torch,
# the pinned transformers and pytest: third_party/torch2/requirements.txt,
# as pip installed them in the torch 2.x environment),
# then used from a folder outside the checkout with LD_LIBRARY_PATH empty
# and no path into the repository or Bazel's output: the Python tests (the
# daemon and CLI they start come from the Debian package, deploy/
# build_deb.sh, unpacked there too) and the encoder example. Checks the
# wheel's metadata (torch pinned to the version it was built for), what
# `auditwheel show` says, what `ldd` resolves the installed extension's
# libraries to, and the shared objects the process loads: every one remat
# adds to a process that imported torch lies in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}

wheel=$(bash client/python/build_wheel.sh "$work/dist" | tail -1)
echo "wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
"$venv/bin/python" -m auditwheel show "$wheel" | tail -n +1
unzip -p "$wheel" 'remat-*.dist-info/METADATA' >"$work/METADATA"
torch_minor=$("$venv/bin/python" -c 'import torch; print(".".join(torch.__version__.split(".")[:2]))')
grep -qx "Requires-Dist: torch==$torch_minor.\*" "$work/METADATA" ||
  { echo "FAIL: the wheel does not pin torch==$torch_minor.*" >&2; exit 1; }

deb=$(bash deploy/build_deb.sh "$work/dist" | tail -1)
dpkg -x "$deb" "$work/pkg"

# A new environment: PyPI's packages only, then the wheel. They are those
# pip installed in the torch 2.x environment from the pins, hard-linked
# rather than unpacked again (5 GB); nothing of remat's comes along.
/usr/bin/python3 -m venv "$work/venv"
purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
from=$("$venv/bin/python" -c "$purelib")
to=$("$work/venv/bin/python" -c "$purelib")
for entry in "$from"/*; do
  name=$(basename "$entry")
  [[ $name == *remat* || -e "$to/$name" ]] ||
    cp -al "$entry" "$to/" 2>/dev/null || cp -a "$entry" "$to/"  # another file system
done
"$work/venv/bin/pip" check --disable-pip-version-check
"$work/venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel"

# ldd, as the dynamic loader sees the extension once torch is loaded (its
# libraries and the NVIDIA ones beside it are found where torch's RUNPATH
# finds them): each library is the environment's (remat.libs, torch,
# nvidia) or one of the system's base libraries manylinux allows.
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
torch_dirs=$(find "$site/torch/lib" "$site/nvidia" -maxdepth 3 -name '*.so*' \
               -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
LD_LIBRARY_PATH=$torch_dirs ldd "$site"/remat/_core*.so >"$work/ldd"
awk -v env="$work/venv/" '
  / => / { lib = $1; path = $3
           if (path == "not") { bad = bad " " lib " (not found)"; next }
           if (index(path, env) == 1) { grafted += path ~ /\/remat\.libs\//; in_env++; next }
           if (lib ~ /^(libc|libm|libstdc\+\+|libgcc_s|libz|libdl|libpthread|librt|libutil)\.so/) {
             sys = sys " " lib; next }
           bad = bad " " lib " (" path ")" }
  END { printf "ldd: %d libraries from the environment (%d in remat.libs, the rest " \
               "torch'"'"'s); system:%s\n", in_env, grafted, sys
        if (bad != "") { print "FAIL: outside the environment:" bad; exit 1 } }
' "$work/ldd"

# The tests and examples, away from the checkout (conftest.py finds the
# examples beside its folder, as in the repository).
mkdir -p "$work/run/client/python" "$work/run/examples"
cp -r client/python/tests "$work/run/client/python/"
cp -r examples/python "$work/run/examples/"
cd "$work/run"
export -n PYTHONPATH
unset PYTHONPATH
export LD_LIBRARY_PATH= OMP_NUM_THREADS=1
export REMATD="$work/pkg/usr/bin/rematd" REMAT_CLI="$work/pkg/usr/bin/remat"
py="$work/venv/bin/python"

# What remat adds to a process that imported torch: all in the environment.
cat >"$work/maps.py" <<'PY'
import sys
def objects():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if ".so" in line.split()[-1]}
import torch
before = objects()
import remat, remat.torch  # the extension and every library it needs
remat.LocalPlanner()
added = sorted(objects() - before)
env, repo = sys.argv[1], sys.argv[2]
outside = [p for p in added if not p.startswith(env + "/")]
inside_repo = [p for p in objects() if p.startswith(repo) or "/bazel-out/" in p
               or "/.cache/bazel/" in p]
print(f"remat {remat.__version__} for torch {remat.torch_version} from "
      f"{remat.__file__}")
print(f"shared objects remat added: {len(added)}, all in the environment: "
      f"{not outside}")
for p in added:
    print("  " + p.replace(env, "$VENV"))
if outside or inside_repo:
    sys.exit(f"FAIL: outside the environment: {outside + inside_repo}")
PY
"$py" "$work/maps.py" "$work/venv" "$repo"

"$py" -m pytest -q -p no:cacheprovider client/python/tests
"$py" examples/python/train_encoder.py --steps 30 | tail -4
echo "wheel_check: the wheel stands alone"
