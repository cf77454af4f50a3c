#!/usr/bin/env bash
# quadsock's main job, as far as it is built: sets the machine up, builds, makes two private
# network namespaces joined by a veth pair, attaches quadsock's XDP program to one end, sends
# real kernel traffic across (ARP, NDP, ping, ping -6, UDP over IPv4 and IPv6), captures every
# frame that arrived and shows what quadsock's parser makes of each. Cleans up everything it
# made. Run as root:  scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

scripts/setup.sh
say "building quadsock (bazel build //stack/net:frame_tool //stack/xdp:pass.bpf.o)"
bazel build -c opt //stack/net:frame_tool //stack/xdp:pass.bpf.o 2>&1 | grep -E '^(ERROR|FAILED)' && die "build failed"
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
frame_tool="$bin/stack/net/frame_tool"
program="$bin/stack/xdp/pass.bpf.o"

ns_a="qs-demo-a-$$"
ns_b="qs-demo-b-$$"
work=$(mktemp -d /tmp/quadsock-demo.XXXXXX)
cleanup() {
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say "network: namespaces $ns_a and $ns_b, veth qs-a <-> qs-b, 10.99.0.0/24 and fd00:99::/64"
ip netns add "$ns_a"
ip netns add "$ns_b"
ip -n "$ns_a" link add qs-a type veth peer name qs-b netns "$ns_b"
ip -n "$ns_a" addr add 10.99.0.1/24 dev qs-a
ip -n "$ns_a" addr add fd00:99::1/64 dev qs-a nodad
ip -n "$ns_b" addr add 10.99.0.2/24 dev qs-b
ip -n "$ns_b" addr add fd00:99::2/64 dev qs-b nodad
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set qs-a up
# A veth hands frames over with the checksum still to be done (CHECKSUM_PARTIAL), and XDP sees
# them that way; a real NIC would have filled it in. Make the sending kernel compute it.
ip netns exec "$ns_a" ethtool -K qs-a tx off >/dev/null
ip -n "$ns_b" link set qs-b up
ip -n "$ns_b" link set dev qs-b xdp obj "$program" sec xdp
echo "attached quadsock's XDP program to qs-b:"
ip -n "$ns_b" -d link show qs-b | grep -oE 'prog/xdp id [0-9]+( name [a-z_]+)?' | sed 's/^/  /'

say "traffic from $ns_a to $ns_b (captured on qs-b, behind the XDP program)"
ip netns exec "$ns_b" scripts/capture_frames.py --interface qs-b --seconds 8 --count 200 \
  --ready "$work/ready" >"$work/frames.hex" &
capture=$!
for _ in $(seq 50); do [ -e "$work/ready" ] && break; sleep 0.1; done
ip netns exec "$ns_a" ping -c 3 -i 0.2 -W 2 10.99.0.2 | tail -n 2
ip netns exec "$ns_a" ping -6 -c 3 -i 0.2 -W 2 fd00:99::2 | tail -n 2
for i in 1 2 3; do
  echo "hello over IPv4 #$i" | ip netns exec "$ns_a" socat -u - UDP4-SENDTO:10.99.0.2:4000
  echo "hello over IPv6 #$i" | ip netns exec "$ns_a" socat -u - UDP6-SENDTO:[fd00:99::2]:4000
done
sleep 0.5
kill "$capture" 2>/dev/null || true
wait "$capture" 2>/dev/null || true

count=$(wc -l <"$work/frames.hex")
[ "$count" -gt 0 ] || die "no frames arrived on qs-b"
say "what quadsock's parser makes of the $count frames that arrived"
"$frame_tool" parse <"$work/frames.hex" >"$work/parsed.txt"
/usr/bin/python3 - "$work/parsed.txt" <<'PY'
import collections, sys
kinds = collections.Counter()
bad = 0
examples = {}
for line in open(sys.argv[1]):
    f = dict(w.split("=", 1) for w in line.split())
    if f["error"] != "ok":
        bad += 1
        kinds["malformed: " + f["error"]] += 1
        continue
    if f["l3"] == "arp":
        kind = "ARP %s" % ("request" if f["arp_op"] == "1" else "reply")
        detail = "who has %s? tell %s" % (f["arp_tpa"], f["arp_spa"])
    elif f["l3"] in ("ipv4", "ipv6"):
        l4 = f["l4"]
        if l4 == "udp":
            kind = "UDP over %s" % f["l3"]
            detail = "%s:%s -> %s:%s %r" % (f["src"], f["sport"], f["dst"], f["dport"],
                                          bytes.fromhex(f["payload"]).decode(errors="replace"))
        elif l4 in ("icmp", "icmpv6"):
            names = {"8": "echo request", "0": "echo reply", "128": "echo request",
                     "129": "echo reply", "135": "neighbour solicitation",
                     "136": "neighbour advertisement", "133": "router solicitation",
                     "143": "MLDv2 report"}
            kind = "%s %s" % (l4.upper(), names.get(f["icmp_type"], "type " + f["icmp_type"]))
            detail = "%s -> %s" % (f["src"], f["dst"])
            if "ndp_target" in f:
                detail += " target %s" % f["ndp_target"]
        else:
            kind, detail = "%s, protocol %s" % (f["l3"], f["proto"]), ""
    else:
        kind, detail = "ethertype %s" % f["ethertype"], ""
    kinds[kind] += 1
    examples.setdefault(kind, detail)
for kind, n in sorted(kinds.items()):
    print("  %3d x %-34s %s" % (n, kind, examples.get(kind, "")))
print("\n  %d frames, %d parsed, %d malformed" % (sum(kinds.values()), sum(kinds.values()) - bad, bad))
PY

say "done: the kernel answered ping and ping -6 through quadsock's XDP program; namespaces removed"
