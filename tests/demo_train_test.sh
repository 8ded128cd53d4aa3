#!/usr/bin/env bash
# The demo end to end: starts the real rematd on a unix socket in a temp
# directory, trains a small encoder (then the decoder and the cnn) against
# it for a few dozen steps under a budget that forces long batches to
# recompute, and checks that every step
# stayed within the budget (the trainer exits 3 otherwise, and marks the
# step OVER BUDGET), that the planner planned (not only collected), that
# some batches recomputed and some did not, and that the loss fell.
set -uo pipefail

rematd=planner/service/rematd
remat=client/remat
train=examples/train
dir=$(mktemp -d /tmp/remat-demo-test.XXXXXX)  # short: unix socket paths
address="unix:$dir/rematd.sock"
out="${TEST_TMPDIR:-$dir}/train.out"

# Starts rematd with state directory $1; sets $daemon.
start_daemon() {
  "$rematd" --listen "" --unix-socket "$dir/rematd.sock" --metrics-port -1 \
    --state-dir "$1" 2>"$dir/rematd.log" &
  daemon=$!
  for _ in $(seq 1 200); do
    "$remat" health --address "$address" >/dev/null 2>&1 && break
    sleep 0.05
  done
  "$remat" health --address "$address" >/dev/null ||
    { echo "FAIL: rematd did not come up"; cat "$dir/rematd.log"; exit 1; }
}
start_daemon "$dir/state"
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT

"$train" --planner "$address" --steps 80 --depth 3 --width 64 --heads 2 \
  --ffn 128 --max-seq 256 --median-seq 90 --budget-fraction 0.45 \
  --seed 3 --threads 1 >"$out" 2>&1
rc=$?
cat "$out"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

[ "$rc" -eq 0 ] || fail "trainer exited $rc (3 means a step went over budget)"
grep -q "OVER BUDGET" "$out" && fail "a step went over budget"
grep -q "steps over budget: 0" "$out" || fail "summary does not say 0 over budget"
grep -qE "^step .* exact +recompute  0/" "$out" ||
  fail "no planned step kept every block"
grep -qE "^step .* exact +recompute  [1-9]" "$out" ||
  fail "no planned step recomputed a block"
# "loss: A (mean of first 10 steps) -> B (mean of last 10)"
read -r first last < <(sed -nE 's/^loss: ([0-9.]+) .* -> ([0-9.]+) .*/\1 \2/p' "$out")
[ -n "${first:-}" ] || fail "no loss summary"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
  fail "loss did not fall: $first -> $last"

# A run of model $1 that exited $2, its output in $3: exit 0, no step over
# budget, a planned step matching "^step .* $4", the loss fell.
check_model_run() {
  [ "$2" -eq 0 ] || fail "$1: trainer exited $2: $(tail -5 "$3")"
  grep -q "steps over budget: 0" "$3" || fail "$1: a step went over budget"
  grep -qE "^step .* $4" "$3" || fail "$1: no planned step matches '$4'"
  local first last
  read -r first last < <(sed -nE 's/^loss: ([0-9.]+) .* -> ([0-9.]+) .*/\1 \2/p' "$3")
  awk -v a="${first:-0}" -v b="${last:-0}" 'BEGIN { exit !(b < a) }' ||
    fail "$1: loss did not fall: ${first:-none} -> ${last:-none}"
}

# The decoder (blocks of several tensors: hidden state, with the causal and
# padding masks as side inputs) against the same rematd: within budget,
# planned, some steps recompute, the loss falls; every 10th step runs out
# of memory once (injected) and runs again, within the step.
"$train" --planner "$address" --model decoder --steps 40 --depth 3 \
  --width 64 --heads 2 --ffn 128 --vocab 64 --max-seq 192 --median-seq 70 \
  --budget-fraction 0.45 --seed 3 --threads 1 --inject-oom-every 10 \
  >"$dir/decoder.out" 2>&1
check_model_run decoder $? "$dir/decoder.out" "exact +recompute  [1-9]"
grep -q "steps run again after out of memory: 4$" "$dir/decoder.out" ||
  fail "decoder: not 4 steps run again: $(tail -3 "$dir/decoder.out")"
[ "$(grep -c "retried 1$" "$dir/decoder.out")" -eq 4 ] ||
  fail "decoder: not 4 step lines marked retried"
grep -q "^remat demo: 3-layer decoder" "$dir/decoder.out" ||
  fail "decoder: not the decoder: $(head -2 "$dir/decoder.out")"

# --sublayers: each encoder layer as two blocks (attention, MLP), so the
# plan decides per half: 3 layers make 8 blocks with the embedding and head.
"$train" --sublayers --steps 30 --depth 3 --width 64 --heads 2 --ffn 128 \
  --max-seq 256 --median-seq 90 --seed 3 --threads 1 >"$dir/sub.out" 2>&1 ||
  fail "--sublayers: trainer exited $?: $(tail -5 "$dir/sub.out")"
grep -qE "^step .* exact +recompute +[0-9]+/8 " "$dir/sub.out" ||
  fail "--sublayers: no planned step over 8 blocks: $(grep -m1 exact "$dir/sub.out")"
grep -q "steps over budget: 0" "$dir/sub.out" || fail "--sublayers: over budget"

# The cnn (features batch, height, width; images of varying size) against
# the same rematd, at its default budget: within budget, planned, some
# planned steps recompute, the loss falls.
"$train" --planner "$address" --model cnn --steps 40 --channels 8 \
  --max-size 64 --seed 3 --threads 1 >"$dir/cnn.out" 2>&1
check_model_run cnn $? "$dir/cnn.out" "image +[0-9]+x[0-9]+ +exact +recompute  [1-9]"
"$remat" models --address "$address" >"$dir/models.out" 2>&1
grep -q "cnn" "$dir/models.out" && grep -q "decoder" "$dir/models.out" ||
  fail "rematd does not list the decoder and the cnn: $(cat "$dir/models.out")"

# A device it cannot train on is refused up front (exit 2), with a reason.
for device in gpu cuda:x; do
  "$train" --device "$device" --steps 1 >"$dir/device.out" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "expected cpu, cuda or cuda:N" "$dir/device.out" ||
    fail "--device $device: exit $rc, $(head -c 300 "$dir/device.out")"
done
# cuda: without a CUDA build, or without a GPU, it says which.
"$train" --device cuda --steps 1 >"$dir/device.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -qE "cpu only|no GPU visible" "$dir/device.out" ||
  fail "--device cuda here: exit $rc, $(head -c 300 "$dir/device.out")"

# OFFLOAD end to end, in process: delta with an emulated 4 GB/s host link
# swaps some blocks of the long batches; every step that offloaded stayed
# near what the memory model predicted for it (the runtime frees what the
# model says it frees; within 10%: on two busy cores the copy thread can
# lag the link's pace, and memory goes only when its copy lands), and the
# loss is a number.
"$train" --steps 40 --depth 3 --width 64 --heads 2 --ffn 128 --max-seq 256 \
  --median-seq 90 --budget-fraction 0.45 --seed 3 --threads 1 \
  --solver delta --host-link-gbps 4 >"$dir/offload.out" 2>&1
grep -qE "^step .* offload [1-9]" "$dir/offload.out" ||
  fail "no step offloaded: $(tail -5 "$dir/offload.out")"
awk '
  function bytes(v, unit) {
    return v * (unit == "GiB" ? 2^30 : unit == "MiB" ? 2^20 : unit == "KiB" ? 2^10 : 1)
  }
  / offload [1-9]/ {
    for (i = 1; i <= NF; ++i) if ($i == "peak") { p = bytes($(i+1), $(i+2)); m = bytes($(i+5), $(i+6)) }
    if (m > 1.1 * p) { print "offloaded step above its prediction: " $0; bad = 1 }
  }
  END { exit bad }' "$dir/offload.out" || fail "an offloaded step exceeded its prediction by over 10%"
grep -qE "^loss: [0-9.]+ .* -> [0-9.]+ " "$dir/offload.out" ||
  fail "offload run: no loss summary"
# --no-offload: the same run without a copy engine offloads nothing.
"$train" --steps 40 --depth 3 --width 64 --heads 2 --ffn 128 --max-seq 256 \
  --median-seq 90 --budget-fraction 0.45 --seed 3 --threads 1 \
  --solver delta --host-link-gbps 4 --no-offload >"$dir/no_offload.out" 2>&1
grep -qE "^loss: " "$dir/no_offload.out" ||
  fail "--no-offload run: $(tail -5 "$dir/no_offload.out")"
! grep -qE "^step .* offload [1-9]" "$dir/no_offload.out" ||
  fail "--no-offload: a step offloaded"

kill -TERM "$daemon"
wait "$daemon" || fail "rematd did not exit cleanly on SIGTERM"

# The same against a fresh rematd: it learns the link from what the
# collect steps measured (Sample.d2h_bytes_per_s), and delta offloads.
# (delta is a baseline: its plans may exceed the budget, exit 3.)
start_daemon "$dir/state2"
"$train" --planner "$address" --steps 30 --depth 3 --width 64 --heads 2 \
  --ffn 128 --max-seq 256 --median-seq 90 --budget-fraction 0.45 --seed 3 \
  --threads 1 --solver delta --host-link-gbps 8 >"$dir/link.out" 2>&1
[ $? -le 3 ] || fail "delta against rematd: $(tail -5 "$dir/link.out")"
grep -qE "^step .* offload [1-9]" "$dir/link.out" ||
  fail "rematd planned no OFFLOAD from the measured link: $(tail -5 "$dir/link.out")"
kill -TERM "$daemon"
wait "$daemon" || fail "rematd did not exit cleanly on SIGTERM"

# Below what recomputing every block needs: a deep, narrow encoder (18
# blocks) at 22% of its no-checkpoint peak. Without a copy engine no plan
# fits the longest batches whole: they run as micro-batches, and every
# step fits; against rematd, with checkpoints sent to host (collection
# included), every step fits whole.
# Debian's LibTorch 1.13 only: with LibTorch 2.x this model's blocks
# allocate less (recomputing every block peaks at 20.5 MiB, not 24.7),
# and the estimator's bound on the smallest peak with checkpoints on host
# (22.2 MiB at 128 tokens) is above that, so no budget separates the two.
if [ "${1:-}" = "--libtorch2" ]; then
  echo "skipped with LibTorch 2.x: the below-recompute-all case (see above)"
else
deep=(--steps 30 --depth 8 --sublayers --width 128 --heads 2 --ffn 256
      --min-seq 32 --max-seq 128 --median-seq 90 --budget-fraction 0.22
      --host-link-gbps 1 --seed 3 --threads 1)
"$train" "${deep[@]}" --no-offload >"$dir/deep_plain.out" 2>&1 ||
  fail "the deep run without a copy engine: $(tail -3 "$dir/deep_plain.out")"
grep -qE "^step .* in [2-9] " "$dir/deep_plain.out" ||
  fail "no batch ran split without a copy engine: $(tail -3 "$dir/deep_plain.out")"
start_daemon "$dir/state3"
"$train" --planner "$address" "${deep[@]}" >"$dir/deep.out" 2>&1 ||
  fail "checkpoints to host, against rematd: $(tail -5 "$dir/deep.out")"
grep -qE "^step .* exact .* ckpt-to-host [1-9]" "$dir/deep.out" ||
  fail "no planned step sent checkpoints to host: $(tail -5 "$dir/deep.out")"
! grep -q "failed" "$dir/deep.out" ||
  fail "a report failed: $(grep failed "$dir/deep.out" | head -2)"
kill -TERM "$daemon"
wait "$daemon" || fail "rematd did not exit cleanly on SIGTERM"
fi
trap 'rm -rf "$dir"' EXIT
[ "$failures" -eq 0 ] && echo "PASS" || exit 1
