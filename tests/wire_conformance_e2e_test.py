"""What quadsockd refuses on the wire (root): the real daemon on AF_XDP on a veth pair in private
network namespaces, and scapy on the peer's side sending what no host should: datagrams and
echo requests from martian sources, IPv6 extension headers that RFC 8200 says to discard, a
frame past the MTU, protocols the stack does not speak, and ICMP errors. None may reach a socket
or be answered, but with the protocol unreachables and Parameter Problems the RFCs ask for, and
never with an ICMP error about an ICMP error; each is counted.

Usage (Bazel passes it): wire_conformance_e2e_test.py QUADSOCKD
"""

import json
import os
import subprocess
import sys
import unittest

import e2e
import netns
import quadsock
from e2e import PEER4, PEER6, STACK4, STACK6

# Run by Debian's python3 in the peer's namespace: sends every frame on qs1, then listens until
# it has seen the ICMP errors it expects (or 20 s pass), and prints what the stack sent.
SCAPY = r"""
import json, sys, time
from scapy.all import (AsyncSniffer, Ether, IP, IPv6, UDP, TCP, ICMP, ICMPv6EchoRequest,
                       ICMPv6DestUnreach, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting,
                       IPv6ExtHdrDestOpt, HBHOptUnknown, Raw, sendp)
mac, stack4, stack6, peer4, peer6, kind, expect = sys.argv[1:8]
ours = Ether(dst=mac)
frames = []
if kind == "martians":
    for src in ["10.8.0.2", "255.255.255.255", "10.8.0.255", "10.8.0.0", "224.0.0.1",
                "127.0.0.1", "0.0.0.0"]:
        for port in (4000, 4001, 7):
            frames.append(ours / IP(src=src, dst=stack4) / UDP(sport=5000, dport=port) /
                          b"martian")
        frames.append(ours / IP(src=src, dst=stack4) / ICMP(type=8) / b"ping")
    for src in ["fd00:8::2", "ff02::1", "::1", "::", "::ffff:10.8.0.1"]:
        for port in (4001, 4002, 7):
            frames.append(ours / IPv6(src=src, dst=stack6) / UDP(sport=5000, dport=port) /
                          b"martian")
        frames.append(ours / IPv6(src=src, dst=stack6) / ICMPv6EchoRequest() / b"ping")
elif kind == "protocols":
    # Protocols the stack does not speak, TCP among them: answered.
    frames.append(ours / IP(src=peer4, dst=stack4) / TCP(sport=5000, dport=80, flags="S"))
    frames.append(ours / IP(src=peer4, dst=stack4, proto=253) / Raw(b"protocol"))
    frames.append(ours / IPv6(src=peer6, dst=stack6) / TCP(sport=5000, dport=80, flags="S"))
    frames.append(ours / IPv6(src=peer6, dst=stack6) / IPv6ExtHdrDestOpt(nh=253) /
                  Raw(b"protocol"))
    # ICMP errors about a datagram from a closed port of ours: never answered, not even when an
    # extension header before one asks for a Parameter Problem (an option of type 10).
    frames.append(ours / IP(src=peer4, dst=stack4) / ICMP(type=3, code=3) /
                  IP(src=stack4, dst=peer4) / UDP(sport=4999, dport=53))
    frames.append(ours / IPv6(src=peer6, dst=stack6) / ICMPv6DestUnreach(code=4) /
                  IPv6(src=stack6, dst=peer6) / UDP(sport=4999, dport=53))
    frames.append(ours / IPv6(src=peer6, dst=stack6) /
                  IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x9e, optdata=b"\0\0\0\0")]) /
                  ICMPv6DestUnreach(code=4) / IPv6(src=stack6, dst=peer6) /
                  UDP(sport=4999, dport=53))
else:
    # Extension headers: a hop-by-hop option whose type says "discard and answer" (10), one
    # that says "discard" (01), a type 0 routing header with a segment left, hop-by-hop after
    # another header.
    v6 = ours / IPv6(src=peer6, dst=stack6)
    data = UDP(sport=5000, dport=4002) / b"extension"
    for otype in (0x9e, 0x5e):
        frames.append(v6 / IPv6ExtHdrHopByHop(options=[HBHOptUnknown(otype=otype,
                                                                     optdata=b"\0\0\0\0")])
                      / data)
    frames.append(v6 / IPv6ExtHdrRouting(type=0, segleft=1, addresses=["fd00:8::9"]) / data)
    frames.append(v6 / IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / data)
    # A frame one byte past the MTU (1500): an IPv4 packet of 1501 bytes.
    frames.append(ours / IP(src=peer4, dst=stack4) / UDP(sport=5000, dport=4000) /
                  (b"m" * 1473))
sent_before_last = len(frames)
# Last, from hosts: these arrive, so the test knows the ones before them were seen.
frames.append(ours / IP(src=peer4, dst=stack4) / UDP(sport=5000, dport=4000) / b"last4")
frames.append(ours / IPv6(src=peer6, dst=stack6) / UDP(sport=5000, dport=4002) / b"last6")

got = []  # what the stack sent, as it comes (the sniffer's own results only exist at stop)
sniffer = AsyncSniffer(iface="qs1", filter="ether src " + mac, store=False, prn=got.append)
sniffer.start()
time.sleep(1)  # the sniffer's socket is open once start() has returned; a margin for its filter
sendp(frames, iface="qs1", verbose=False)
deadline = time.monotonic() + 20
def errors():  # Parameter Problems and ICMPv4 destination unreachables
    return [p for p in list(got)
            if (p.haslayer(IPv6) and p[IPv6].nh == 58 and bytes(p[IPv6].payload)[:1] == b"\x04")
            or (p.haslayer(IP) and p[IP].proto == 1 and bytes(p[IP].payload)[:1] == b"\x03")]
while len(errors()) < int(expect) and time.monotonic() < deadline:
    time.sleep(0.1)
time.sleep(0.5)  # anything the stack wrongly sends after them
sniffer.stop()
out = {"sent": sent_before_last, "problems": [], "unreachables": [], "other": []}
for p in got:
    # From the stack's addresses (the kernel on qs0 speaks too: MLD, router solicitations).
    if p.haslayer(IPv6) and p[IPv6].src == stack6:
        body = bytes(p[IPv6].payload)
        if p[IPv6].nh == 58 and body[0] == 4:
            out["problems"].append([body[1], int.from_bytes(body[4:8], "big")])
            continue
        out["other"].append(p.summary())
    elif p.haslayer(IP) and p[IP].src == stack4:
        body = bytes(p[IP].payload)
        if p[IP].proto == 1 and body[0] == 3:
            # Type, code, and the protocol of the packet it quotes.
            out["unreachables"].append([body[0], body[1], body[8 + 9]])
            continue
        out["other"].append(p.summary())
print(json.dumps(out))
"""


class WireConformanceTest(e2e.E2eTestCase):

    def setUp(self):
        self.net = netns.PeerNetwork("qs0", "qs1")
        # The peer's MTU above qs0's 1500, so that it can send a frame past it (veth takes up
        # to the receiver's MTU, its Ethernet header and a VLAN tag).
        self.net.peer_shell("ip addr add %s/24 dev qs1 && ip addr add %s/64 dev qs1 nodad && "
                            "ip link set qs1 mtu 1600" % (PEER4, PEER6))
        self.daemon = e2e.Daemon(["--metrics_listen="])
        self.client = quadsock.Client(self.daemon.target, name="wire")

    def tearDown(self):
        try:
            self.client.close()
            self.daemon.finish()
        finally:
            self.net.close()

    def send_from_peer(self, kind, problems):
        """Runs SCAPY in the peer's namespace: `kind` of frames, then one datagram from a host to
        each of v4 (port 4000) and v6only (port 4002), which must be the first to arrive."""
        mac = json.loads(subprocess.run(["ip", "-j", "link", "show", "qs0"], capture_output=True,
                                        text=True, check=True).stdout)[0]["address"]
        self.v4 = self.client.open("ipv4")
        self.v4.bind("0.0.0.0:4000")
        self.dual = self.client.open("ipv6")
        self.dual.bind("[::]:4001")
        self.v6only = self.client.open("ipv6", v6only=True)
        self.v6only.bind("[::]:4002")
        sent = subprocess.run(
            ["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", SCAPY, mac, STACK4,
             STACK6, PEER4, PEER6, kind, str(problems)],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(sent.returncode, 0, sent.stderr)
        seen = json.loads(sent.stdout.strip().splitlines()[-1])
        # The hosts' datagrams, sent last, arrive; nothing sent before them does.
        firsts = [sock.receive_one(timeout=10) for sock in (self.v4, self.v6only)]
        self.assertEqual([d.payload[:16] if d else None for d in firsts], [b"last4", b"last6"])
        for sock in (self.v4, self.dual, self.v6only):
            self.assertIsNone(sock.receive_one(timeout=0.2))
        self.assertEqual(seen["other"], [], "the stack answered what it must not")
        return seen

    def test_martian_sources_are_dropped_unanswered(self):
        # From our own addresses, broadcasts, our network's address, multicast, loopback, the
        # unspecified addresses and a v4-mapped IPv6 source: datagrams to bound ports (one a
        # v6only socket's) and a closed one, and echo requests. No echo reply, no port
        # unreachable (RFC 1122 3.2.2).
        seen = self.send_from_peer("martians", 0)
        self.assertEqual(seen["problems"], [])
        c = self.client.counters().stack
        self.assertEqual(c.martian_source, seen["sent"])
        self.assertEqual(c.udp_delivered, 2)
        self.assertEqual(c.icmp_echo_replies, 0)
        self.assertEqual(c.icmp_errors_sent, 0)

    def test_extension_headers_to_discard_and_frames_past_the_mtu_are_dropped(self):
        seen = self.send_from_peer("headers", 3)
        # Parameter Problems for the option of type 10 (code 2, at the option's type), the
        # routing header (code 0, at its type) and the late hop-by-hop (code 1, at the Next
        # Header that named it); none for the option of type 01.
        self.assertEqual(sorted(seen["problems"]), [[0, 42], [1, 40], [2, 42]], seen)
        c = self.client.counters().stack
        self.assertEqual(c.rx_too_long, 1)
        self.assertEqual(c.udp_delivered, 2)
        self.assertEqual(c.icmp_errors_sent, 3)
        self.assertEqual(c.parse_errors["ipv6_unrecognized_option"], 2)
        self.assertEqual(c.parse_errors["ipv6_routing_header"], 1)
        self.assertEqual(c.parse_errors["ipv6_hop_by_hop_not_first"], 1)

    def test_unknown_protocols_are_answered_and_errors_never(self):
        # A TCP SYN and IP protocol 253 to us: ICMPv4 protocol unreachable; over IPv6, Parameter
        # Problem code 1 at the Next Header that named the protocol (the fixed header's, offset
        # 6, or a destination options header's, 40). ICMP errors about a closed port of ours
        # get nothing back, and no Parameter Problem for an option before an ICMPv6 error.
        seen = self.send_from_peer("protocols", 4)
        self.assertEqual(sorted(seen["unreachables"]), [[3, 2, 6], [3, 2, 253]], seen)
        self.assertEqual(sorted(seen["problems"]), [[1, 6], [1, 40]], seen)
        c = self.client.counters().stack
        self.assertEqual(c.ip_unknown_protocol, 4)
        self.assertEqual(c.icmp_errors_sent, 4)
        self.assertEqual(c.icmp_errors_rate_limited, 0)
        self.assertEqual(c.icmp_errors_unmatched, 2)
        self.assertEqual(c.parse_errors["ipv6_unrecognized_option"], 1)
        self.assertEqual(c.udp_delivered, 2)


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
