#!/bin/bash
# docker/smoke.sh: quadsockd's container against a kernel peer (root, from the repository root).
# Builds the image (docker/build.sh), makes two network namespaces joined by a veth pair, runs
# the container in one of them with only the capabilities quadsockd needs, and from the other
# pings quadsock's address and sends it a datagram that quadctl (outside, through the
# container's control socket) receives. Cleans up and exits non-zero if anything fails.
#
#   sudo docker/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) echo "docker/smoke.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
export CONTAINERS_CONF="$PWD/docker/containers.conf"

NODE=qsc-node-$$ PEER=qsc-peer-$$ NAME=quadsockd-smoke-$$
STACK=10.77.0.2 PEER_IP=10.77.0.1
# What quadsockd needs, and nothing else: load and attach XDP (NET_ADMIN, BPF, PERFMON for the
# program's helpers), open AF_XDP sockets (NET_RAW), pin the UMEM past RLIMIT_MEMLOCK (IPC_LOCK).
CAPS=NET_ADMIN,NET_RAW,BPF,PERFMON,IPC_LOCK
sock_dir=$(mktemp -d /tmp/qsc.XXXXXX)
log() { echo "[docker/smoke] $*" >&2; }

cleanup() {
  podman rm -f "$NAME" >/dev/null 2>&1 || true
  ip netns del "$NODE" 2>/dev/null || true
  ip netns del "$PEER" 2>/dev/null || true
  rm -rf "$sock_dir"
}
trap cleanup EXIT

docker/build.sh
quadctl="$(bazel info -c opt bazel-bin 2>/dev/null)/clients/quadctl/quadctl"

ip netns add "$NODE"
ip netns add "$PEER"
ip link add qsc0 netns "$NODE" type veth peer name qsc1 netns "$PEER"
ip -n "$NODE" link set qsc0 up
ip -n "$PEER" link set qsc1 up
ip -n "$PEER" addr add "$PEER_IP/24" dev qsc1
# veth hands kernel-sent frames to XDP with the checksum still to fill in: have the peer fill it.
ip netns exec "$PEER" ethtool -K qsc1 tx off >/dev/null

# The runtime's default seccomp profile, but bpf(2) allowed with CAP_BPF (not CAP_SYS_ADMIN).
docker/seccomp_with_bpf.py /usr/share/containers/seccomp.json > "$sock_dir/seccomp.json"

# As docker/kubernetes/quadsockd.yaml runs it: a read-only root, the node's flags from a file
# in a read-only /etc/quadsock, the control socket in a mounted /run/quadsock.
mkdir "$sock_dir/etc" "$sock_dir/run" "$sock_dir/admin"
printf -- '--interface=qsc0\n--address=%s/24\n' "$STACK" > "$sock_dir/etc/quadsockd.flags"
log "running localhost/quadsockd:latest in $NODE with --cap-drop=all --cap-add=$CAPS"
podman run -d --name "$NAME" --network "ns:/run/netns/$NODE" --cap-drop=all --cap-add="$CAPS" \
  --security-opt seccomp="$sock_dir/seccomp.json" --security-opt no-new-privileges --read-only \
  -v "$sock_dir/etc:/etc/quadsock:ro" -v "$sock_dir/run:/run/quadsock" \
  -v "$sock_dir/admin:/run/quadsock-admin" \
  localhost/quadsockd:latest --flagfile=/etc/quadsock/quadsockd.flags \
  --listen=unix:/run/quadsock/quadsock.sock --metrics_listen=127.0.0.1:9464 >/dev/null

target="unix:$sock_dir/run/quadsock.sock"
for _ in $(seq 50); do
  [[ -S "$sock_dir/run/quadsock.sock" ]] && "$quadctl" --target="$target" health >/dev/null 2>&1 && break
  sleep 0.2
done
if ! "$quadctl" --target="$target" health; then
  log "quadsockd did not come up; its log:"
  podman logs "$NAME" >&2
  exit 1
fi

# The Kubernetes manifest's liveness probe, run as the kubelet would: inside the container.
probe=$(/usr/bin/python3 -c '
import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet"][0]
print(" ".join(ds["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"]))
' docker/kubernetes/quadsockd.yaml)
podman exec "$NAME" $probe >/dev/null || { log "the manifest's probe failed: $probe"; exit 1; }
log "the Kubernetes manifest's probe answers inside the container: $probe"

# The administration socket, in its own mounted folder, owner-only.
admin="$sock_dir/admin/admin.sock"
[[ "$(stat -c %a "$admin")" == 600 ]] || { log "$admin is not mode 0600"; exit 1; }
"$quadctl" --admin --target="unix:$admin" neigh list >/dev/null ||
  { log "quadctl --admin on $admin failed"; exit 1; }
log "the administration socket answers without a session, mode 0600"

ip netns exec "$PEER" ping -c 3 -i 0.2 -W 2 "$STACK" >/dev/null
log "ping from the peer answered"

export QUADSOCK_TARGET="$target"
export QUADSOCK_SESSION=$("$quadctl" session new --lease=60)
s=$("$quadctl" open --family=4)
"$quadctl" bind "$s" 0.0.0.0:4000 >/dev/null
ip netns exec "$PEER" /usr/bin/python3 -c "
import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('$PEER_IP', 5000)); s.sendto(b'hello, container', ('$STACK', 4000))"
line=$("$quadctl" recv "$s" --wait=5s)
[[ "$line" == *"hello, container"* ]] || { log "unexpected: $line"; exit 1; }
log "UDP from the peer received: $line"
"$quadctl" session end >/dev/null

podman stop -t 5 "$NAME" >/dev/null
# quadsockd drains and exits 0 on SIGTERM; anything else (a crash, podman's SIGKILL after the
# grace period: 137) is a failure.
rc=$(podman inspect --format '{{.State.ExitCode}}' "$NAME")
if [[ "$rc" != 0 ]]; then
  log "quadsockd exited with $rc on SIGTERM; its log:"
  podman logs "$NAME" >&2
  exit 1
fi
log "quadsockd exited with 0 on SIGTERM"
# `ip` itself must answer: a failed `ip` would otherwise read as "no program left".
links=$(ip -n "$NODE" -d link show qsc0) || { log "ip could not show qsc0"; exit 1; }
if grep -q 'prog/xdp' <<<"$links"; then
  log "an XDP program was left on qsc0 after the container stopped"
  exit 1
fi
log "passed"
