#!/bin/sh
# The botlink command: this tree's bundle on the node the service uses (the native addons were built for it).
app=$(dirname "$(dirname "$(readlink -f "$0")")")
node=/usr/bin/node
[ -x "$node" ] || node=$(command -v node) || { echo "botlink: node not found: install Node.js >= 20.18" >&2; exit 69; }
exec "$node" "$app/dist/botlink.mjs" "$@"
