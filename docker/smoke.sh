#!/bin/bash
# docker/smoke.sh: quadsockd's container against a kernel peer (root, from the repository root).
# Builds the image (docker/build.sh), makes two network namespaces joined by a veth pair, runs
# the container in one of them with only the capabilities quadsockd needs, and from the other
# pings quadsock's address and sends it a datagram that quadctl (outside, through the
# container's control socket) receives. Then an application container (the same image, no
# network, no capabilities, not root), sharing only the socket folder, attaches the session's
# data channel over shared memory and answers the peer's datagrams through it. Cleans up and
# exits non-zero if anything fails.
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

NODE=qsc-node-$$ PEER=qsc-peer-$$ NAME=quadsockd-smoke-$$ APP=quadsock-app-smoke-$$
STACK=10.77.0.2 PEER_IP=10.77.0.1
# What quadsockd needs, and nothing else: load and attach XDP (NET_ADMIN, BPF, PERFMON for the
# program's helpers), open AF_XDP sockets (NET_RAW), pin the UMEM past RLIMIT_MEMLOCK (IPC_LOCK).
CAPS=NET_ADMIN,NET_RAW,BPF,PERFMON,IPC_LOCK
# The application container's user, and the group that may use quadsockd's sockets (neither
# needs to exist on the host).
APP_USER=1000 CLIENT_GID=2077
sock_dir=$(mktemp -d /tmp/qsc.XXXXXX)
log() { echo "[docker/smoke] $*" >&2; }

cleanup() {
  podman rm -f "$APP" >/dev/null 2>&1 || true
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
# The clients' folder is setgid to their group: the sockets quadsockd makes there (mode 0660)
# take that group, so an application container needs the group, not root (docker/README.md).
chgrp "$CLIENT_GID" "$sock_dir/run"
chmod 2750 "$sock_dir/run"
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

# quadsock-run and its library in the image, with every library it needs there.
podman run --rm --network none --entrypoint quadsock-run localhost/quadsockd:latest --help |
  grep -q QUADSOCK_TARGET || { log "quadsock-run --help in the image names no QUADSOCK_TARGET"; exit 1; }
missing=$(podman run --rm --network none --entrypoint /usr/bin/ldd localhost/quadsockd:latest \
  /usr/local/lib/quadsock/libquadsock_preload.so | grep 'not found' || true)
[[ -z "$missing" ]] || { log "the preload library lacks in the image: $missing"; exit 1; }
log "quadsock-run and libquadsock_preload.so are in the image, with their libraries"

# An application container: the same image running quadctl as the application, with no network
# and no capabilities, as a user in the sockets' group, sharing only /run/quadsock (mounted where
# quadsockd has it: AttachChannel names the side socket by quadsockd's path). It opens a socket
# of its own, attaches over shared memory and answers every datagram through the channel.
for f in quadsock.sock quadsock.sock.channel; do
  [[ "$(stat -c %a:%g "$sock_dir/run/$f")" == "660:$CLIENT_GID" ]] ||
    { log "$f is $(stat -c %a:%g "$sock_dir/run/$f"), not 660:$CLIENT_GID"; exit 1; }
done
log "an application container (uid $APP_USER, group $CLIENT_GID, no network) attaches"
podman run -d --name "$APP" --network none --cap-drop=all --user "$APP_USER:$CLIENT_GID" \
  --security-opt no-new-privileges --read-only -v "$sock_dir/run:/run/quadsock" \
  --entrypoint /bin/sh localhost/quadsockd:latest -c '
    set -e
    export QUADSOCK_SESSION=$(quadctl session new --lease=60)
    s=$(quadctl open --family=4)
    quadctl bind "$s" 0.0.0.0:4001 >/dev/null
    exec quadctl watch --shm --echo --count=3 --wait=60s' >/dev/null
attached=
for _ in $(seq 100); do
  grep -q 'attached the data channel over shared memory' <(podman logs "$APP" 2>&1) &&
    { attached=1; break; }
  [[ "$(podman inspect --format '{{.State.Running}}' "$APP")" == true ]] || break
  sleep 0.2
done
if [[ -z "$attached" ]]; then
  log "the application container did not attach; its log, then quadsockd's:"
  podman logs "$APP" >&2
  podman logs "$NAME" >&2
  exit 1
fi
# Three datagrams from a kernel socket in the peer, each answered before the next goes. A
# datagram that came before the socket was on the channel waits in the socket's queue
# unanswered: sent again after 2 s, 5 times at most.
ip netns exec "$PEER" /usr/bin/python3 -c "
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('$PEER_IP', 5001))
s.settimeout(2)
for i in range(3):
    msg = b'ping %d over shared memory' % i
    for _ in range(5):
        s.sendto(msg, ('$STACK', 4001))
        try:
            while True:  # an answer to an earlier ping sent twice: skip it
                data, src = s.recvfrom(2048)
                if data == msg:
                    break
        except socket.timeout:
            continue
        if src != ('$STACK', 4001):
            sys.exit('answer to %r from %s:%d' % (msg, *src))
        break
    else:
        sys.exit('no answer to %r' % msg)
" || { log "the peer's datagrams were not answered; the application's log:"; podman logs "$APP" >&2; exit 1; }
rc=$(podman wait "$APP")
out=$(podman logs "$APP" 2>&1)
if [[ "$rc" != 0 ]] || (( $(grep -c "$PEER_IP:5001 -> $STACK:4001 .* bytes: ping [0-2] over shared memory" <<<"$out") != 3 )); then
  log "the application container exited with $rc; its log:"
  echo "$out" >&2
  exit 1
fi
log "the application container received 3 datagrams over shared memory and answered each:"
grep ' bytes: ping' <<<"$out" | sed 's/^/    /' >&2
podman rm "$APP" >/dev/null
# quadsockd's word that the channel went by SCM_RIGHTS to the application's user.
line=$(grep -o "data channel attached by pid [0-9]* (uid $APP_USER).*" <(podman logs "$NAME" 2>&1)) ||
  { log "quadsockd did not log the channel attached by uid $APP_USER"; exit 1; }
log "quadsockd: $line"
# The same container as a user outside the sockets' group: refused.
if out=$(podman run --rm --network none --cap-drop=all --user "$APP_USER:$APP_USER" \
  --security-opt no-new-privileges --read-only -v "$sock_dir/run:/run/quadsock" \
  --entrypoint /usr/local/bin/quadctl localhost/quadsockd:latest --timeout=5s health 2>&1); then
  log "a container outside group $CLIENT_GID reached quadsockd: $out"
  exit 1
fi
# Refused for the socket's permissions, not for any other failure (a container that did not
# start, a missing quadctl, quadsockd gone).
grep -q "Permission denied" <<<"$out" ||
  { log "a container outside group $CLIENT_GID failed, but not for permission: $out"; exit 1; }
log "a container outside group $CLIENT_GID is refused: $out"

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
