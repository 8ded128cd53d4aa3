#!/usr/bin/env bash
# The main job: installs what it needs, builds, starts rematd on a unix
# socket in a temporary directory, trains the demo model against it (extra
# arguments go to the trainer, e.g. --steps 200), shows what the daemon
# learned, and stops the daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
./setup.sh
bazel build //planner/service:rematd //client:remat //examples:train

dir=$(mktemp -d /tmp/remat-demo.XXXXXX)
address="unix:$dir/rematd.sock"
bazel-bin/planner/service/rematd --listen "" --unix-socket "$dir/rematd.sock" \
  --metrics-port -1 --state-dir "$dir/state" 2>"$dir/rematd.log" &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
  bazel-bin/client/remat health --address "$address" >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || { cat "$dir/rematd.log" >&2; exit 1; }
  sleep 0.1
done
echo "rematd serving on $address (log: $dir/rematd.log)"

status=0
bazel-bin/examples/train --planner "$address" "$@" || status=$?

echo
echo "What rematd learned:"
bazel-bin/client/remat model encoder --device cpu --address "$address" || true
kill -TERM "$daemon"
wait "$daemon" && echo "rematd stopped cleanly"
exit "$status"
