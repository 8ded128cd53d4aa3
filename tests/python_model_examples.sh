#!/usr/bin/env bash
# The Python examples on models remat did not write, each for a few steps
# with the package tests/python_example.sh installed: a Hugging Face Llama
# under remat.torch.apply (plain loop), the same under RematTrainer, and
# torchvision's ResNet-18 on multi-scale images. Passes when each exits 0
# (no step over its budget: they exit 3 otherwise) and prints its summary
# with some planned steps and the comparison with every block recomputed;
# the plain loop's every 8th step runs out of memory once (injected) and
# runs again inside the step.
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
