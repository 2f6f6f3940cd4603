#!/usr/bin/env bash
# Runs the fast test suite (vitest run, as `npm test`) on several Node majors: 20, 22 and 24 by default,
# or the majors given as arguments. The machine's own node serves its major; the others come from
# the npm registry's node-linux-<arch> packages (binary and headers, nothing downloaded elsewhere).
# Each runtime gets its own copy of the committed tree (git archive HEAD) and its own `npm ci`, so
# the native addons are compiled against that runtime and the checkout's node_modules stays as it is.
# Prints `node vX: N passed, M failed` per runtime and, last, the sum `N passed, M failed` (.ci/run
# reads that line); exits 1 if anything failed, 2 if it could not start at all.
# With --prepare first it only obtains the runtimes and installs each copy (the slow part: compiling
# better-sqlite3), so that a later run goes straight to the tests; .ci/run does that in the background.
# With --reports DIR (after --prepare, if both) each runtime's vitest JSON report is also written to
# DIR/node-<major>.json, for .ci/run's totals to name the failed tests.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/node_modules/.cache/runtimes"
prepare=0
if [ "${1:-}" = --prepare ]; then prepare=1; shift; fi
reports=
if [ "${1:-}" = --reports ]; then reports=$2; shift 2; fi
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(20 22 24)

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  armv7l) arch=armv7l ;;
  *) echo "test-runtimes: no node-linux package for $(uname -m)" >&2; exit 2 ;;
esac
pkg="node-linux-$arch"
commit=$(git -C "$root" rev-parse --short HEAD) || exit 2
mkdir -p "$cache"

# Installs $pkg@$1 under the cache (once) and prints its package directory.
install_node() {
  local version=$1 dir="$cache/pkg-$1"
  local pkgdir="$dir/node_modules/$pkg"
  if [ ! -x "$pkgdir/bin/node" ] || [ ! -f "$pkgdir/include/node/node.h" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    npm install --no-save --no-audit --no-fund --ignore-scripts --prefix "$dir" "$pkg@$version" >&2 || return 1
  fi
  echo "$pkgdir"
}

# The newest published version of major $1 of $pkg.
newest_version() {
  npm view "$pkg" versions --json | node -e '
    const major = process.argv[1];
    const all = JSON.parse(require("fs").readFileSync(0, "utf8")).filter((v) => /^\d+\.\d+\.\d+$/.test(v) && v.split(".")[0] === major);
    const num = (v) => v.split(".").map(Number);
    all.sort((a, b) => { const [x, y] = [num(a), num(b)]; return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
    if (!all.length) process.exit(1);
    console.log(all.at(-1));
  ' "$1"
}

seconds() { echo $(($(date +%s) - $1)); }

# The Node version whose headers the native addons are compiled against on runtime $1: its own,
# except on 24.19 and later 24.x. Those headers make node::ObjectWrap's destructor remove an
# environment cleanup hook, which aborts the process ("Assertion failed: (env) != nullptr") when V8
# collects a wrapped object outside a context, e.g. on an idle GC (nodejs/node#65446, open).
# better-sqlite3 12 wraps its Database and Statement objects that way; its fix (13, node-addon-api)
# needs Node >= 22. Built against the headers scripts/package/node-runtime.lock names (24.18.1: same
# ABI, 137) the addon runs cleanly on every 24.x runtime, so that is what runs here, what the package
# ships, and what README tells users of those runtimes to do.
lock_headers=$(sed -n 's/^headers //p' "$root/scripts/package/node-runtime.lock")
headers_version() {
  local maj minor
  IFS=. read -r maj minor _ <<<"$1"
  if [ "$maj" = 24 ] && [ "$minor" -ge 19 ]; then echo "$lock_headers"; else echo "$1"; fi
}

total_passed=0
total_failed=0
exit_code=0
summary=()

# Adds one runtime's result to the summary and the totals.
record() {
  local label=$1 passed=$2 failed=$3 note=${4:-}
  summary+=("$label: $passed passed, $failed failed${note:+ ($note)}")
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  [ "$failed" -eq 0 ] || exit_code=1
}

for major in "${majors[@]}"; do
  echo "::: node $major"
  t0=$(date +%s)
  system_node=$(command -v node)
  if [ "$("$system_node" -p 'process.versions.node.split(".")[0]')" = "$major" ]; then
    bin_dir=$(dirname "$system_node")
    version=$("$system_node" -p 'process.versions.node')
    prefix=$(dirname "$(dirname "$(readlink -f "$system_node")")")
    # The machine's headers if it has them, else those of the same version from the registry.
    if [ -f "$prefix/include/node/node.h" ]; then nodedir=$prefix; else nodedir=$(install_node "$version") || nodedir=; fi
  else
    version=$(newest_version "$major") || version=
    pkgdir=
    [ -n "$version" ] && pkgdir=$(install_node "$version")
    bin_dir="$pkgdir/bin"
    nodedir=$pkgdir
  fi
  if [ -z "$version" ] || [ -z "$nodedir" ] || [ ! -x "$bin_dir/node" ]; then
    echo "node $major: could not obtain $pkg for major $major"
    record "node $major" 0 1 "runtime unavailable"
    continue
  fi
  headers=$(headers_version "$version")
  if [ "$headers" != "$version" ]; then
    # The lock's headers, fetched and checked against its sha512 once by scripts/node-runtime.sh.
    if ! nodedir=$(bash "$root/scripts/node-runtime.sh" --headers); then
      record "node v$version" 0 1 "headers $headers unavailable"
      continue
    fi
    echo "node v$version: native addons built against the v$headers headers (nodejs/node#65446)"
  fi
  t_node=$(seconds "$t0")

  # A persistent copy per major: the sources are replaced every run, node_modules only when the
  # lockfile or the runtime changed (compiling better-sqlite3 is most of the install time).
  work="$cache/repo-$major"
  mkdir -p "$work"
  find "$work" -mindepth 1 -maxdepth 1 ! -name node_modules ! -name .runtime-stamp -exec rm -rf {} +
  git -C "$root" archive HEAD | tar -x -C "$work"
  stamp="$version $headers $(sha256sum "$work/package-lock.json" | cut -d' ' -f1)"
  t1=$(date +%s)
  log="$cache/test-node-$major.log"
  report="$cache/test-node-$major.json"
  rm -f "$report"
  # Native addons from source against this runtime's headers (no prebuilt download), both compile units at once.
  export_env=(PATH="$bin_dir:$PATH" npm_config_nodedir="$nodedir" npm_config_build_from_source=true npm_config_jobs=max)
  if [ "$(cat "$work/.runtime-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -f "$work/.runtime-stamp"
    if ! (cd "$work" && env "${export_env[@]}" npm ci --no-audit --no-fund >"$log" 2>&1); then
      tail -n 40 "$log"
      echo "node v$version: npm ci failed (log: $log)"
      record "node v$version" 0 1 "npm ci"
      continue
    fi
    echo "$stamp" >"$work/.runtime-stamp"
  fi
  t_ci=$(seconds "$t1")
  if [ $prepare = 1 ]; then
    echo "node v$version: ready (node ${t_node} s, npm ci ${t_ci} s)"
    continue
  fi

  t2=$(date +%s)
  (cd "$work" && env "${export_env[@]}" npx vitest run --reporter=default --reporter=json --outputFile.json="$report" >"$log" 2>&1)
  rc=$?
  t_test=$(seconds "$t2")
  [ -z "$reports" ] || [ ! -s "$report" ] || cp "$report" "$reports/node-$major.json"
  if [ -s "$report" ]; then
    # A test file that fails to load reports no tests at all: count it as one failure.
    read -r passed failed < <(node -e '
      const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const unloaded = r.testResults.filter((f) => f.status === "failed" && f.assertionResults.length === 0).length;
      console.log(r.numPassedTests, r.numFailedTests + unloaded);
    ' "$report")
  else
    passed=0 failed=0
  fi
  # A run that failed with every test green (an unhandled error, no report) counts as one failure.
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  if [ "$failed" -gt 0 ]; then
    grep -E "FAIL|✗|×|Error" "$log" | head -n 40
    echo "(full output: $log)"
  fi
  ran=$(cd "$work" && PATH="$bin_dir:$PATH" node --version)
  echo "$ran: node ${t_node} s, npm ci ${t_ci} s, tests ${t_test} s ($commit)"
  echo "$ran: $passed passed, $failed failed"
  record "$ran" "$passed" "$failed"
done

[ $prepare = 1 ] && exit "$exit_code"
echo "::: summary"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed"
exit "$exit_code"
