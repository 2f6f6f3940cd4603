#!/usr/bin/env bash
# Installs botlink on this device, or into a root directory with --prefix: the bundle and its production
# node_modules in /opt/botlink, the `botlink` command, the systemd unit, the logrotate snippet with its
# hourly size-check timer, a config template, and the broker's unit and template (never enabled). Safe
# to run again: it upgrades the program and never touches an existing config or loosens /etc/botlink.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/install.sh [--prefix DIR] [--dry-run]

Installs botlink from this checkout (run `npm ci` first; the bundle is built when missing):
  /opt/botlink/                    bundle, production node_modules, config.example.json,
                                   broker-config.example.json, metrics-file.conf (a drop-in)
  /usr/local/bin/botlink           the botlink command (-> /opt/botlink/bin/botlink)
  /etc/systemd/system/botlink.service
  /etc/logrotate.d/botlink
  /etc/systemd/system/botlink-logrotate.{service,timer}   hourly size check of the log
  /etc/systemd/system/botlink-broker.service   the vendor's broker (README: Broker mode), not enabled
  /etc/botlink/config.json         from the template, only when there is none (mode 0600); an
                                   existing /etc/botlink keeps its mode and group
  the `botlink` system group       the local API's users (the service runs in it), when missing
Then reloads systemd, enables botlink.service and starts botlink-logrotate.timer; it starts (or
restarts, to upgrade) the service once /etc/botlink/secret-key exists and config.json is no longer
the bare template.

  --prefix DIR   install below DIR as if it were / (an image or a test); systemctl is not run
  --dry-run      print every action and change nothing
  -h, --help     this text
EOF
}

die() {
  echo "install.sh: $*" >&2
  exit 1
}

ROOT=''
PREFIXED=0
DRY_RUN=0
while [ $# -gt 0 ]; do
  case $1 in
    --prefix)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "install.sh: --prefix needs a directory" >&2; usage >&2; exit 64; }
      ROOT=$2
      PREFIXED=1
      shift 2
      ;;
    --prefix=*)
      ROOT=${1#--prefix=}
      [ -n "$ROOT" ] || { echo "install.sh: --prefix needs a directory" >&2; usage >&2; exit 64; }
      PREFIXED=1
      shift
      ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install.sh: unknown option '$1'" >&2; usage >&2; exit 64 ;;
  esac
done
if [ "$PREFIXED" = 1 ]; then
  ROOT=$(realpath -m -- "$ROOT")
  # "/" as prefix is the real root; paths are built as "$ROOT/etc/…".
  [ "$ROOT" != / ] || ROOT=''
fi

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
APP=$ROOT/opt/botlink
ETC=$ROOT/etc/botlink

# Prints a command, shell-quoted, then runs it unless --dry-run.
act() {
  printf '+'
  printf ' %q' "$@"
  printf '\n'
  [ "$DRY_RUN" = 1 ] || "$@"
}

# Writes stdin to a file with the given mode (install(1) applies the mode before any content lands).
write_file() {
  local mode=$1 dest=$2
  printf '+ write %q (mode %s)\n' "$dest" "$mode"
  if [ "$DRY_RUN" = 1 ]; then cat >/dev/null; else install -m "$mode" /dev/stdin "$dest"; fi
}

note() { printf '%s\n' "$*"; }

[ "$PREFIXED" = 1 ] || [ "$DRY_RUN" = 1 ] || [ "$(id -u)" = 0 ] || die "run as root (sudo $0), or use --prefix DIR / --dry-run"

# The unit runs /usr/bin/node (Debian, Raspberry Pi OS, NodeSource): it must exist on the target.
if ! "$ROOT/usr/bin/node" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 18) ? 0 : 1)' 2>/dev/null; then
  msg="$ROOT/usr/bin/node is missing or older than 20.18: install Node.js >= 20.18 there (apt install nodejs, or NodeSource)"
  if [ "$PREFIXED" = 1 ] || [ "$DRY_RUN" = 1 ]; then note "warning: $msg"; else die "$msg"; fi
fi

BUNDLE=$SRC/dist/botlink.mjs
# The application bundles the entry loads (scripts/build.mjs, APPS).
APPS=(botlink.cjs botlink-daemon.cjs)
if [ ! -f "$BUNDLE" ] || [ ! -f "$SRC/dist/${APPS[0]}" ] || [ ! -f "$SRC/dist/${APPS[1]}" ]; then
  act npm --prefix "$SRC" run build
fi
[ -d "$SRC/node_modules" ] || die "$SRC/node_modules is missing: run \`npm ci\` in $SRC first"

# Production packages only; nested dependencies travel inside their top-level package's folder.
if ! packages=$(cd "$SRC" && npm ls --omit=dev --parseable --all 2>/dev/null); then
  (cd "$SRC" && npm ls --omit=dev --all >&2) || true
  die "npm ls reports a broken node_modules in $SRC: run \`npm ci\` there first"
fi
top_level=()
while IFS= read -r dir; do
  rel=${dir#"$SRC"/}
  [[ $rel =~ ^node_modules/(@[^/]+/)?[^/]+$ ]] && top_level+=("${rel#node_modules/}")
done <<<"$packages"
[ ${#top_level[@]} -gt 0 ] || die "npm ls listed no production packages in $SRC"

# Build the new program tree beside the old one, then swap, so a failed copy never leaves half a tree.
STAGE=$ROOT/opt/botlink.new
[ ! -e "$STAGE" ] || act rm -rf -- "$STAGE"
act install -d -m 0755 "$STAGE" "$STAGE/dist" "$STAGE/bin" "$STAGE/node_modules"
act install -m 0755 "$BUNDLE" "$STAGE/dist/botlink.mjs"
for app in "${APPS[@]}"; do act install -m 0644 "$SRC/dist/$app" "$STAGE/dist/$app"; done
act install -m 0644 "$SRC/package.json" "$STAGE/package.json"
act install -m 0644 "$SRC/systemd/config.example.json" "$STAGE/config.example.json"
act install -m 0644 "$SRC/systemd/broker-config.example.json" "$STAGE/broker-config.example.json"
act install -m 0644 "$SRC/systemd/botlink.service.d/metrics-file.conf" "$STAGE/metrics-file.conf"
shopt -s dotglob nullglob
for pkg in "${top_level[@]}"; do
  from=$SRC/node_modules/$pkg
  to=$STAGE/node_modules/$pkg
  [[ $pkg != @*/* ]] || [ -d "${to%/*}" ] || act install -d -m 0755 "${to%/*}"
  if [ -f "$from/binding.gyp" ] && [ -d "$from/build/Release" ]; then
    # A native addon needs its compiled .node files at run time, not build objects or vendored C sources (~25 MB).
    entries=()
    for entry in "$from"/*; do
      case ${entry##*/} in build | deps) ;; *) entries+=("$entry") ;; esac
    done
    act install -d -m 0755 "$to" "$to/build" "$to/build/Release"
    act cp -a --no-preserve=ownership "${entries[@]}" "$to/"
    act cp -a --no-preserve=ownership "$from"/build/Release/*.node "$to/build/Release/"
  else
    act cp -a --no-preserve=ownership "$from" "$to"
  fi
done
shopt -u dotglob nullglob
# The service's transient user must read everything, whatever umask the checkout was made with.
act chmod -R u+rwX,go+rX,go-w "$STAGE"
write_file 0755 "$STAGE/bin/botlink" <<'EOF'
#!/bin/sh
# The botlink command: this tree's bundle on the node the service uses (the native addons were built for it).
app=$(dirname "$(dirname "$(readlink -f "$0")")")
node=/usr/bin/node
[ -x "$node" ] || node=$(command -v node) || { echo "botlink: node not found: install Node.js >= 20.18" >&2; exit 69; }
exec "$node" "$app/dist/botlink.mjs" "$@"
EOF
if [ -e "$APP" ]; then
  [ ! -e "$ROOT/opt/botlink.old" ] || act rm -rf -- "$ROOT/opt/botlink.old"
  act mv -- "$APP" "$ROOT/opt/botlink.old"
  act mv -- "$STAGE" "$APP"
  act rm -rf -- "$ROOT/opt/botlink.old"
else
  act mv -- "$STAGE" "$APP"
fi

act install -d -m 0755 "$ROOT/usr/local/bin"
# Relative, so the link also works inside a --prefix tree.
act ln -sfn ../../../opt/botlink/bin/botlink "$ROOT/usr/local/bin/botlink"
act install -D -m 0644 "$SRC/systemd/botlink.service" "$ROOT/etc/systemd/system/botlink.service"
act install -D -m 0644 "$SRC/systemd/botlink.logrotate" "$ROOT/etc/logrotate.d/botlink"
# logrotate.timer runs daily: this timer looks at the snippet's maxsize every hour.
# The broker's unit is installed but never enabled: it runs on a vendor's host, once configured.
for unit in botlink-logrotate.service botlink-logrotate.timer botlink-broker.service; do
  act install -D -m 0644 "$SRC/systemd/$unit" "$ROOT/etc/systemd/system/$unit"
done

# An existing /etc/botlink is the operator's: its mode and group (0700, or 0750 with a group) are kept.
if [ -d "$ETC" ]; then
  note "keeping $ETC (mode $(stat -c %04a "$ETC"))"
else
  act install -d -m 0755 "$ETC"
fi
if [ -e "$ETC/config.json" ]; then
  note "keeping $ETC/config.json (the template is $APP/config.example.json)"
else
  act install -m 0600 "$SRC/systemd/config.example.json" "$ETC/config.json"
fi

configured=1
# Under --dry-run a fresh config does not exist yet: it would be the bare template.
if [ ! -f "$ETC/config.json" ] || cmp -s "$SRC/systemd/config.example.json" "$ETC/config.json"; then
  configured=0
  note "next: edit /etc/botlink/config.json (baseUrl, accessKeyId, vendorId or botId)"
fi
if [ ! -f "$ETC/secret-key" ]; then
  configured=0
  note "next: store the SecretKey, readable by root only (paste it, press Enter, then Ctrl-D):"
  note "  sudo sh -c 'umask 077 && cat > /etc/botlink/secret-key'"
elif [ -n "$(find "$ETC/secret-key" -perm /077)" ]; then
  note "warning: /etc/botlink/secret-key is readable by group or others: run \`sudo chmod 600 /etc/botlink/secret-key\`"
fi

# The unit runs in this group (Group=botlink): members may use the local API socket (0660), e.g. a voice
# app's unit with SupplementaryGroups=botlink.
if [ "$PREFIXED" = 1 ]; then
  note "installed below $ROOT; systemctl not run (--prefix); on the target create the group: groupadd --system botlink"
  exit 0
fi
getent group botlink >/dev/null || act groupadd --system botlink
act systemctl daemon-reload
act systemctl enable botlink.service
act systemctl enable --now botlink-logrotate.timer
if [ "$configured" = 1 ]; then
  act systemctl restart botlink.service
  note "botlink.service (re)started: check it with \`botlink status\` and \`botlink doctor\`"
else
  note "then: sudo systemctl start botlink"
fi
command -v logrotate >/dev/null || note "warning: logrotate is not installed (apt install logrotate): /var/log/botlink will grow unbounded"
