#!/usr/bin/env bash
# bench:budget_sweep at a toy size (two budgets, a few steps of the cnn):
# one JSON line per strategy and budget, each but exact's compared with
# exact's plans step by step, the check line with its fields, every step's
# plan on stderr with -v, and the chart written.
set -uo pipefail

sweep=bench/budget_sweep
dir="${TEST_TMPDIR:-$(mktemp -d)}"
"$sweep" --models cnn --budgets 0.7,1.0 --warmup 6 --steps 4 --rounds 2 \
  --strategies none,mimose_greedy,exact --svg-dir "$dir" -v \
  >"$dir/out.json" 2>"$dir/steps.json"
rc=$?
cat "$dir/out.json"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

[ "$rc" -eq 0 ] || fail "exit status $rc"
lines=$(grep -c '"bench":"budget_sweep",' "$dir/out.json")
[ "$lines" -eq 8 ] || fail "$lines budget_sweep lines, want 8 (4 strategies, 2 budgets)"
for f in 0.7 1.0; do
  grep -q "\"budget_fraction\":$f," "$dir/out.json" || fail "no line at budget $f"
done
# Every strategy but exact says how its plans differed from exact's.
others=$(grep '"bench":"budget_sweep",' "$dir/out.json" | grep -v '"strategy":"exact"')
[ "$(grep -c '"steps_plan_differs_from_exact"' <<<"$others")" -eq 6 ] ||
  fail "a strategy's line lacks steps_plan_differs_from_exact"
# Each count agrees with the plans -v printed: for every strategy and
# budget, the steps whose plan is not exact's on the same batch.
plans() {  # strategy, budget: its plans in step order
  grep "\"budget_fraction\":$2," "$dir/steps.json" | grep "\"strategy\":\"$1\"" |
    grep -o '"actions":"[KROS]*"'
}
for s in none all mimose_greedy; do
  for f in 0.7 1.0; do
    want=$(paste -d' ' <(plans "$s" "$f") <(plans exact "$f") | awk '$1 != $2' | wc -l)
    got=$(grep "\"budget_fraction\":$f," <<<"$others" | grep "\"strategy\":\"$s\"" |
      grep -o '"steps_plan_differs_from_exact":[0-9]*' | cut -d: -f2)
    [ "$got" = "$want" ] || fail "$s at $f: $got steps differ from exact's, the plans say $want"
  done
done
check=$(grep '"bench":"budget_sweep_check"' "$dir/out.json")
for field in exact_points_over_budget exact_vs_best_fitting_other_min \
  others_step_time_vs_exact_where_plans_differ_min \
  step_time_vs_exact_where_plans_match_p10_p90 \
  exact_trails_where_others_recompute_and_fit; do
  grep -q "\"$field\"" <<<"$check" || fail "check line lacks $field"
done
# A point is listed as a trail only where exact's median is behind.
for r in $(grep -o '"exact_vs_it":[0-9.e+-]*' <<<"$check" | cut -d: -f2); do
  awk -v r="$r" 'BEGIN { exit !(r < 1) }' || fail "a trail with exact_vs_it $r"
done
# -v: one step line per strategy, budget and step, with the plan as a
# letter per block.
steps=$(grep -c '"actions":"[KROS]\+"' "$dir/steps.json")
[ "$steps" -eq 32 ] || fail "$steps step lines with a plan, want 32"
# Each round runs on processes of its own: a trainer counts the steps it
# ran, so none has run more than its warm-up (6) and one round's share of
# both budgets (2 + 2) by its last step; a process alive for the whole
# sweep would reach 14.
last=$(grep -o '"step":[0-9]*' "$dir/steps.json" | cut -d: -f2 | sort -n | tail -1)
[ "$last" = 10 ] || fail "a trainer reached step $last, want 10 (fresh processes per round)"
for r in 0 1; do
  [ "$(grep -c "\"round\":$r[,}]" "$dir/steps.json")" -eq 16 ] ||
    fail "round $r did not run 16 steps (4 strategies, 2 budgets, 2 steps)"
done
[ -s "$dir/budget_sweep_cnn.svg" ] || fail "no chart"

echo "$failures failures"
[ "$failures" -eq 0 ]
