#!/usr/bin/env bash
# Builds the botlink package of an earlier commit with that commit's own recipe (its
# scripts/package/build.sh), for the package test's upgrade check, and prints the .deb's path:
#   scripts/package/baseline.sh COMMIT ARCH
# The .deb is cached in /var/cache/botlink-package (BOTLINK_PACKAGE_CACHE; the checkout's
# node_modules/.cache/package when that is not writable), which outlives `npm ci`. It is built in
# node_modules/.cache/package/baseline-COMMIT from the commit's tree (git archive), with this
# checkout's node_modules, hard-linked, when the dependencies in the two lockfiles are the same (else
# its own `npm ci`).
set -euo pipefail

die() {
  echo "baseline: $*" >&2
  exit 1
}
[ $# = 2 ] || die "usage: scripts/package/baseline.sh COMMIT ARCH"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
commit=$(git -C "$root" rev-parse --verify --quiet "$1^{commit}") ||
  die "commit $1 is not in this clone (a shallow clone lacks it: git fetch --unshallow)"
arch=$2
dir=$root/node_modules/.cache/package/baseline-$commit
version=$(git -C "$root" show "$commit:package.json" | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).version.replace("-", "~")')
store=${BOTLINK_PACKAGE_CACHE:-/var/cache/botlink-package}
mkdir -p "$store" 2>/dev/null && [ -w "$store" ] || store=$root/node_modules/.cache/package
mkdir -p "$store"
# "-2": the builds made before baseline.sh cleared npm's node-gyp settings (below) may hold addons
# compiled against the wrong Node; their name is not looked for.
kept=$store/botlink_${version}_${arch}_${commit:0:12}-2.deb
deb=$dir/dist/deb/botlink_${version}_$arch.deb
if [ ! -f "$kept" ]; then
  started=$(date +%s)
  rm -rf "$dir" && mkdir -p "$dir"
  git -C "$root" archive "$commit" | tar -x -C "$dir"
  # The dependency tree of a lockfile, without the project's own entry (its version differs).
  deps() { node -e 'const l = JSON.parse(require("fs").readFileSync(0, "utf8")); delete l.packages[""]; delete l.version; console.log(JSON.stringify(l))'; }
  if [ "$(deps <"$root/package-lock.json")" = "$(deps <"$dir/package-lock.json")" ]; then
    mkdir "$dir/node_modules"
    find "$root/node_modules" -mindepth 1 -maxdepth 1 ! -name .cache -exec cp -al {} "$dir/node_modules/" \;
  else
    (cd "$dir" && npm ci --no-audit --no-fund >"$dir.npm-ci.log" 2>&1) || die "npm ci of $commit failed (log: $dir.npm-ci.log)"
  fi
  # The commit's recipe in the environment it was written for: node-gyp lets npm_config_nodedir (which
  # scripts/node-runtime.sh --env exports, and .ci/run uses) and its kin override its command line, so
  # a recipe that passes only --nodedir (0.1.0's, for Node 20.18's headers) got Node 24's, and a package
  # whose addon the distribution's Node 20 cannot load.
  (cd "$dir" && env -u npm_config_nodedir -u npm_config_target -u npm_config_arch -u npm_config_runtime -u npm_config_dist_url \
    SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct "$commit") bash scripts/package/build.sh "$arch" >"$dir.build.log" 2>&1) ||
    { tail -n 30 "$dir.build.log" >&2; die "building the $arch package of $commit failed (log: $dir.build.log)"; }
  [ -f "$deb" ] || die "the build of $commit made no $deb"
  cp "$deb" "$kept.tmp" && mv "$kept.tmp" "$kept"
  rm -rf "$dir"
  echo "baseline: botlink $version ($commit) for $arch built in $(($(date +%s) - started)) s" >&2
fi
echo "$kept"
