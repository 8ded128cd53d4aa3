#!/usr/bin/env bash
# Runs the real `remat solve` binary on the sample instance and on broken
# inputs, checking outputs and exit codes (0 fits, 2 input error, 3 a plan
# does not fit).
set -uo pipefail

remat=client/remat
instance=examples/instances/bert_base_seq512.json
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

expect_rc() {  # expected_rc description command...
  local want=$1 what=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] ||
    fail "$what: exit $rc, want $want; stderr: $(cat "$tmp/err")"
}

# The exact plan fits the sample's budget: exit 0, one JSON line.
expect_rc 0 "exact json" "$remat" solve --instance "$instance" -o json
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "exact json: want one line"
grep -q '"solver":"exact"' "$tmp/out" || fail "exact json: solver name"
grep -q '"feasible":true' "$tmp/out" || fail "exact json: feasible"
grep -q '"RECOMPUTE"' "$tmp/out" || fail "exact json: recomputes nothing"
grep -q '"predicted_peak_bytes":' "$tmp/out" || fail "exact json: peak"
grep -q '"recompute_ns":' "$tmp/out" || fail "exact json: recompute_ns"
grep -q '"exposed_transfer_ns":0' "$tmp/out" || fail "exact json: exposed_transfer_ns"
grep -q '"optimality_gap_ns":0' "$tmp/out" || fail "exact json: proven optimal"

# With a host link, delta may swap: OFFLOAD in the actions.
sed 's/"budget_bytes":/"d2h_bytes_per_s": "1PB", "h2d_bytes_per_s": "1PB", "budget_bytes":/' \
  "$instance" >"$tmp/link.json"
expect_rc 0 "delta with a link" "$remat" solve --instance "$tmp/link.json" \
  --solver delta -o json
grep -q '"OFFLOAD"' "$tmp/out" || fail "delta json: no OFFLOAD with a link: $(cat "$tmp/out")"
grep -q '"optimality_gap_ns":null' "$tmp/out" || fail "delta json: a heuristic proves nothing"

# Below what recomputing every block needs (2800 MiB less the margin):
# no plan fits (exit 3) until the instance may send checkpoints to host.
sed 's/"budget_bytes": "6GiB"/"d2h_bytes_per_s": "1PB", "h2d_bytes_per_s": "1PB", "budget_bytes": "2800MiB"/' \
  "$instance" >"$tmp/tight.json"
expect_rc 3 "below recompute-all" "$remat" solve --instance "$tmp/tight.json" -o json
sed 's/"budget_bytes":/"offload_checkpoints": true, "budget_bytes":/' \
  "$tmp/tight.json" >"$tmp/tight_ckpt.json"
expect_rc 0 "checkpoints to host" "$remat" solve --instance "$tmp/tight_ckpt.json" -o json
grep -q '"RECOMPUTE_OFFLOAD"' "$tmp/out" || fail "checkpoints to host: none sent: $(cat "$tmp/out")"
grep -q '"feasible":true' "$tmp/out" || fail "checkpoints to host: not feasible"

# Every solver: "none" cannot fit, so exit 3, and a line each.
expect_rc 3 "all solvers json" "$remat" solve --instance "$instance" \
  --solver all -o json
[ "$(wc -l <"$tmp/out")" -eq 7 ] || fail "all json: want seven lines"
for s in none all sqrt static_max mimose_greedy delta exact; do
  grep -q "\"solver\":\"$s\"" "$tmp/out" || fail "all json: missing $s"
done
grep '"solver":"none"' "$tmp/out" | grep -q '"feasible":false' ||
  fail "none should not fit"

# Table: per-block rows and a summary.
expect_rc 0 "table" "$remat" solve --instance "$instance"
grep -q 'encoder.layer0' "$tmp/out" || fail "table: block rows"
grep -q 'summary: FITS' "$tmp/out" || fail "table: summary"
grep -q 'kept: not checkpointable' "$tmp/out" || fail "table: reasons"

# Input errors exit 2 and name the field.
sed 's/"act_bytes": "444MiB"/"act_bytes": -5/' "$instance" >"$tmp/neg.json"
expect_rc 2 "negative size" "$remat" solve --instance "$tmp/neg.json"
grep -q 'blocks\[1\].act_bytes: must be a non-negative integer' "$tmp/err" ||
  fail "negative size: message: $(cat "$tmp/err")"

echo '{"base_bytes": 1,' >"$tmp/broken.json"
expect_rc 2 "malformed json" "$remat" solve --instance "$tmp/broken.json"
grep -q 'not valid JSON' "$tmp/err" || fail "malformed: message"

expect_rc 2 "missing file" "$remat" solve --instance "$tmp/nope.json"
expect_rc 2 "unknown solver" "$remat" solve --instance "$instance" \
  --solver magic
grep -q 'known solvers: none, all, sqrt, static_max, mimose_greedy, delta, exact' \
  "$tmp/err" || fail "unknown solver: message: $(cat "$tmp/err")"
expect_rc 2 "bad output" "$remat" solve --instance "$instance" -o yaml
expect_rc 2 "missing --instance" "$remat" solve
expect_rc 2 "no subcommand" "$remat"

# Help documents the exit codes.
expect_rc 0 "help" "$remat" solve --help
grep -q '3  solve: at least one requested solver found no plan' "$tmp/out" ||
  fail "help: exit codes"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "remat solve: all checks passed"
