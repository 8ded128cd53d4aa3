#!/usr/bin/env bash
# The Python examples on models remat did not write, each for a few steps
# with the package tests/python_example.sh installed: a Hugging Face Llama
# under remat.torch.apply (plain loop), the same under RematTrainer, and
# torchvision's ResNet-18 on multi-scale images. Passes when each exits 0
# (no step over its budget: they exit 3 otherwise) and prints its summary
# with some planned steps and the comparison with every block recomputed;
# the plain loop's every 8th step runs out of memory once (injected) and
# runs again inside the step. Then the data-parallel example under
# torchrun, two ranks on gloo sharing one rematd, under DDP and FSDP2:
# every rank within budget, the ranks' parameters equal.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${REMAT_TORCH2_VENV:-$HOME/.cache/remat/torch2-venv}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for example in "train_hf_causal_lm.py --steps 16 --inject-oom-every 8" \
               "train_hf_trainer.py --steps 16" \
               "train_resnet.py --steps 14 --sizes 64,96,128"; do
  echo "== examples/python/$example"
  # shellcheck disable=SC2086
  "$venv/bin/python" examples/python/$example | tee "$out"
  grep -q "steps over budget: 0" "$out"
  grep -q "^throughput vs " "$out"
  awk '/^planned / { exit ($2 + 0 > 0) ? 0 : 1 }' "$out" ||
    { echo "$example: no planned step" >&2; exit 1; }
  case "$example" in
    *--inject-oom-every*)
      grep -q "steps run again after out of memory: 2$" "$out" ||
        { echo "$example: not 2 steps run again" >&2; exit 1; } ;;
  esac
done

bazel build --config=cuda //planner/service:rematd 2>/dev/null
rematd=$(bazel info --config=cuda bazel-bin 2>/dev/null)/planner/service/rematd
daemon=
dir=$(mktemp -d /tmp/remat-ddp.XXXXXX)  # short: a unix socket's path
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$dir" "$out"' EXIT
"$rematd" --listen "" --unix-socket "$dir/rematd.sock" --metrics-port -1 \
  --state-dir "$dir/state" 2>"$dir/rematd.log" &
daemon=$!
for _ in $(seq 1 100); do [ -S "$dir/rematd.sock" ] && break; sleep 0.1; done
for mode in "" --fsdp2; do
  echo "== torchrun --nproc_per_node 2 examples/python/train_ddp.py $mode"
  # shellcheck disable=SC2086
  (cd examples/python && "$venv/bin/torchrun" --nproc_per_node 2 \
    train_ddp.py --steps 20 --planner "unix:$dir/rematd.sock" $mode) |
    tee "$out"
  grep -q "steps over budget per rank: \[0, 0\]; parameters equal on every rank: yes" "$out" ||
    { echo "train_ddp.py $mode: a rank over budget or parameters differ" >&2; exit 1; }
  awk '/^planned / { exit ($2 + 0 > 0) ? 0 : 1 }' "$out" ||
    { echo "train_ddp.py $mode: no planned step" >&2; exit 1; }
done
