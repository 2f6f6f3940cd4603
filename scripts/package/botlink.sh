#!/bin/sh
# The botlink command of the Debian package: the bundle on the Node.js the service runs and the native
# addons were built for (build.sh fills it in: botlink-node's, or on armhf the distribution's nodejs).
exec @NODE@ /usr/lib/botlink/dist/botlink.mjs "$@"
