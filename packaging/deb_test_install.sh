#!/bin/bash
# packaging/deb_test_install.sh: deb_test.sh's first step, in a fresh Debian 12 container (root,
# privileged, the tree read-only at /src, the package at $DEB, the base's preinstalled libraries
# in $BASE_LIBS): installs the package with apt and checks it; builds clients/examples against
# it and pip-installs clients/python into a venv, both in /opt/deb-test for deb_test_run.sh.
# Not for use on a real machine: it installs packages.
. "$(dirname "$0")/deb_test_lib.sh"
mkdir -p "$test"

# The base came with quadsockd's runtime libraries (docker/build.sh): marked as pulled in by
# something else, apt would remove any that the package's Depends do not bring in.
apt-mark auto ${BASE_LIBS//,/ } >/dev/null
apt-get update -q >/dev/null
log "apt-get install $DEB"
apt-get install -y -q "$DEB" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install"; }
orphans=$(apt-get autoremove -s | sed -n 's/^Remv \([^ ]*\).*/\1/p')
[[ -z "$orphans" ]] || fail "the base's libraries $orphans are not pulled in by quadsock's Depends"
missing=$(ldd /usr/sbin/quadsockd /usr/bin/quadctl /usr/lib/quadsock/libquadsock_preload.so |
  grep 'not found' || true)
[[ -z "$missing" ]] || fail "unresolved libraries: $missing"
getent group quadsock >/dev/null || fail "no group quadsock after install"
help=$(quadsockd --help) || fail "quadsockd --help exits with $?"
grep -q -- --interface <<<"$help" || fail "quadsockd --help names no --interface"
quadctl --help >/dev/null || fail "quadctl --help"
quadsock-run --help | grep -q QUADSOCK_TARGET || fail "quadsock-run --help names no QUADSOCK_TARGET"
# The library loads and takes a UDP socket's bind; with no quadsockd to reach it says so once
# and leaves the socket on the kernel, or, when quadsock is required, the program exits.
bind_udp='import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 0)); print("bound")'
out=$(QUADSOCK_TARGET=unix:/nonexistent quadsock-run /usr/bin/python3 -c "$bind_udp" 2>&1) ||
  fail "quadsock-run without quadsockd: $out"
grep -q "cannot use quadsockd at unix:/nonexistent" <<<"$out" && grep -q bound <<<"$out" ||
  fail "quadsock-run without quadsockd did not say so, or did not bind on the kernel: $out"
if out=$(QUADSOCK_TARGET=unix:/nonexistent QUADSOCK_REQUIRE=1 quadsock-run /usr/bin/python3 \
    -c "$bind_udp" 2>&1); then
  fail "QUADSOCK_REQUIRE=1 without quadsockd did not exit: $out"
fi
grep -q "QUADSOCK_REQUIRE=1: exiting" <<<"$out" || fail "QUADSOCK_REQUIRE=1: $out"
(cd / && /usr/bin/python3 -c '
import quadsock, quadsock.v1.socket_pb2_grpc, quadsock.std.health_pb2_grpc
assert quadsock.__file__.startswith("/usr/lib/python3/dist-packages/"), quadsock.__file__
print("import quadsock:", quadsock.__file__)')
log "installed: programs, group, Python package"

# What the README tells a user to install next: a compiler for the example, pip, and the
# proto compilers pip's build uses; systemd for verify and to boot deb_test_run.sh's container.
apt-get install -y -q --no-install-recommends g++ make systemd python3-venv python3-pip \
  protobuf-compiler protobuf-compiler-grpc iproute2 ethtool >/tmp/apt.log 2>&1 ||
  { cat /tmp/apt.log; fail "apt-get install of the tools"; }

out=$(systemd-analyze verify quadsock@eth0.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z "$out" ]] || fail "systemd-analyze verify warns: $out"
log "systemd-analyze verify quadsock@eth0.service: clean"

# The C++ example against the installed library, by pkg-config.
cp -r /src/clients/examples "$test/examples"
make -C "$test/examples" >/tmp/make.log 2>&1 || { cat /tmp/make.log; fail "make of clients/examples"; }
help=$("$test/examples/udp_hello" --help) || fail "udp_hello --help"
grep -q usage <<<"$help" || fail "udp_hello --help prints no usage"
log "clients/examples built with $(pkg-config --libs quadsock | wc -w) linker flags from pkg-config"

# pip from the tree (a copy: pip builds in the source folder) into a venv that sees Debian's
# grpcio and protobuf.
mkdir -p "$test/tree/clients"
cp -r /src/clients/python "$test/tree/clients/"
cp -r /src/proto /src/VERSION "$test/tree/"
python3 -m venv --system-site-packages "$test/venv"
"$test/venv/bin/pip" install -q --no-build-isolation "$test/tree/clients/python" >/tmp/pip.log 2>&1 ||
  { cat /tmp/pip.log; fail "pip install"; }
(cd / && "$test/venv/bin/python" -c '
import sys, quadsock, quadsock.v1.socket_pb2_grpc, quadsock.std.health_pb2_grpc
assert quadsock.__file__.startswith(sys.prefix + "/"), quadsock.__file__
print("pip: import quadsock:", quadsock.__file__)')

log "installed and checked"
