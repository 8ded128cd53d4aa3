#!/usr/bin/env bash
# The daemon's Debian package: builds it (deploy/build_deb.sh), checks its
# fields and files, unpacks it into a throwaway root (dpkg -x) and runs
# what it holds from there: rematd --validate-config on the packaged
# config, then a short serve (its config, with the socket, state and
# ports moved into the throwaway root), remat health, remat models, and a
# SIGTERM that stops it with exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

deb=$(bash deploy/build_deb.sh "$work/out" | tail -1)
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --info "$deb"
for field in Package Version Architecture Depends; do
  [ -n "$(dpkg-deb --field "$deb" "$field")" ] ||
    { echo "FAIL: no $field" >&2; exit 1; }
done
dpkg-deb --contents "$deb" | awk '{print $6}' >"$work/files"
for f in ./usr/bin/rematd ./usr/bin/remat ./lib/systemd/system/rematd.service \
         ./etc/rematd/rematd.json; do
  grep -qx "$f" "$work/files" || { echo "FAIL: $f not in the package" >&2; exit 1; }
done
grep -q '^ExecStart=/usr/bin/rematd ' <(dpkg-deb --fsys-tarfile "$deb" |
  tar -xO ./lib/systemd/system/rematd.service) ||
  { echo "FAIL: the unit does not start /usr/bin/rematd" >&2; exit 1; }

root="$work/root"
dpkg -x "$deb" "$root"
"$root/usr/bin/rematd" --validate-config --config "$root/etc/rematd/rematd.json"

mkdir -m 0750 "$work/run"
"$root/usr/bin/rematd" --config "$root/etc/rematd/rematd.json" \
  --unix-socket "$work/run/rematd.sock" --state-dir "$work/state" \
  --metrics-port 0 --port-file "$work/ports.json" 2>"$work/rematd.log" &
pid=$!
for _ in $(seq 200); do
  [ -s "$work/ports.json" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/rematd.log" >&2; exit 1; }
  sleep 0.05
done
address="unix:$work/run/rematd.sock"
[ "$("$root/usr/bin/remat" health --address "$address")" = SERVING ]
"$root/usr/bin/remat" models --address "$address"
kill -TERM "$pid"
wait "$pid"
pid=
echo "deb_test: installed from the package, served, stopped cleanly"
