#!/usr/bin/env bash
# Installs the Debian packages whose tools the tests drive for real (logrotate, systemd-analyze,
# python3's sd_notify listener, openssl, setpriv, flock, libfaketime, sox for a saved reply's WAV,
# Prometheus's Python parser, PostgreSQL for the broker's store, Chromium for the console's browser
# tests) through apt-get: as root, else through sudo. Prints what it installs; does nothing when
# every tool is present.
# scripts/lib/tools.ts holds the same list.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/test-tools.sh [--check | --list]

Installs the Debian packages of the system tools `npm test` and `npm run test:long` need, when missing.
  --check   install nothing: name what is missing and exit 1 if anything is
  --list    print "tool package" per line and exit
EOF
}

# tool, then its Debian package; a tool is a command, or libfaketime (the faketime package's preload
# library), or prometheus_client (the Python module whose text-format parser checks the metrics), or
# postgresql (Debian's server binaries, outside PATH: the tests start their own throwaway server), or
# cryptography (the Python module a second, independent broker client signs with).
TOOLS=(
  'logrotate logrotate'
  'systemd-analyze systemd'
  'python3 python3'
  'openssl openssl'
  'setpriv util-linux'
  'flock util-linux'
  'libfaketime faketime'
  'sox sox'
  'prometheus_client python3-prometheus-client'
  'postgresql postgresql'
  'cryptography python3-cryptography'
  'chromium chromium'
)

mode=install
case ${1:-} in
  '') ;;
  --check) mode=check ;;
  --list) mode=list ;;
  -h | --help) usage; exit 0 ;;
  *) echo "test-tools.sh: unknown option '$1'" >&2; usage >&2; exit 64 ;;
esac
[ $# -le 1 ] || { usage >&2; exit 64; }

if [ "$mode" = list ]; then
  printf '%s\n' "${TOOLS[@]}"
  exit 0
fi

# Whether tool $1 is on this machine; a non-root PATH lacks the sbin folders where logrotate lives.
present() {
  if [ "$1" = libfaketime ]; then
    compgen -G '/usr/lib/*-linux-gnu*/faketime/libfaketime.so.1' >/dev/null
  elif [ "$1" = prometheus_client ]; then
    [ -e /usr/lib/python3/dist-packages/prometheus_client/parser.py ]
  elif [ "$1" = cryptography ]; then
    [ -e /usr/lib/python3/dist-packages/cryptography/__init__.py ]
  elif [ "$1" = postgresql ]; then
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
  else
    PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$1" >/dev/null
  fi
}

# Fills the arrays missing (tools) and packages (their Debian packages, once each).
scan() {
  missing=()
  packages=()
  local entry tool pkg
  for entry in "${TOOLS[@]}"; do
    read -r tool pkg <<<"$entry"
    present "$tool" && continue
    missing+=("$tool")
    [[ " ${packages[*]} " == *" $pkg "* ]] || packages+=("$pkg")
  done
}

scan
if [ ${#missing[@]} -eq 0 ]; then
  echo "test-tools: all present (${TOOLS[*]%% *})"
  exit 0
fi
if [ "$mode" = check ]; then
  echo "test-tools: missing ${missing[*]}: run scripts/test-tools.sh (apt-get install ${packages[*]})" >&2
  exit 1
fi

command -v apt-get >/dev/null || { echo "test-tools: apt-get not found: install the packages ${packages[*]} with this system's package manager" >&2; exit 1; }
as_root=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "test-tools: not root and no sudo: run as root: apt-get install ${packages[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
apt() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q "$@"; }

wanted=("${packages[@]}")
echo "test-tools: installing ${wanted[*]} (missing: ${missing[*]})"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A fresh container has no package lists: fetch them only when the install fails without.
if ! apt install -y --no-install-recommends "${wanted[@]}" >"$log" 2>&1; then
  if ! { apt update && apt install -y --no-install-recommends "${wanted[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "test-tools: apt-get install ${wanted[*]} failed (its output is above)" >&2
    exit 1
  fi
fi

scan
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-tools: still missing after the install: ${missing[*]}" >&2
  exit 1
fi
echo "test-tools: installed ${wanted[*]}"
