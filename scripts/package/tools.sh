#!/usr/bin/env bash
# Installs the Debian tools that `npm run package` and `npm run test:package` use, as root, and does
# nothing when they are all there: dpkg-dev (dpkg-shlibdeps, dpkg-buildflags), lintian, a C/C++
# compiler for each architecture (native or cross), and for the foreign one its C and C++ runtime
# from Debian's archive (`dpkg --add-architecture`), which dpkg-shlibdeps reads and the emulated node
# runs on, with qemu-user-static to run it (amd64, arm64 and armhf: Debian's cross toolchains
# g++-aarch64-linux-gnu and g++-arm-linux-gnueabihf on an amd64 machine); mmdebstrap, which builds the
# install matrix's fresh roots (test/package/matrix.test.ts). Then it registers qemu-user-static's interpreters with binfmt_misc
# when the kernel lets it (a foreign root's maintainer scripts run through them); where it cannot, the
# package test says why.
set -euo pipefail

host=$(dpkg --print-architecture)
need=()
add_arch=()
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v lintian >/dev/null || need+=(lintian)
command -v python3 >/dev/null || need+=(python3)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
# mmdebstrap builds a foreign root only with arch-test (the arm64 one of the install matrix).
command -v arch-test >/dev/null || need+=(arch-test)
for arch in amd64 arm64 armhf; do
  case $arch in
    amd64) triplet=x86_64-linux-gnu qemu=qemu-x86_64-static ;;
    arm64) triplet=aarch64-linux-gnu qemu=qemu-aarch64-static ;;
    armhf) triplet=arm-linux-gnueabihf qemu=qemu-arm-static ;;
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

# binfmt_misc: mounted if it is not, then each foreign architecture's qemu-*-static registered from
# the line qemu-user-static ships (F: the interpreter is opened now, so it works inside chroots too).
register_binfmt() {
  local conf name
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || return 0
  for conf in /usr/lib/binfmt.d/qemu-aarch64.conf /usr/lib/binfmt.d/qemu-arm.conf /usr/lib/binfmt.d/qemu-x86_64.conf; do
    [ -f "$conf" ] || continue
    name=$(cut -d: -f2 "$conf")
    [ -e "/proc/sys/fs/binfmt_misc/$name" ] || sed -n 1p "$conf" >/proc/sys/fs/binfmt_misc/register 2>/dev/null || true
  done
}

if [ ${#need[@]} = 0 ]; then
  [ "$(id -u)" != 0 ] || register_binfmt
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "tools.sh: run as root to install ${need[*]}" >&2; exit 1; }
for arch in "${add_arch[@]}"; do dpkg --add-architecture "$arch"; done
export DEBIAN_FRONTEND=noninteractive
echo "tools.sh: apt-get install ${need[*]}"
# A new architecture has no package lists yet; otherwise the lists on the machine are tried first.
if [ ${#add_arch[@]} -gt 0 ] || ! apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; then
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
register_binfmt
