#!/bin/sh
# The botlink command of the Debian package: the bundle on botlink-node's Node.js, the one the service
# runs and the native addons were built for (the distribution's nodejs, if any, is not used).
exec /usr/lib/botlink-node/bin/node /usr/lib/botlink/dist/botlink.mjs "$@"
