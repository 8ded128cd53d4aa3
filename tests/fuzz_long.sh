#!/usr/bin/env bash
# Builds the fuzz targets under --config=fuzz (clang, libFuzzer, ASan+UBSan;
# see .bazelrc) and runs each one from its seed corpus:
#
#   tests/fuzz_long.sh SECONDS [TARGET...]     each for SECONDS (-max_total_time)
#   tests/fuzz_long.sh --runs N [--seconds S] [TARGET...]
#                                     each for N inputs (-runs), or S seconds
#                                     if that comes first, as CI does
#
# TARGET is a label (default: every target tagged "fuzz_target"). Prints one
# line per target:
#   fuzz //planner:trace_fuzzer PASSED 123456 executions in 60s
#   fuzz //planner:trace_fuzzer FAILED (crash) 4321 executions; input: PATH
# A crashing input is kept under $FUZZ_ARTIFACTS (default
# /tmp/remat-fuzz-artifacts): copy it into the target's corpus directory as
# a regression seed. New coverage goes to a temporary corpus, never into the
# tree. Exits 1 when a target failed.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--runs" ]; then
  budget=(-runs="${2:?--runs needs a count}")
  shift 2
  if [ "${1:-}" = "--seconds" ]; then
    budget+=(-max_total_time="${2:?--seconds needs a count}")
    shift 2
  fi
else
  budget=(-max_total_time="${1:?usage: $0 SECONDS|--runs N [TARGET...]}")
  shift
fi
artifacts=${FUZZ_ARTIFACTS:-/tmp/remat-fuzz-artifacts}
mkdir -p "$artifacts"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(bazel query 'attr(tags, fuzz_target, //...)' 2>/dev/null | sort)
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no targets found" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! bazel build --config=fuzz "${targets[@]}"; then
  for t in "${targets[@]}"; do echo "fuzz $t FAILED (build)"; done
  exit 1
fi
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)
# Each target's corpus directory is the last argument fuzz.bzl gives it:
# "//pkg:name corpus" lines, from one query.
corpora=$(bazel query --output=build "set(${targets[*]})" 2>/dev/null | awk '
  /^  name = / { name = $3; gsub(/[",]/, "", name) }
  /^  args = / { n = split($0, a, "\""); print name, a[n - 1] }')

status=0
for t in "${targets[@]}"; do
  pkg=${t#//}
  pkg=${pkg%%:*}
  name=${t##*:}
  corpus=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$corpora")
  binary="$bin/$pkg/$name"
  mkdir -p "$work/$name"
  log="$work/$name.log"
  start=$(date +%s)
  # The first corpus directory receives new inputs: a temporary one.
  "$binary" "${budget[@]}" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$artifacts/$name-" \
    "$work/$name" "$corpus" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $t PASSED ${execs:-?} executions in ${secs}s"
  else
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "fuzz $t FAILED (crash) ${execs:-?} executions; input: ${input:-none}"
    grep -m1 -E 'ERROR: |fuzz invariant failed|runtime error' "$log" || true
    tail -n 40 "$log" >&2
    status=1
  fi
done
exit "$status"
