"""Cross-checks quadsock's frame parser and builders against scapy, an independent dissector.

Thousands of varied frames are made with scapy (UDP over IPv4/IPv6 with VLAN tags, IPv4 options
and IPv6 extension headers, ICMP and ICMPv6 echo, ICMP errors quoting a UDP datagram, NDP, ARP,
broken checksums and truncations);
`frame_tool parse` must agree with scapy field by field, and refuse the options and extension
headers a destination must discard. Then frames built by `frame_tool build`
must dissect in scapy to the fields asked for, with checksums that scapy recomputes the same.

Runs on Debian's /usr/bin/python3 (python3-scapy). Usage: scapy_crosscheck_test.py FRAME_TOOL
"""

import random
import subprocess
import sys
import unittest

import logging

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import (ARP, ICMP, IP, IPOption_LSRR, IPOption_NOP,  # noqa: E402
                       IPOption_SSRR, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrRouting,
                       HBHOptUnknown, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, UDP, Dot1Q, Ether,
                       ICMPv6DestUnreach, ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA,
                       ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr,
                       ICMPv6PacketTooBig, ICMPv6ParamProblem, ICMPv6TimeExceeded, raw)

FRAME_TOOL = None
RNG = random.Random(20261130)
COUNT = 3000


def run_tool(mode, lines):
    out = subprocess.run([FRAME_TOOL, mode], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(out) == len(lines), (len(out), len(lines))
    return out


def fields(line):
    return dict(word.split("=", 1) for word in line.split())


def rand_v4():
    return "10.%d.%d.%d" % (RNG.randrange(256), RNG.randrange(256), RNG.randrange(1, 255))


def rand_v6():
    return "fd00:%x::%x:%x" % (RNG.randrange(1, 65536), RNG.randrange(65536),
                               RNG.randrange(1, 65536))


def rand_mac():
    return "02:%02x:%02x:%02x:%02x:%02x" % tuple(RNG.randrange(256) for _ in range(5))


def rand_payload(limit=400):
    return bytes(RNG.randrange(256) for _ in range(RNG.randrange(limit)))


def link():
    eth = Ether(src=rand_mac(), dst=rand_mac())
    if RNG.random() < 0.25:
        eth = eth / Dot1Q(vlan=RNG.randrange(1, 4095), prio=RNG.randrange(8))
    return eth


def random_frame():
    """A scapy packet of a random kind, and what it is (for the expected verdict)."""
    kind = RNG.choice(["udp4", "udp4opt", "udp6", "udp6ext", "icmp4", "icmp6", "ns", "na",
                       "arp", "frag4", "frag6", "icmp4err", "icmp6err"])
    if kind in ("udp4", "udp4opt", "frag4"):
        ip = IP(src=rand_v4(), dst=rand_v4(), ttl=RNG.randrange(1, 256), id=RNG.randrange(65536))
        if kind == "udp4opt":
            ip.options = [IPOption_NOP()] * (4 * RNG.randrange(1, 5))
        if kind == "frag4":
            ip.flags = "MF"
        pkt = link() / ip / UDP(sport=RNG.randrange(65536), dport=RNG.randrange(65536)) / \
            rand_payload()
    elif kind in ("udp6", "udp6ext", "frag6"):
        ip = IPv6(src=rand_v6(), dst=rand_v6(), hlim=RNG.randrange(1, 256))
        if kind == "udp6ext":
            ip = ip / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt()
        if kind == "frag6":
            ip = ip / IPv6ExtHdrFragment(m=1, id=RNG.randrange(1 << 32))
        pkt = link() / ip / UDP(sport=RNG.randrange(65536), dport=RNG.randrange(65536)) / \
            rand_payload()
    elif kind == "icmp4":
        pkt = link() / IP(src=rand_v4(), dst=rand_v4()) / \
            ICMP(type=RNG.choice([0, 8]), id=RNG.randrange(65536), seq=RNG.randrange(65536)) / \
            rand_payload(100)
    elif kind == "icmp6":
        echo = RNG.choice([ICMPv6EchoRequest, ICMPv6EchoReply])
        pkt = link() / IPv6(src=rand_v6(), dst=rand_v6()) / \
            echo(id=RNG.randrange(65536), seq=RNG.randrange(65536), data=rand_payload(100))
    elif kind == "icmp4err":
        # An error quoting a UDP datagram (the quote cut as a router may cut it).
        quoted = raw(IP(src=rand_v4(), dst=rand_v4(), ttl=RNG.randrange(1, 256)) /
                     UDP(sport=RNG.randrange(65536), dport=RNG.randrange(65536)) /
                     rand_payload(100))
        quoted = quoted[:RNG.randrange(28, len(quoted) + 1)]
        error = RNG.choice([ICMP(type=3, code=RNG.randrange(16)), ICMP(type=11, code=0),
                            ICMP(type=12, code=0)])
        pkt = link() / IP(src=rand_v4(), dst=rand_v4()) / error / quoted
    elif kind == "icmp6err":
        quoted = raw(IPv6(src=rand_v6(), dst=rand_v6()) /
                     UDP(sport=RNG.randrange(65536), dport=RNG.randrange(65536)) /
                     rand_payload(100))
        quoted = quoted[:RNG.randrange(48, len(quoted) + 1)]
        error = RNG.choice([ICMPv6DestUnreach(code=RNG.randrange(7)),
                            ICMPv6PacketTooBig(mtu=1280), ICMPv6TimeExceeded(code=0),
                            ICMPv6ParamProblem(code=0, ptr=6)])
        pkt = link() / IPv6(src=rand_v6(), dst=rand_v6()) / error / quoted
    elif kind == "ns":
        pkt = link() / IPv6(src=rand_v6(), dst="ff02::1:ff00:1", hlim=255) / \
            ICMPv6ND_NS(tgt=rand_v6()) / ICMPv6NDOptSrcLLAddr(lladdr=rand_mac())
    elif kind == "na":
        pkt = link() / IPv6(src=rand_v6(), dst=rand_v6(), hlim=255) / \
            ICMPv6ND_NA(tgt=rand_v6(), R=RNG.randrange(2), S=RNG.randrange(2), O=1) / \
            ICMPv6NDOptDstLLAddr(lladdr=rand_mac())
    else:
        pkt = link() / ARP(op=RNG.choice([1, 2]), hwsrc=rand_mac(), psrc=rand_v4(),
                           hwdst=rand_mac(), pdst=rand_v4())
    return kind, Ether(raw(pkt))


def corrupt(kind, data):
    """Breaks a frame in one of a few ways; returns (bytes, expected error name or None)."""
    data = bytearray(data)
    how = RNG.randrange(3)
    if how == 0:
        return bytes(data[:RNG.randrange(len(data))]), "truncated"
    if kind in ("udp4", "udp6", "udp6ext") and len(data) > 0:
        # Flip a payload bit (the last byte is always UDP payload or header).
        data[-1] ^= 1 << RNG.randrange(8)
        return bytes(data), "bad_udp_checksum"
    return bytes(data), None


class ParseAgreesWithScapy(unittest.TestCase):

    def test_parse(self):
        frames = [random_frame() for _ in range(COUNT)]
        results = run_tool("parse", [raw(p).hex() for _, p in frames])
        for (kind, pkt), line in zip(frames, results):
            got = fields(line)
            with self.subTest(kind=kind, frame=raw(pkt).hex()):
                self.assertEqual(got["error"], "ok", line)
                self.assertEqual(got["smac"], pkt[Ether].src)
                self.assertEqual(got["dmac"], pkt[Ether].dst)
                if Dot1Q in pkt:
                    self.assertEqual(got["vlan"], str(pkt[Dot1Q].vlan))
                if ARP in pkt:
                    a = pkt[ARP]
                    self.assertEqual((got["arp_op"], got["arp_sha"], got["arp_spa"],
                                      got["arp_tha"], got["arp_tpa"]),
                                     (str(a.op), a.hwsrc, a.psrc, a.hwdst, a.pdst))
                    continue
                ip = pkt[IP] if IP in pkt else pkt[IPv6]
                self.assertEqual(got["src"], ip.src)
                self.assertEqual(got["dst"], ip.dst)
                self.assertEqual(got["ttl"], str(ip.ttl if IP in pkt else ip.hlim))
                if kind.startswith("frag"):
                    self.assertEqual((got["frag"], got["l4"]), ("1", "none"))
                    continue
                self.assertEqual(got["frag"], "0")
                if kind in ("icmp4err", "icmp6err"):
                    # scapy dissects the quote as IPerror/UDPerror (or IPerror6): compare with
                    # the quoted bytes as scapy reads a whole packet of them.
                    outer = ip.payload
                    quoted = (IP if kind == "icmp4err" else IPv6)(bytes(outer.payload))
                    self.assertEqual(got["l4"], "icmp" if kind == "icmp4err" else "icmpv6")
                    self.assertEqual((got["icmp_type"], got["icmp_code"]),
                                     (str(outer.type), str(outer.code)))
                    proto = quoted.proto if kind == "icmp4err" else quoted.nh
                    self.assertEqual((got["quote_src"], got["quote_dst"], got["quote_proto"]),
                                     (quoted.src, quoted.dst, str(proto)))
                    self.assertEqual((got["quote_sport"], got["quote_dport"]),
                                     (str(quoted[UDP].sport), str(quoted[UDP].dport)))
                    continue
                if UDP in pkt:
                    u = pkt[UDP]
                    self.assertEqual(got["l4"], "udp")
                    self.assertEqual((got["sport"], got["dport"], got["ulen"]),
                                     (str(u.sport), str(u.dport), str(u.len)))
                    self.assertEqual(got["payload"], bytes(u.payload).hex())
                elif ICMP in pkt:
                    i = pkt[ICMP]
                    self.assertEqual(got["l4"], "icmp")
                    self.assertEqual(got["icmp_type"], str(i.type))
                    self.assertEqual(int(got["icmp_rest"]), i.id << 16 | i.seq)
                    self.assertEqual(got["body"], bytes(i.payload).hex())
                elif ICMPv6ND_NS in pkt or ICMPv6ND_NA in pkt:
                    nd = pkt[ICMPv6ND_NS] if ICMPv6ND_NS in pkt else pkt[ICMPv6ND_NA]
                    opt = pkt[ICMPv6NDOptSrcLLAddr] if ICMPv6NDOptSrcLLAddr in pkt else \
                        pkt[ICMPv6NDOptDstLLAddr]
                    self.assertEqual(got["icmp_type"], str(nd.type))
                    self.assertEqual(got["ndp_target"], nd.tgt)
                    self.assertEqual(got["ndp_lladdr"], opt.lladdr)
                else:
                    e = pkt[ICMPv6EchoRequest] if ICMPv6EchoRequest in pkt else \
                        pkt[ICMPv6EchoReply]
                    self.assertEqual(got["l4"], "icmpv6")
                    self.assertEqual(got["icmp_type"], str(e.type))
                    self.assertEqual(int(got["icmp_rest"]), e.id << 16 | e.seq)
                    self.assertEqual(got["body"], e.data.hex())

    def test_corrupted_frames_are_refused(self):
        cases = []
        while len(cases) < COUNT:
            kind, pkt = random_frame()
            if kind.startswith("frag"):
                continue
            data, expected = corrupt(kind, raw(pkt))
            if expected is not None:
                cases.append((kind, data, expected))
        results = run_tool("parse", [d.hex() for _, d, _ in cases])
        for (kind, data, expected), line in zip(cases, results):
            error = fields(line)["error"]
            with self.subTest(kind=kind, frame=data.hex()):
                if expected == "truncated":
                    # Whatever the cut hit, a truncated frame is never accepted whole: it is
                    # refused, or (cut inside the Ethernet type) seen as some other protocol.
                    if error == "ok":
                        self.assertNotIn("l4=udp", line)
                        self.assertNotIn("l4=icmp", line)
                        self.assertNotIn("l3=arp", line)
                else:
                    self.assertEqual(error, expected)


class HeadersAreProcessedAsTheRfcsSay(unittest.TestCase):
    """Options and extension headers built by scapy (an independent encoder) get the verdict
    their RFCs give a destination host: RFC 8200 4.2 (an option's two high type bits), 4.4 and
    RFC 5095 (a routing header with segments left), RFC 791 (a source route not at its end)."""

    def test_verdicts(self):
        cases = []
        for _ in range(COUNT // 3):
            udp = UDP(sport=RNG.randrange(65536), dport=RNG.randrange(65536)) / rand_payload(50)
            kind = RNG.choice(["option", "routing", "route4"])
            if kind == "option":
                otype = RNG.randrange(2, 256)  # not Pad1 or PadN
                header = RNG.choice([IPv6ExtHdrHopByHop, IPv6ExtHdrDestOpt])
                data = bytes(RNG.randrange(256) for _ in range(RNG.randrange(0, 12)))
                pkt = IPv6(src=rand_v6(), dst=rand_v6()) / \
                    header(options=[HBHOptUnknown(otype=otype, optdata=data)]) / udp
                expected = "ok" if otype >> 6 == 0 else "ipv6_unrecognized_option"
            elif kind == "routing":
                segleft = RNG.randrange(0, 3)
                addresses = [rand_v6() for _ in range(max(segleft, RNG.randrange(0, 3)))]
                pkt = IPv6(src=rand_v6(), dst=rand_v6()) / \
                    IPv6ExtHdrRouting(type=RNG.choice([0, 2, 3, 4, 253]), segleft=segleft,
                                      addresses=addresses) / udp
                expected = "ipv6_routing_header" if segleft else "ok"
            else:
                hops = [rand_v4() for _ in range(RNG.randrange(1, 4))]
                option = RNG.choice([IPOption_LSRR, IPOption_SSRR])
                pointer = 4 + 4 * RNG.randrange(0, len(hops) + 1)  # len(hops): at its end
                # No UDP checksum: scapy sums a source-routed datagram's over its last hop,
                # as its sender would, not over the IP destination a last hop receives.
                udp[UDP].chksum = 0
                pkt = IP(src=rand_v4(), dst=rand_v4(),
                         options=[option(routers=hops, pointer=pointer)]) / udp
                expected = "ipv4_source_route" if pointer <= 3 + 4 * len(hops) else "ok"
            cases.append((kind, raw(link() / pkt), expected))
        results = run_tool("parse", [frame.hex() for _, frame, _ in cases])
        for (kind, frame, expected), line in zip(cases, results):
            with self.subTest(kind=kind, frame=frame.hex()):
                self.assertEqual(fields(line)["error"], expected)


class BuiltFramesPassScapy(unittest.TestCase):

    def check_checksums(self, pkt, layer):
        """scapy recomputes the checksum of `layer` from scratch; it must match ours."""
        name = "cksum" if "cksum" in pkt[layer].fields else "chksum"  # ICMPv6 says cksum
        ours = getattr(pkt[layer], name)
        copy = pkt.copy()
        delattr(copy[layer], name)
        if IP in copy:
            del copy[IP].chksum
        theirs = getattr(Ether(raw(copy))[layer], name)
        self.assertEqual(ours, theirs, "%s checksum" % layer.__name__)
        if IP in pkt:
            copy = pkt.copy()
            del copy[IP].chksum
            self.assertEqual(pkt[IP].chksum, Ether(raw(copy))[IP].chksum, "IP header checksum")

    def test_build(self):
        specs = []
        for _ in range(COUNT):
            kind = RNG.choice(["udp4", "udp6", "icmp4", "icmp6", "ns", "na", "arp"])
            payload = rand_payload()
            vlan = RNG.randrange(1, 4095) if RNG.random() < 0.2 else None
            if kind in ("udp4", "udp6"):
                a, b = (rand_v4(), rand_v4()) if kind == "udp4" else (rand_v6(), rand_v6())
                sport, dport = RNG.randrange(65536), RNG.randrange(65536)
                fmt = "%s:%d" if kind == "udp4" else "[%s]:%d"
                line = "udp src=%s dst=%s payload=%s ttl=%d" % (
                    fmt % (a, sport), fmt % (b, dport), payload.hex(), 1 + RNG.randrange(255))
                want = (a, b, sport, dport, payload)
            elif kind in ("icmp4", "icmp6"):
                a, b = (rand_v4(), rand_v4()) if kind == "icmp4" else (rand_v6(), rand_v6())
                t = 8 if kind == "icmp4" else 128
                rest = RNG.randrange(1 << 32)
                line = "icmp src=%s dst=%s type=%d code=0 rest=%d body=%s" % (
                    a, b, t, rest, payload.hex())
                want = (a, b, t, rest, payload)
            elif kind in ("ns", "na"):
                a, b, tgt, mac = rand_v6(), rand_v6(), rand_v6(), rand_mac()
                t = 135 if kind == "ns" else 136
                line = "ndp src=%s dst=%s type=%d target=%s lladdr=%s flags=%d" % (
                    a, b, t, tgt, mac, 0x60000000 if kind == "na" else 0)
                want = (a, b, tgt, mac)
            else:
                sha, spa, tha, tpa = rand_mac(), rand_v4(), rand_mac(), rand_v4()
                op = RNG.choice([1, 2])
                line = "arp op=%d sha=%s spa=%s tha=%s tpa=%s" % (op, sha, spa, tha, tpa)
                want = (op, sha, spa, tha, tpa)
            if vlan is not None:
                line += " vlan=%d" % vlan
            specs.append((kind, line, want, vlan))
        results = run_tool("build", [line for _, line, _, _ in specs])
        for (kind, line, want, vlan), hexframe in zip(specs, results):
            with self.subTest(spec=line):
                self.assertFalse(hexframe.startswith("error="), hexframe)
                pkt = Ether(bytes.fromhex(hexframe))
                if vlan is not None:
                    self.assertEqual(pkt[Dot1Q].vlan, vlan)
                if kind in ("udp4", "udp6"):
                    ip = pkt[IP] if kind == "udp4" else pkt[IPv6]
                    self.assertEqual((ip.src, ip.dst, pkt[UDP].sport, pkt[UDP].dport,
                                      bytes(pkt[UDP].payload)), want)
                    self.check_checksums(pkt, UDP)
                elif kind == "icmp4":
                    i = pkt[ICMP]
                    self.assertEqual((pkt[IP].src, pkt[IP].dst, i.type, i.id << 16 | i.seq,
                                      bytes(i.payload)), want)
                    self.check_checksums(pkt, ICMP)
                elif kind == "icmp6":
                    e = pkt[ICMPv6EchoRequest]
                    self.assertEqual((pkt[IPv6].src, pkt[IPv6].dst, e.type, e.id << 16 | e.seq,
                                      e.data), want)
                    self.check_checksums(pkt, ICMPv6EchoRequest)
                elif kind in ("ns", "na"):
                    layer = ICMPv6ND_NS if kind == "ns" else ICMPv6ND_NA
                    opt = ICMPv6NDOptSrcLLAddr if kind == "ns" else ICMPv6NDOptDstLLAddr
                    self.assertEqual(pkt[IPv6].hlim, 255)
                    self.assertEqual((pkt[IPv6].src, pkt[IPv6].dst, pkt[layer].tgt,
                                      pkt[opt].lladdr), want)
                    if kind == "na":
                        self.assertEqual((pkt[layer].S, pkt[layer].O, pkt[layer].R), (1, 1, 0))
                    self.check_checksums(pkt, layer)
                else:
                    a = pkt[ARP]
                    self.assertEqual((a.op, a.hwsrc, a.psrc, a.hwdst, a.pdst), want)


if __name__ == "__main__":
    FRAME_TOOL = sys.argv.pop(1)
    unittest.main(verbosity=1)
