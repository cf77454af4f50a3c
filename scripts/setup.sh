#!/usr/bin/env bash
# Prepares a Debian 12 machine for quadsock, idempotently: installs the packages the build and
# the tests need, mounts bpffs, and checks that this kernel can do AF_XDP. Run as root.
#
#   scripts/setup.sh          # quiet when everything is already there
set -euo pipefail

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) printf 'setup: takes no arguments (see --help)\n' >&2; exit 2 ;;
esac

[ "$(id -u)" -eq 0 ] || die "run as root (quadsock needs BPF, AF_XDP and network namespaces)"
[ -r /etc/debian_version ] || die "this script is for Debian 12; install the packages in scripts/packages.txt by hand"

here=$(cd "$(dirname "$0")" && pwd)
mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$here/packages.txt")
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || die "apt-get update failed"
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
fi

# libxdp and bpftool like a mounted bpffs; this kernel does not mount one by default.
if ! mountpoint -q /sys/fs/bpf; then
  mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs on /sys/fs/bpf"
  say "mounted bpffs on /sys/fs/bpf"
fi

# AF_XDP is address family 44: the kernel either makes such a socket or says why not.
if ! /usr/bin/python3 - <<'PY'
import socket, sys
try:
    socket.socket(44, socket.SOCK_RAW, 0).close()
except OSError as e:
    sys.exit("this kernel cannot make AF_XDP sockets (%s): quadsock needs CONFIG_XDP_SOCKETS" % e)
PY
then
  die "no AF_XDP on this machine (kernel $(uname -r))"
fi
ip netns list >/dev/null 2>&1 || die "no network namespaces (iproute2 'ip netns' fails)"
