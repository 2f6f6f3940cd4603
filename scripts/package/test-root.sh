#!/usr/bin/env bash
# Prints the folder of a fresh Debian root for the package test's install matrix, building it with
# mmdebstrap when the cache has none from today:
#   scripts/package/test-root.sh SUITE ARCH      e.g. bookworm amd64, trixie arm64 or armhf (through binfmt_misc)
#   scripts/package/test-root.sh --all           every root of the matrix (.ci/run builds them in the
#                                                background while the long suites run)
# The roots are cached under /var/cache/botlink-test-roots (BOTLINK_TEST_ROOTS overrides it), one per
# suite, architecture and UTC date: a day's runs share one, the next day's first run builds it anew
# (and removes the older ones of that suite and architecture). The tests never write into a root:
# they run in an overlay over it (test/package/deb.ts, ScratchRoot).
# Each root is Debian's apt variant plus what a device would have anyway (adduser, logrotate,
# init-system-helpers), so `apt install ./*.deb` needs no download; the roots of bookworm (nodejs 18)
# and trixie (20) also hold their distribution's nodejs, which the packages must leave alone, and
# forky's has none. The trixie amd64 root also holds lintian, trixie's, for the package test. The archive reachable here is a snapshot whose Release files are past their
# Valid-Until, hence the apt option.
set -euo pipefail

die() {
  echo "test-root: $*" >&2
  exit 1
}
if [ "${1:-}" = --all ]; then
  # The matrix of test/package/matrix.test.ts: the emulated arm64 root (the slowest: every maintainer
  # script runs under QEMU) beside the three amd64 ones and then the emulated armhf one, built one
  # after the other: two lanes, one per core, of about the same length when cold.
  one() {
    local t
    t=$(date +%s)
    if bash "${BASH_SOURCE[0]}" "$1" "$2" >/dev/null; then echo "test-root: $1 $2 ready ($(($(date +%s) - t)) s)"; else return 1; fi
  }
  one trixie arm64 &
  arm=$!
  rc=0
  for suite in bookworm trixie forky; do one "$suite" amd64 || rc=1; done
  one trixie armhf || rc=1
  wait "$arm" || rc=1
  exit $rc
fi
[ $# = 2 ] || die "usage: scripts/package/test-root.sh SUITE ARCH | --all"
suite=$1
arch=$2
case $suite in bookworm | trixie | forky) ;; *) die "unknown suite '$suite': bookworm, trixie or forky" ;; esac
case $arch in amd64 | arm64 | armhf) ;; *) die "unknown architecture '$arch': amd64, arm64 or armhf" ;; esac
for tool in mmdebstrap arch-test; do
  command -v "$tool" >/dev/null || die "$tool not found: run scripts/package/tools.sh (as root), which installs the package test's tools"
done
[ "$(id -u)" = 0 ] || die "building a root needs root"

cache=${BOTLINK_TEST_ROOTS:-/var/cache/botlink-test-roots}
mirror=${BOTLINK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
include=adduser,logrotate,init-system-helpers
case $suite in bookworm | trixie) include=$include,nodejs ;; esac
# trixie's lintian (2.122 and later), which the package test runs inside the trixie root.
[ "$suite-$arch" != trixie-amd64 ] || include=$include,lintian
# The recipe is part of the key: a changed package list builds a new root the same day.
recipe=$(printf '%s %s' "$include" "$mirror" | sha256sum | cut -c1-8)
key=$suite-$arch-$(date -u +%Y%m%d)-$recipe
dir=$cache/$key
if [ -f "$dir/.complete" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
# One builder per root: a second caller waits for the first.
exec 9>"$cache/$suite-$arch.lock"
flock 9
if [ ! -f "$dir/.complete" ]; then
  case $arch in arm64) binfmt=qemu-aarch64 ;; armhf) binfmt=qemu-arm ;; *) binfmt= ;; esac
  if [ -n "$binfmt" ] && [ "$arch" != "$(dpkg --print-architecture)" ] && [ ! -e "/proc/sys/fs/binfmt_misc/$binfmt" ]; then
    die "no $binfmt in binfmt_misc, so this machine cannot run an $arch root's maintainer scripts: run scripts/package/tools.sh as root (it registers qemu-user-static's)"
  fi
  started=$(date +%s)
  rm -rf "$dir" "$dir.tmp"
  log=$cache/$key.log
  if ! mmdebstrap --mode=root --variant=apt --architectures="$arch" --include="$include" \
    --aptopt='Acquire::Check-Valid-Until "false"' --skip=cleanup/apt/lists \
    "$suite" "$dir.tmp" "$mirror" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -rf "$dir.tmp"
    die "mmdebstrap $suite $arch failed (log: $log)"
  fi
  mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "test-root: built $suite $arch in $(($(date +%s) - started)) s: $dir" >&2
  for old in "$cache/$suite-$arch-"*; do
    [ "$old" = "$dir" ] || [ "$old" = "$log" ] || rm -rf "$old"
  done
fi
echo "$dir"
