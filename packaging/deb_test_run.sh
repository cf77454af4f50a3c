#!/bin/bash
# packaging/deb_test_run.sh: deb_test.sh's second step, in deb_test_install.sh's container
# committed and booted with systemd (root, privileged, the tree read-only at /src): starts
# quadsock@qsd0 on a veth pair and uses it with quadctl, the example and the Python package, as
# root, as a member of group quadsock and as a user outside it; then stops it. Not for use on a
# real machine: it makes a veth pair and starts quadsockd.
. "$(dirname "$0")/deb_test_lib.sh"
# quadsock@qsd0 under systemd, on a veth pair whose other end holds the kernel's address. With
# no udev here, the device unit the unit binds to never appears: a copy without that binding
# (in /etc/systemd/system, which overrides /lib/systemd/system) is started instead.
ip link add qsd0 type veth peer name qsp0
ip link set qsd0 up
ip link set qsp0 up
ip addr add 10.9.0.1/24 dev qsp0
ethtool -K qsp0 tx off >/dev/null  # veth leaves the kernel's UDP checksums to offload
sed 's|^--address=.*|--address=10.9.0.2/24|' /etc/quadsock/example.flags >/etc/quadsock/qsd0.flags
grep -q sys-subsystem-net-devices-%i.device /lib/systemd/system/quadsock@.service ||
  fail "the unit does not bind to its interface's device"
sed '/sys-subsystem-net-devices/d' /lib/systemd/system/quadsock@.service \
  >/etc/systemd/system/quadsock@.service
systemctl daemon-reload
journal() { journalctl -u quadsock@qsd0 --no-pager | tail -n 30; }
timeout 60 systemctl start quadsock@qsd0 || { journal; fail "systemctl start quadsock@qsd0"; }
wait_health() {
  for _ in $(seq 100); do
    quadctl health >/dev/null 2>&1 && break
    systemctl -q is-active quadsock@qsd0 || { journal; fail "quadsock@qsd0 stopped"; }
    sleep 0.2
  done
  quadctl health || { journal; fail "quadsockd does not answer"; }
}
wait_health
# NET_ADMIN (12), NET_RAW (13), IPC_LOCK (14), PERFMON (38) and BPF (39), and no others.
pid=$(systemctl show -p MainPID --value quadsock@qsd0)
caps=$(awk '/^CapEff/ {print $2}' "/proc/$pid/status")
[[ "$caps" == 000000c000007000 ]] || fail "quadsockd's effective capabilities are $caps"
[[ "$(stat -c %a:%G /run/quadsock/quadsock.sock)" == 660:quadsock ]] ||
  fail "the clients' socket is $(stat -c %a:%G /run/quadsock/quadsock.sock), not 660:quadsock"
setpriv --reuid=nobody --regid=nogroup --groups="$(getent group quadsock | cut -d: -f3)" \
  quadctl health >/dev/null || fail "a member of group quadsock cannot use quadctl"
if out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups quadctl --timeout=5s health 2>&1); then
  fail "a user outside group quadsock reached quadsockd"
fi
# Refused for the socket's permissions, not for any other failure (quadsockd gone, no quadctl).
grep -q "Permission denied" <<<"$out" || fail "a user outside group quadsock failed otherwise: $out"
log "quadsock@qsd0 runs with capabilities $caps; quadctl answers root and group quadsock only"

# The example receives a datagram from a kernel socket on the peer end, sent every half second
# until it comes (one sent before the bind is not delivered).
"$test/examples/udp_hello" 10.9.0.2:4000 --receive=30 >/tmp/hello.log 2>&1 &
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
for python in /usr/bin/python3 "$test/venv/bin/python"; do
  (cd / && "$python" -c '
import quadsock
with quadsock.Client("unix:/run/quadsock/quadsock.sock") as client:
    with client.open("ipv4") as sock:
        print(sock.bind("0.0.0.0:4001"))') || fail "$python: a socket through quadsock"
done
# A restart finds its runtime folders kept (RuntimeDirectoryPreserve) with the last run's sockets.
timeout 60 systemctl restart quadsock@qsd0 || { journal; fail "systemctl restart quadsock@qsd0"; }
wait_health
timeout 60 systemctl stop quadsock@qsd0 || fail "systemctl stop quadsock@qsd0"
result=$(systemctl show -p Result --value quadsock@qsd0)
[[ "$result" == success ]] || { journal; fail "quadsock@qsd0 stopped with $result"; }
links=$(ip -d link show qsd0) || fail "ip could not show qsd0"
if grep -q 'prog/xdp' <<<"$links"; then fail "an XDP program was left on qsd0"; fi
log "quadsock@qsd0 stopped cleanly, no XDP program left"

# Purged, the package leaves nothing behind: its files, the Python modules compiled at install
# (the prerm's py3clean), its conffile.
apt-get purge -y -q quadsock >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get purge quadsock"; }
for path in /usr/sbin/quadsockd /usr/lib/python3/dist-packages/quadsock /usr/include/quadsock \
  /etc/quadsock/example.flags; do
  [[ ! -e "$path" ]] || fail "$path is left after apt-get purge quadsock"
done
log "apt-get purge quadsock left nothing behind"
