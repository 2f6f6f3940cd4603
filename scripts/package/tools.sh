#!/usr/bin/env bash
# Installs the Debian tools that `npm run package` and `npm run test:package` use, as root, and does
# nothing when they are all there: dpkg-dev (dpkg-shlibdeps, dpkg-buildflags), lintian, a C/C++
# compiler for each architecture (native or cross), and for the foreign one its C and C++ runtime
# from Debian's archive (`dpkg --add-architecture`), which dpkg-shlibdeps reads and the emulated node
# runs on, with qemu-user-static to run it.
set -euo pipefail

host=$(dpkg --print-architecture)
need=()
add_arch=()
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v lintian >/dev/null || need+=(lintian)
command -v python3 >/dev/null || need+=(python3)
for arch in amd64 arm64; do
  case $arch in
    amd64) triplet=x86_64-linux-gnu qemu=qemu-x86_64-static ;;
    arm64) triplet=aarch64-linux-gnu qemu=qemu-aarch64-static ;;
  esac
  if [ "$arch" = "$host" ]; then
    command -v "$triplet-g++" >/dev/null || need+=(g++)
    continue
  fi
  command -v "$triplet-g++" >/dev/null || need+=("g++-${triplet//_/-}")
  command -v "$qemu" >/dev/null || need+=(qemu-user-static)
  dpkg --print-foreign-architectures | grep -qx "$arch" || add_arch+=("$arch")
  dpkg-query -W "libc6:$arch" "libstdc++6:$arch" >/dev/null 2>&1 || need+=("libc6:$arch" "libstdc++6:$arch")
done
[ ${#need[@]} -gt 0 ] || exit 0

[ "$(id -u)" = 0 ] || { echo "tools.sh: run as root to install ${need[*]}" >&2; exit 1; }
for arch in "${add_arch[@]}"; do dpkg --add-architecture "$arch"; done
export DEBIAN_FRONTEND=noninteractive
echo "tools.sh: apt-get install ${need[*]}"
# A new architecture has no package lists yet; otherwise the lists on the machine are tried first.
if [ ${#add_arch[@]} -gt 0 ] || ! apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; then
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
