#!/usr/bin/env bash
# Builds the Debian package of the daemon: rematd and remat in /usr/bin,
# the systemd unit, the example config as /etc/rematd/rematd.json (a
# conffile) and deploy/README.md. Depends on the Debian packages of the
# shared libraries the two binaries load (as dpkg -S finds them).
#
#   bash deploy/build_deb.sh [OUT_DIR]      # default: dist/
#
# Prints the package's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
version=$(sed -nE 's/^__version__ = "(.*)"$/\1/p' client/python/remat/_version.py)
arch=$(dpkg --print-architecture)
bazel build -c opt --symlink_prefix=/ //planner/service:rematd //client:remat
bin=$(bazel info -c opt bazel-bin)

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$bin/planner/service/rematd" "$root/usr/bin/rematd"
install -D -m 0755 "$bin/client/remat" "$root/usr/bin/remat"
strip --strip-unneeded "$root/usr/bin/rematd" "$root/usr/bin/remat"
install -D -m 0644 deploy/rematd.example.json "$root/etc/rematd/rematd.json"
# The unit as deploy/README.md installs it by hand, with the package's paths.
install -d "$root/lib/systemd/system"
sed 's|/usr/local/bin/|/usr/bin/|g' deploy/rematd.service \
  >"$root/lib/systemd/system/rematd.service"
install -D -m 0644 deploy/README.md "$root/usr/share/doc/remat/README.md"

# The packages of the libraries both binaries load, glibc's and the
# compiler's included.
owner() {  # the package that holds a library, by its path or the real one
  dpkg -S "$1" 2>/dev/null || dpkg -S "$(realpath "$1")" 2>/dev/null ||
    { echo "build_deb: no package holds $1" >&2; return 1; }
}
libs=$(for f in "$root/usr/bin/rematd" "$root/usr/bin/remat"; do
         ldd "$f" | awk '$3 ~ /^\// {print $3}'
       done | sort -u)
depends=$(for lib in $libs; do owner "$lib"; done | cut -d: -f1 | sort -u |
          paste -sd, | sed 's/,/, /g')

install -d "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: rematd
Version: $version
Architecture: $arch
Maintainer: remat <remat@localhost>
Section: misc
Priority: optional
Depends: $depends
Description: input-aware activation-checkpointing planner daemon
 rematd serves remat's per-batch checkpointing plans over gRPC to the
 trainers of a node; remat queries it, explains plans and moves profiles
 between nodes (remat export, remat import).
CONTROL
echo /etc/rematd/rematd.json >"$root/DEBIAN/conffiles"

mkdir -p "$out"
deb="$out/rematd_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
