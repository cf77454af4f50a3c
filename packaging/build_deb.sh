#!/bin/bash
# packaging/build_deb.sh: builds quadsock_VERSION_ARCH.deb (VERSION from the tree's VERSION
# file) with dpkg-deb, offline, from `bazel build -c opt`. It holds:
#   /usr/sbin/quadsockd, /usr/bin/quadctl
#   /lib/systemd/system/quadsock@.service   one instance per interface: quadsock@eth0
#   /etc/quadsock/example.flags             (a conffile) copied to /etc/quadsock/IFACE.flags
#   /usr/lib/MULTIARCH/libquadsock.a, its pkgconfig/quadsock.pc, /usr/include/quadsock/...
#   /usr/lib/python3/dist-packages/quadsock  the Python package, generated modules included
# Depends on the shared libraries the two programs link (dpkg-shlibdeps) and on Debian's
# python3-grpcio and python3-protobuf; recommends what building against libquadsock takes
# (libgrpc++-dev, libprotobuf-dev, libabsl-dev, pkg-config). The postinst makes the system
# group quadsock, whose members may use the clients' socket.
#
#   packaging/build_deb.sh              # ./quadsock_VERSION_ARCH.deb
#   packaging/build_deb.sh -o DIR       # DIR/quadsock_VERSION_ARCH.deb
set -euo pipefail

out=.
case "${1:-}" in
  "") ;;
  -o) [[ $# -eq 2 ]] || { echo "build_deb.sh: -o takes a folder" >&2; exit 2; }; out=$2 ;;
  -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) echo "build_deb.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
tree=$(cd "$(dirname "$0")/.." && pwd)
cd "$tree"

log() { echo "[build_deb] $*" >&2; }
for tool in bazel dpkg-deb dpkg-shlibdeps dpkg-architecture; do
  command -v "$tool" >/dev/null || { log "needs $tool (scripts/setup.sh installs it)"; exit 1; }
done

version=$(head -n 1 VERSION | tr -d '[:space:]')
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { log "VERSION holds no Debian version: '$version'"; exit 1; }
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb="$out/quadsock_${version}_${arch}.deb"

log "bazel build -c opt"
bazel build -c opt //service:quadsockd //clients/quadctl:quadctl //packaging:libquadsock \
  //clients/python:generate //clients/preload:libquadsock_preload.so
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
execroot=$(bazel info -c opt execution_root 2>/dev/null)

work=$(mktemp -d /tmp/quadsock-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/root"

install -D -m 0755 -s "$bin/service/quadsockd" "$root/usr/sbin/quadsockd"
install -D -m 0755 -s "$bin/clients/quadctl/quadctl" "$root/usr/bin/quadctl"
# Unmodified programs on quadsock: quadsock-run finds the library in ../lib/quadsock.
install -D -m 0755 clients/preload/quadsock-run.sh "$root/usr/bin/quadsock-run"
install -D -m 0644 -s "$bin/clients/preload/libquadsock_preload.so" \
  "$root/usr/lib/quadsock/libquadsock_preload.so"
install -D -m 0644 packaging/quadsock@.service "$root/lib/systemd/system/quadsock@.service"
install -D -m 0644 packaging/example.flags "$root/etc/quadsock/example.flags"

# The C++ client library: the archive, the headers it needs by the paths sources include them
# by, and its pkg-config file.
libdir="$root/usr/lib/$multiarch"
install -D -m 0644 "$bin/packaging/libquadsock.a" "$libdir/libquadsock.a"
while IFS=$'\t' read -r path name; do
  [[ "$path" == bazel-out/* ]] && from="$execroot/$path" || from="$path"  # generated or source
  install -D -m 0644 "$from" "$root/usr/include/quadsock/$name"
done <"$bin/packaging/libquadsock_headers.tsv"
mkdir -p "$libdir/pkgconfig"
sed -e "s/@VERSION@/$version/" -e "s/@MULTIARCH@/$multiarch/" packaging/quadsock.pc.in \
  >"$libdir/pkgconfig/quadsock.pc"
chmod 0644 "$libdir/pkgconfig/quadsock.pc"

# The Python package: the hand-written modules and those Bazel generated, in one tree.
py="$root/usr/lib/python3/dist-packages/quadsock"
install -D -m 0644 -t "$py" clients/python/quadsock/*.py
for sub in v1 std; do
  install -D -m 0644 -t "$py/$sub" "$bin/clients/python/quadsock/$sub/"*.py
done

install -D -m 0644 README.md "$root/usr/share/doc/quadsock/README.md"
install -D -m 0644 -t "$root/usr/share/doc/quadsock/examples" clients/examples/*

# Depends: the packages of the shared libraries the programs link, with the versions their
# symbols need (dpkg-shlibdeps reads the installed packages' symbols files).
mkdir -p "$work/debian"
printf 'Source: quadsock\n\nPackage: quadsock\nArchitecture: any\n' >"$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O -e root/usr/sbin/quadsockd -e root/usr/bin/quadctl \
  -e root/usr/lib/quadsock/libquadsock_preload.so \
  2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n "$shlibs" ]] || { log "dpkg-shlibdeps found no dependencies"; exit 1; }

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: quadsock
Version: $version
Architecture: $arch
Maintainer: quadsock developers <quadsock@localhost>
Installed-Size: $(du -sk "$root" | cut -f1)
Depends: $shlibs, python3, python3-grpcio, python3-protobuf
Recommends: libgrpc++-dev, libprotobuf-dev, libabsl-dev, pkg-config
Section: net
Priority: optional
Description: userspace UDP stack on AF_XDP with kernel-style hash4 demux
 quadsockd serves UDP sockets from AF_XDP rings to clients over gRPC; quadctl is its command
 line; quadsock-run runs unmodified programs with their UDP sockets on quadsock. Includes a
 systemd unit per interface (quadsock@IFACE), the C++ client library (pkg-config quadsock)
 and the Python package quadsock.
CONTROL
echo /etc/quadsock/example.flags >"$root/DEBIAN/conffiles"
install -m 0755 packaging/postinst packaging/prerm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
  xargs -0 md5sum) >"$root/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
log "built $deb"
echo "$deb"
