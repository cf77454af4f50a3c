"""IP fragments on the wire against the real daemon (root): quadsockd on AF_XDP on a veth pair
in private network namespaces, and scapy on the peer's side sending fragment sets crafted the
way an attacker or a broken path would: out of order, duplicated, overlapping (IPv4, IPv6), a
tiny first fragment, an oversized total, a datagram whose rest never comes, and a flood of
first fragments from many sources with a live fragmented flow between them. Each ends under its
own counter; the good datagrams arrive whole, the bad ones never; the incomplete one is answered
with ICMP time exceeded after 30 s; reassembly's memory stays under --reassembly_kib.

Usage (Bazel passes it): fragments_e2e_test.py QUADSOCKD
"""

import json
import os
import subprocess
import sys
import unittest

import e2e
import quadsock
from e2e import PEER4, PEER6, STACK4, STACK6

# Run by Debian's python3 in the peer's namespace. Prints one JSON line: what it saw.
SCAPY = r"""
import json, sys, time
from scapy.all import (AsyncSniffer, Ether, IP, IPv6, IPv6ExtHdrFragment, UDP, ICMP, Raw,
                       fragment, fragment6, sendp)
mac, stack4, stack6, peer4, peer6, kind = sys.argv[1:7]
ours = Ether(dst=mac)

def whole4(ident, dport, payload, src=peer4):
    # The datagram built whole first, so that its UDP checksum covers every fragment.
    return IP(bytes(IP(src=src, dst=stack4, id=ident) / UDP(sport=5000, dport=dport) / payload))

def whole6(ident, dport, payload):
    return IPv6(bytes(IPv6(src=peer6, dst=stack6) / IPv6ExtHdrFragment(id=ident) /
                      UDP(sport=5000, dport=dport) / payload))

def piece4(ident, offset, data, more, src=peer4):
    return ours / IP(src=src, dst=stack4, id=ident, proto=17, flags="MF" if more else 0,
                     frag=offset // 8) / Raw(data)

def piece6(ident, offset, data, more):
    return ours / IPv6(src=peer6, dst=stack6) / IPv6ExtHdrFragment(
        nh=17, id=ident, offset=offset // 8, m=1 if more else 0) / Raw(data)

frames = []
seen = {"time_exceeded": []}
if kind == "sets":
    # Out of order with a duplicate (IPv4), and backwards (IPv6): these arrive whole.
    f = fragment(whole4(101, 4000, b"ooo4" + b"a" * 2996), fragsize=1480)
    frames += [ours / f[2], ours / f[0], ours / f[0], ours / f[1]]
    f = fragment6(whole6(102, 4001, b"ooo6" + b"b" * 2996), 1280)
    frames += [ours / p for p in reversed(f)]
    # Overlapping: the second piece starts 8 bytes inside the first; then the right piece,
    # which must not revive the datagram (RFC 5722).
    udp = bytes(UDP(sport=5000, dport=4000) / (b"overlap4" + b"c" * 1992))
    frames += [piece4(103, 0, udp[:1480], True), piece4(103, 1472, udp[1472:], False),
               piece4(103, 1480, udp[1480:], False)]
    udp = bytes(UDP(sport=5000, dport=4001) / (b"overlap6" + b"d" * 1992))
    frames += [piece6(104, 0, udp[:1232], True), piece6(104, 1224, udp[1224:], False)]
    # A first fragment without the whole UDP header, then the rest.
    udp = bytes(UDP(sport=5000, dport=4000) / b"tiny4tiny4tiny4")
    frames += [piece4(105, 0, udp[:3], True), piece4(105, 8, udp[8:], False)]
    # Past 65,535 bytes of packet.
    frames += [piece4(106, 65512, b"x" * 40, False)]
    # The first fragment of a datagram whose rest never comes.
    f = fragment(whole4(107, 4000, b"never4" + b"e" * 2994), fragsize=1480)
    frames += [ours / f[0]]
    wait_for = 45
elif kind == "flood":
    # First fragments from 20,000 sources, and between them a live flow from the peer: each
    # of its 100 datagrams' fragments 40 flood frames apart.
    live = [fragment(whole4(1000 + i, 4000, b"live%03d" % i + b"f" * 2993), fragsize=1480)
            for i in range(100)]
    flood = (piece4(7, 0, b"\x13\x88\x0f\xa0" + b"\0" * 1476, True,
                    src="10.%d.%d.%d" % (20 + n // 65000, n // 250 % 250, n % 250 + 1))
             for n in range(20000))
    for i in range(100):
        for piece in live[i]:
            frames.append(ours / piece)
            frames += [next(flood) for _ in range(40)]
    frames += list(flood)
    wait_for = 0
frames.append(ours / IP(src=peer4, dst=stack4) / UDP(sport=5000, dport=4000) / b"last4")
frames.append(ours / IPv6(src=peer6, dst=stack6) / UDP(sport=5000, dport=4001) / b"last6")

def note(p):
    if p.haslayer(ICMP) and p[ICMP].type == 11:
        seen["time_exceeded"].append([p[ICMP].code, p[IP].src, p[IP].dst,
                                      p[ICMP].payload.id if p[ICMP].payload else None])
sniffer = AsyncSniffer(iface="qs1", filter="ether src " + mac + " and icmp", store=False,
                       prn=note)
sniffer.start()
time.sleep(1)  # the sniffer's socket is open once start() has returned; a margin for its filter
sendp(frames, iface="qs1", verbose=False)
seen["sent"] = len(frames)
deadline = time.monotonic() + wait_for
while not seen["time_exceeded"] and time.monotonic() < deadline:
    time.sleep(0.2)
sniffer.stop()
print(json.dumps(seen))
"""


class FragmentsTest(e2e.E2eTestCase):

    def setUp(self):
        self.net = e2e.peer_network()
        self.daemon = e2e.Daemon(["--reassembly_kib=256"])
        self.client = quadsock.Client(self.daemon.target, name="fragments")

    def tearDown(self):
        try:
            self.client.close()
            self.daemon.finish()
        finally:
            self.net.close()

    def send_from_peer(self, kind):
        mac = json.loads(subprocess.run(["ip", "-j", "link", "show", "qs0"], capture_output=True,
                                        text=True, check=True).stdout)[0]["address"]
        self.v4 = self.client.open("ipv4")
        self.v4.bind("0.0.0.0:4000")
        self.v6 = self.client.open("ipv6", v6only=True)
        self.v6.bind("[::]:4001")
        sent = subprocess.run(
            ["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", SCAPY, mac, STACK4,
             STACK6, PEER4, PEER6, kind],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(sent.returncode, 0, sent.stderr)
        return json.loads(sent.stdout.strip().splitlines()[-1])

    def received(self, sock):
        """Every datagram `sock` holds: up to the host's last one, sent after the rest."""
        got = []
        while True:
            d = sock.receive_one(timeout=10)
            self.assertIsNotNone(d, "the last datagram never came; got %s" % got)
            if d.payload.startswith(b"last"):
                return got
            got.append(d.payload)

    def test_each_fragment_set_ends_under_its_name(self):
        seen = self.send_from_peer("sets")
        self.assertEqual(self.received(self.v4), [b"ooo4" + b"a" * 2996])
        self.assertEqual(self.received(self.v6), [b"ooo6" + b"b" * 2996])
        c = self.client.counters().stack
        self.assertEqual(c.reassembled, 2)
        self.assertEqual(c.reassembly_duplicate, 1)
        self.assertEqual(c.reassembly_overlap, 2)  # one IPv4, one IPv6
        self.assertEqual(c.reassembly_tiny, 1)
        self.assertEqual(c.reassembly_too_big, 1)
        self.assertEqual(c.fragments, seen["sent"] - 2)
        self.assertEqual(c.udp_delivered, 4)
        # 30 s after its first fragment, the incomplete datagram is answered: time exceeded,
        # "fragment reassembly time exceeded", quoting that fragment (its IP id, 107). (The
        # tiny set's second piece, and the retry after the IPv4 overlap, which no first
        # fragment completes, time out unanswered.)
        self.assertEqual(seen["time_exceeded"], [[1, STACK4, PEER4, 107]], seen)
        c = self.client.counters().stack
        self.assertEqual(c.reassembly_timed_out, 3)
        self.assertEqual(c.reassembly_held_bytes, 0)

    def test_a_flood_of_first_fragments_stays_in_the_budget_and_the_live_flow_gets_through(self):
        self.send_from_peer("flood")
        live = self.received(self.v4)
        self.assertEqual([p[:7] for p in live], [b"live%03d" % i for i in range(100)])
        c = self.client.counters().stack
        self.assertEqual(c.reassembled, 100)
        self.assertGreater(c.reassembly_evicted, 19000)
        self.assertLessEqual(c.reassembly_held_bytes, 256 << 10)
        self.assertGreater(c.reassembly_held_bytes, 128 << 10)  # full, not emptied


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
