#!/bin/bash
# packaging/deb_test_inside.sh: deb_test.sh's steps inside a fresh Debian 12 container (root,
# privileged, the tree read-only at /src, the package at $DEB). Not for use on a real machine:
# it installs packages and makes a veth pair.
set -euo pipefail
log() { echo "[deb_test inside] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
export DEBIAN_FRONTEND=noninteractive
[[ -f /.dockerenv || -f /run/.containerenv ]] || fail "run this inside deb_test.sh's container"

# The base came with quadsockd's runtime libraries (docker/build.sh): marked as pulled in by
# something else, apt would remove any that the package's Depends do not bring in.
apt-mark auto ${BASE_LIBS//,/ } >/dev/null
apt-get update -q >/dev/null
log "apt-get install $DEB"
apt-get install -y -q "$DEB" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install"; }
orphans=$(apt-get autoremove -s | sed -n 's/^Remv \([^ ]*\).*/\1/p')
[[ -z "$orphans" ]] || fail "the base's libraries $orphans are not pulled in by quadsock's Depends"
missing=$(ldd /usr/sbin/quadsockd /usr/bin/quadctl | grep 'not found' || true)
[[ -z "$missing" ]] || fail "unresolved libraries: $missing"
getent group quadsock >/dev/null || fail "no group quadsock after install"
quadsockd --help | grep -q -- --interface || fail "quadsockd --help"
quadctl --help >/dev/null || fail "quadctl --help"
(cd / && /usr/bin/python3 -c '
import quadsock, quadsock.v1.socket_pb2_grpc, quadsock.std.health_pb2_grpc
assert quadsock.__file__.startswith("/usr/lib/python3/dist-packages/"), quadsock.__file__
print("import quadsock:", quadsock.__file__)')
log "installed: programs, group, Python package"

# What the README tells a user to install next: a compiler for the example, pip, and the
# proto compilers pip's build uses; systemd, which this container does not run, for verify.
apt-get install -y -q --no-install-recommends g++ make systemd python3-venv python3-pip \
  protobuf-compiler protobuf-compiler-grpc iproute2 ethtool >/tmp/apt.log 2>&1 ||
  { cat /tmp/apt.log; fail "apt-get install of the tools"; }

out=$(systemd-analyze verify quadsock@eth0.service 2>&1) || fail "systemd-analyze verify: $out"
[[ -z "$out" ]] || fail "systemd-analyze verify warns: $out"
log "systemd-analyze verify quadsock@eth0.service: clean"

# The C++ example against the installed library, by pkg-config.
cp -r /src/clients/examples /tmp/examples
make -C /tmp/examples >/tmp/make.log 2>&1 || { cat /tmp/make.log; fail "make of clients/examples"; }
/tmp/examples/udp_hello --help | grep -q usage || fail "udp_hello --help"
log "clients/examples built with $(pkg-config --libs quadsock | wc -w) linker flags from pkg-config"

# pip from the tree (a copy: pip builds in the source folder) into a venv that sees Debian's
# grpcio and protobuf.
mkdir -p /tmp/tree/clients
cp -r /src/clients/python /tmp/tree/clients/
cp -r /src/proto /src/VERSION /tmp/tree/
python3 -m venv --system-site-packages /tmp/venv
/tmp/venv/bin/pip install -q --no-build-isolation /tmp/tree/clients/python >/tmp/pip.log 2>&1 ||
  { cat /tmp/pip.log; fail "pip install"; }
(cd / && /tmp/venv/bin/python -c '
import quadsock, quadsock.v1.socket_pb2_grpc, quadsock.std.health_pb2_grpc
assert quadsock.__file__.startswith("/tmp/venv/"), quadsock.__file__
print("pip: import quadsock:", quadsock.__file__)')

# quadsockd as the unit starts it (its ExecStart for instance qsd0, the unit's capability
# bounding set, group, umask and runtime folders), on a veth pair; the kernel holds the peer's
# address on the other end.
ip link add qsd0 type veth peer name qsp0
ip link set qsd0 up
ip link set qsp0 up
ip addr add 10.9.0.1/24 dev qsp0
ethtool -K qsp0 tx off >/dev/null  # veth leaves the kernel's UDP checksums to offload
sed 's|^--address=.*|--address=10.9.0.2/24|' /etc/quadsock/example.flags >/etc/quadsock/qsd0.flags
unit=/lib/systemd/system/quadsock@.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit" | sed 's/%i/qsd0/g')
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd,)
[[ "$(sed -n 's/^Group=//p' "$unit")" == quadsock ]] || fail "the unit's Group is not quadsock"
install -d -m 0750 -g quadsock /run/quadsock /run/quadsock-admin
log "running $exec_start with capabilities $caps"
(umask 0007 && exec setpriv --inh-caps=-all --bounding-set="-all,$caps" --regid=quadsock \
  --clear-groups --no-new-privs $exec_start) >/tmp/quadsockd.log 2>&1 &
daemon=$!
stop() { kill "$daemon" 2>/dev/null && wait "$daemon" || true; }
trap stop EXIT
for _ in $(seq 100); do
  quadctl health >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || { cat /tmp/quadsockd.log; fail "quadsockd exited"; }
  sleep 0.2
done
quadctl health || { cat /tmp/quadsockd.log; fail "quadsockd does not answer"; }
[[ "$(stat -c %a:%G /run/quadsock/quadsock.sock)" == 660:quadsock ]] ||
  fail "the clients' socket is $(stat -c %a:%G /run/quadsock/quadsock.sock), not 660:quadsock"
setpriv --reuid=nobody --regid=nogroup --groups="$(getent group quadsock | cut -d: -f3)" \
  quadctl health >/dev/null || fail "a member of group quadsock cannot use quadctl"
if setpriv --reuid=nobody --regid=nogroup --clear-groups quadctl --timeout=5s health 2>/dev/null; then
  fail "a user outside group quadsock reached quadsockd"
fi
log "quadctl health answers, for root and group quadsock only"

# The example receives a datagram from a kernel socket on the peer end, sent every half second
# until it comes (one sent before the bind is not delivered).
/tmp/examples/udp_hello 10.9.0.2:4000 --receive=30 >/tmp/hello.log 2>&1 &
hello=$!
/usr/bin/python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.9.0.1", 5000))
for _ in range(80):
    s.sendto(b"hello, installed quadsock", ("10.9.0.2", 4000))
    time.sleep(0.5)' &
sender=$!
wait "$hello" || { cat /tmp/hello.log; fail "udp_hello received nothing"; }
kill "$sender" 2>/dev/null || true
grep -q 'socket .* bound to 10.9.0.2:4000' /tmp/hello.log || { cat /tmp/hello.log; fail "udp_hello's bind line"; }
grep -q '10.9.0.1:5000 -> 10.9.0.2:4000: hello, installed quadsock' /tmp/hello.log ||
  { cat /tmp/hello.log; fail "udp_hello's datagram line"; }
log "the example: $(tr '\n' ' ' </tmp/hello.log)"

# The installed Python package and the pip one as clients.
for python in /usr/bin/python3 /tmp/venv/bin/python; do
  (cd / && "$python" -c '
import quadsock
with quadsock.Client("unix:/run/quadsock/quadsock.sock") as client:
    with client.open("ipv4") as sock:
        print(sock.bind("0.0.0.0:4001"))') || fail "$python: a socket through quadsock"
done
log "passed"
