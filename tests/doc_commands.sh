#!/usr/bin/env bash
# Every command the documentation shows still runs as written. The shell
# blocks (```sh, ```bash) of README.md, bench/README.md and docs/*.md are
# read line by line (a trailing backslash joins the next line); each
# command must match one entry of the list below (the first match wins),
# which says how it is held to what the page promises:
#   run [N] run here, as written, from the repository's root, in the order
#           of its page; it must exit 0 (or N, which its page explains). A
#           command ending in & runs in the background until the end of
#           its page (its output in $TMPDIR/doc_commands.background.log);
#   build   a benchmark or long run: its Bazel target must build (in the
#           default configuration, whatever -c the page uses);
#   ci NAME run as written, or with fewer steps, by that CI check;
#   no WHY  cannot run in a test (a GPU, root's package manager, systemd).
# A command no entry matches fails the check: a new command in the docs
# comes with its entry here. Uses the default build (Debian's LibTorch),
# which tests/run_all.sh has built; the daemon commands take rematd's
# default ports (127.0.0.1:7421, 7422).
set -uo pipefail
cd "$(dirname "$0")/.."

# pattern (an extended regex over the command) => how
entries=(
  '^bash examples/run_demo\.sh => run'
  '^bash tests/run_all\.sh => ci .ci/run (the README test command)'
  '^bash tests/run_torch2\.sh => ci .ci/run (its second command)'
  '^\./setup\.sh --torch2 => ci run_torch2 (it begins with it)'
  '^bazel test --config=cuda //\.\.\. => ci run_torch2 (the targets that link LibTorch or CUDA)'
  '^bazel run --config=torch2 //examples:train => ci run_torch2 (the trainer under --config=cuda: demo_train_test)'
  '^bash client/python/build_wheel\.sh => ci python_example, python_wheel'
  '^~/\.cache/remat/torch2-venv/bin/pip install dist/remat- => ci python_example'
  '^~/\.cache/remat/torch2-venv/bin/python examples/python/train_ => ci python_model_examples, python_example (fewer steps)'
  '^mkdir -m 0750 /tmp/remat-run => ci test_distributed (torchrun against one rematd)'
  '^bazel-bin/planner/service/rematd --listen "" --unix-socket /tmp/remat-run => ci test_distributed'
  '^cd examples/python && .*torchrun => ci test_distributed'
  '^bazel run //planner/service:rematd -- .*& => run'
  '^bazel run //client:remat --  => run'
  '^bazel run //examples:train -- --planner => run'
  '^bazel run //examples:train -- (--solver delta )?--host-link-gbps 4 --steps 40 => run'
  '^bazel run -c opt //examples:train => build'
  '^bazel run (-c opt )?//bench: => build'
  '^bazel build //client:remat => run'
  '^bazel-bin/client/remat solve .*--solver all => run 3'
  '^bazel-bin/client/remat solve  => run'
  '^remat (export|import)  => ci test_profiles (export, import between two daemons)'
  '^rematd --import  => ci test_profiles'
  '^bash deploy/build_deb\.sh => ci debian_package'
  '^apt-get install \./dist/rematd_ => no root and a package manager (debian_package unpacks it with dpkg -x)'
  '^systemctl  => no systemd (deploy:manifests_test checks the unit)'
  '^export REMAT_GPU_DEPS= => no a GPU machine (run_torch2 rehearses the GPU scripts)'
  '^bash (tests/gpu_check|bench/gpu_e2e|bench/gpu_peers)\.sh => no a GPU (run_torch2 rehearses it)'
)

commands=$(mktemp)
out=$(mktemp)
log=${TMPDIR:-/tmp}/doc_commands.background.log
: >"$log"
background=()
trap 'stop_background; rm -f "$commands" "$out"' EXIT
for page in README.md bench/README.md docs/*.md; do
  awk -v page="$page" '
    /^```(sh|bash)[ \t]*$/ { inside = 1; next }
    /^```/ { inside = 0; next }
    inside && /\\$/ { line = line substr($0, 1, length($0) - 1); next }
    inside { line = line $0; sub(/^[ \t]+/, "", line)
             if (line != "" && line !~ /^#/) print page "\t" line
             line = "" }
  ' "$page"
done >"$commands"

stop_background() {
  for p in "${background[@]}"; do kill -- "-$p" 2>/dev/null; done
  for p in "${background[@]}"; do
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
  done
  background=()
}

failed=0 ran=0 built=0 elsewhere=0 current=
declare -A seen=()
while IFS=$'\t' read -r page command; do
  # What a page started in the background ends with the page.
  [ "$page" != "$current" ] && stop_background
  current=$page
  # The command without its trailing comment.
  bare=$(sed -E 's/[[:space:]]+#[^"'"'"']*$//' <<<"$command")
  # A block two pages show is run for the first; the second is the same.
  if [ -n "${seen[$bare]:-}" ]; then
    echo "same $page: $bare (as on ${seen[$bare]})"
    continue
  fi
  seen[$bare]=$page
  how=
  for entry in "${entries[@]}"; do
    if [[ $bare =~ ${entry%% => *} ]]; then how=${entry#* => }; break; fi
  done
  case "$how" in
    "")
      echo "FAIL $page: no test holds this command (add it to tests/doc_commands.sh): $bare"
      failed=$((failed + 1)) ;;
    run|run\ *)
      echo "run  $page: $bare"
      if [[ $bare == *'&' ]]; then
        # A session of its own, so that the end of this check stops the
        # whole of it (bazel run's client and the binary it runs).
        setsid bash -c "${bare%&}" </dev/null >>"$log" 2>&1 &
        background+=($!)
      else
        timeout 900 bash -c "$bare" </dev/null >"$out" 2>&1
        rc=$?
        want=${how#run}
        if [ "$rc" -ne "${want:-0}" ]; then
          tail -20 "$out"
          echo "FAIL $page: exit $rc (want ${want:-0}): $bare"
          failed=$((failed + 1))
        fi
      fi
      ran=$((ran + 1)) ;;
    build)
      target=$(grep -oE '//[^ ]+' <<<"$bare" | head -1)
      echo "build $page: $target"
      if ! bazel build "$target" >"$out" 2>&1; then
        tail -20 "$out"
        echo "FAIL $page: $target does not build"
        failed=$((failed + 1))
      fi
      built=$((built + 1)) ;;
    *)
      echo "${how%% *}   $page: $bare (${how#* })"
      elsewhere=$((elsewhere + 1)) ;;
  esac
done <"$commands"
echo "doc_commands: $ran run, $built built, $elsewhere held elsewhere, $failed failed"
[ "$failed" -eq 0 ]
