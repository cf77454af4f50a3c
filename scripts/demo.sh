#!/usr/bin/env bash
# quadsock's main job, end to end: sets the machine up, builds quadsockd and the Python client,
# makes two private network namespaces joined by a veth pair, starts quadsockd on one end with
# addresses of its own (IPv4 and IPv6), and drives it over gRPC: 500 sockets connected to 500
# kernel peer sockets, all of them received at once on the session's data channel (one
# StreamChannel stream), datagrams both ways, IPv6, ping and ping -6, a live rehash, and a report
# (datagrams each way, the rate received on the channel, every datagram accounted for, hash4 hit
# ratio, XDP mode, per-queue counters). Then it stops quadsockd with SIGTERM and removes
# everything it made. Run as root:  scripts/demo.sh [--sockets N]
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

sockets=500
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    --sockets) [ $# -ge 2 ] || die "--sockets needs a number"; sockets=$2; shift 2 ;;
    --sockets=*) sockets=${1#--sockets=}; shift ;;
    *) printf 'demo: unknown argument %s (see --help)\n' "$1" >&2; exit 2 ;;
  esac
done
[[ "$sockets" =~ ^[1-9][0-9]*$ ]] || die "--sockets wants a positive number, not '$sockets'"

scripts/setup.sh
say "building quadsockd and the Python client (bazel build -c opt)"
bazel build -c opt //service:quadsockd //clients/python:connected_demo >/tmp/quadsock-demo-build.log 2>&1 \
  || { tail -n 30 /tmp/quadsock-demo-build.log; die "build failed (log: /tmp/quadsock-demo-build.log)"; }
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

ns_stack="qs-demo-stack-$$"
ns_peer="qs-demo-peer-$$"
sock="/tmp/quadsock-demo-$$.sock"
admin_sock="/tmp/quadsock-demo-$$-admin.sock"  # the administration listener (quadctl --admin)
log="/tmp/quadsock-demo-$$.log"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  ip netns del "$ns_stack" 2>/dev/null || true
  ip netns del "$ns_peer" 2>/dev/null || true
  rm -f "$sock" "$admin_sock"
}
trap cleanup EXIT

say "network: $ns_stack (quadsockd, qs0: 10.9.0.2/24 fd00:9::2/64) <-veth-> $ns_peer (kernel, qs1: 10.9.0.1/24 fd00:9::1/64)"
ip netns add "$ns_stack"
ip netns add "$ns_peer"
ip -n "$ns_stack" link add qs0 type veth peer name qs1 netns "$ns_peer"
ip -n "$ns_stack" link set lo up
ip -n "$ns_stack" link set qs0 up
ip -n "$ns_peer" link set lo up
ip -n "$ns_peer" addr add 10.9.0.1/24 dev qs1
ip -n "$ns_peer" addr add fd00:9::1/64 dev qs1 nodad
ip -n "$ns_peer" link set qs1 up
# XDP sees veth frames with the UDP checksum still to do; a NIC would fill it in.
ip netns exec "$ns_peer" ethtool -K qs1 tx off >/dev/null

say "starting quadsockd"
ip netns exec "$ns_stack" "$bin/service/quadsockd" --interface=qs0 \
  --address=10.9.0.2/24,fd00:9::2/64 --listen="unix:$sock" --admin_listen="unix:$admin_sock" \
  >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[ -S "$sock" ] || { cat "$log"; die "quadsockd did not start"; }
sed 's/^/  /' "$log"

say "driving it over gRPC with the Python client ($sockets connected sockets)"
status=0
"$bin/clients/python/connected_demo" --target="unix:$sock" --peer-netns="$ns_peer" \
  --stack=10.9.0.2 --peer=10.9.0.1 --stack6=fd00:9::2 --peer6=fd00:9::1 \
  --sockets="$sockets" || status=$?

say "stopping quadsockd (SIGTERM)"
kill -TERM "$pid"
wait "$pid" && rc=0 || rc=$?
tail -n 2 "$log" | sed 's/^/  /'
pid=""
[ "$rc" -eq 0 ] || { echo "quadsockd exited with $rc"; status=1; }
# `ip` itself must answer: a failed `ip` would otherwise read as "no program left".
if ! links=$(ip -n "$ns_stack" -d link show qs0); then
  echo "ip could not show qs0: cannot tell whether an XDP program was left"; status=1
elif grep -q 'prog/xdp' <<<"$links"; then
  echo "an XDP program was left on qs0"; status=1
else
  echo "  no XDP program left on qs0"
fi
say "cleaning up: namespaces, veth pair and socket removed"
exit "$status"
