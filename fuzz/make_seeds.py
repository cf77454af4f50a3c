"""Writes the fuzz targets' seed corpora (fuzz/corpus/): frames of every kind the stack parses,
built with scapy (the same kinds the scapy cross-check and the wire tests send: UDP over IPv4
and IPv6, fragments, VLAN tags, IPv4 options, IPv6 extension headers, ICMP errors quoting a
datagram, echo, ARP, NDP, TCP), fragment sequences for the reassembly target, and steps on
a data channel, calls on quadsockd's services, and frames for the XDP program. Run it with
Debian's python3 (scapy) after changing what the targets take:

    /usr/bin/python3 fuzz/make_seeds.py
"""

import os
import struct

from scapy.all import (ARP, Dot1Q, Ether, ICMP, ICMPv6DestUnreach, ICMPv6EchoRequest,
                       ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig, IP,
                       IPOption_RR, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, TCP, UDP, fragment, fragment6)

HERE = os.path.dirname(os.path.abspath(__file__))
ETH = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
A4, B4, A6, B6 = "10.1.0.1", "10.1.0.2", "fd00:1::1", "fd00:1::2"


def frames():
    udp = UDP(sport=5000, dport=4000)
    yield "udp4", ETH / IP(src=A4, dst=B4) / udp / b"hello"
    yield "udp4_nocsum", ETH / IP(src=A4, dst=B4) / UDP(sport=5000, dport=4000, chksum=0) / b"x"
    yield "udp6", ETH / IPv6(src=A6, dst=B6) / udp / b"hello"
    yield "udp4_vlan", Ether(dst="02:00:00:00:00:02") / Dot1Q(vlan=7) / IP(src=A4, dst=B4) / udp
    yield "udp4_options", ETH / IP(src=A4, dst=B4, options=[IPOption_RR()]) / udp / b"opt"
    yield "udp6_hbh", ETH / IPv6(src=A6, dst=B6) / IPv6ExtHdrHopByHop() / udp / b"hbh"
    yield "udp6_dest", ETH / IPv6(src=A6, dst=B6) / IPv6ExtHdrDestOpt() / udp / b"dst"
    yield "udp6_routing", ETH / IPv6(src=A6, dst=B6) / IPv6ExtHdrRouting(
        type=0, segleft=1, addresses=["fd00:1::9"]) / udp
    yield "udp6_atomic", ETH / IPv6(src=A6, dst=B6) / IPv6ExtHdrFragment(id=5) / udp / b"a"
    for i, f in enumerate(fragment(IP(bytes(IP(src=A4, dst=B4, id=9) / udp / bytes(3000))),
                                   fragsize=1480)):
        yield "frag4_%d" % i, ETH / f
    for i, f in enumerate(fragment6(IPv6(bytes(IPv6(src=A6, dst=B6) / IPv6ExtHdrFragment(id=9) /
                                               udp / bytes(3000))), 1280)):
        yield "frag6_%d" % i, ETH / f
    yield "icmp4_unreach", ETH / IP(src=B4, dst=A4) / ICMP(type=3, code=3) / IP(
        src=A4, dst=B4) / UDP(sport=4000, dport=53)
    yield "icmp4_fragneeded", ETH / IP(src=B4, dst=A4) / ICMP(type=3, code=4, nexthopmtu=1400) / IP(
        src=A4, dst=B4) / UDP(sport=4000, dport=53)
    yield "icmp6_unreach", ETH / IPv6(src=B6, dst=A6) / ICMPv6DestUnreach(code=4) / IPv6(
        src=A6, dst=B6) / UDP(sport=4000, dport=53)
    yield "icmp6_toobig", ETH / IPv6(src=B6, dst=A6) / ICMPv6PacketTooBig(mtu=1280) / IPv6(
        src=A6, dst=B6) / UDP(sport=4000, dport=53)
    yield "echo4", ETH / IP(src=A4, dst=B4) / ICMP(type=8) / b"ping"
    yield "echo6", ETH / IPv6(src=A6, dst=B6) / ICMPv6EchoRequest() / b"ping"
    yield "arp", Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=A4, pdst=B4)
    yield "ns", ETH / IPv6(src=A6, dst="ff02::1:ff00:2", hlim=255) / ICMPv6ND_NS(
        tgt=B6) / ICMPv6NDOptSrcLLAddr(lladdr="02:00:00:00:00:01")
    yield "na", ETH / IPv6(src=B6, dst=A6, hlim=255) / ICMPv6ND_NA(tgt=B6, R=0, S=1, O=1)
    yield "tcp4", ETH / IP(src=A4, dst=B4) / TCP(sport=5000, dport=80, flags="S")


def xdp(frame_seeds):
    """Frames for the XDP program (fuzz/xdp_fuzzer.cc): every frame above (10.1.0.2 and
    fd00:1::2 are the stack's alone there), and frames to its shared addresses (10.1.0.3 and
    fd00:1::3: UDP port 4000 the stack's) and to its addresses on VLAN 100 (10.1.0.4, the
    stack's; fd00:1::4, shared)."""
    for name, f in frame_seeds:
        yield name, f
    udp = lambda dport: UDP(sport=5000, dport=dport)
    vlan = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / Dot1Q(vlan=100)
    yield "shared4_owned", ETH / IP(src=A4, dst="10.1.0.3") / udp(4000) / b"x"
    yield "shared4_kernel", ETH / IP(src=A4, dst="10.1.0.3") / udp(22) / b"x"
    yield "shared6_owned", ETH / IPv6(src=A6, dst="fd00:1::3") / udp(4000) / b"x"
    yield "shared4_echo", ETH / IP(src=A4, dst="10.1.0.3") / ICMP(type=8) / b"ping"
    yield "vlan4", vlan / IP(src=A4, dst="10.1.0.4") / udp(9) / b"x"
    yield "vlan4_untagged", ETH / IP(src=A4, dst="10.1.0.4") / udp(9) / b"x"
    yield "vlan6_owned", vlan / IPv6(src=A6, dst="fd00:1::4") / udp(4000) / b"x"
    yield "vlan_arp", Ether(dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=100) / ARP(
        psrc=A4, pdst="10.1.0.4")
    yield "arp_shared", Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=A4, pdst="10.1.0.3")


def reassembly():
    """Op sequences of 8 bytes: source, id, offset/8 (2), length (2), more, clock step."""
    def op(source, ident, offset, length, more, step=0):
        return struct.pack(">BBHHBB", source, ident, offset // 8, length, more, step)
    yield "in_order", op(0, 1, 0, 1480, 1) + op(0, 1, 1480, 1480, 1) + op(0, 1, 2960, 40, 0)
    yield "backwards6", op(2, 1, 2464, 100, 0) + op(2, 1, 1232, 1232, 1) + op(2, 1, 0, 1232, 1)
    yield "overlap", op(1, 2, 0, 1480, 1) + op(1, 2, 1472, 100, 0) + op(1, 2, 1480, 100, 0)
    yield "duplicate", op(0, 3, 0, 800, 1) + op(0, 3, 0, 800, 1) + op(0, 3, 800, 8, 0)
    yield "timeout", op(0, 4, 0, 1480, 1, 255) + op(0, 4, 1480, 8, 0)
    yield "interleaved", (op(0, 5, 0, 1000, 1) + op(3, 5, 0, 1000, 1) + op(0, 5, 1000, 8, 0) +
                          op(3, 5, 1000, 8, 0))
    yield "tiny", op(1, 6, 0, 4, 1) + op(1, 6, 8, 100, 0)


def receive(frame_seeds):
    """A socket set, then frames (fuzz/receive_fuzzer.cc): sockets of 8 bytes (flags: 1 IPv6,
    2 v6only, 4 reuseport, 8 connect; local address and port picks; remote address and port
    picks; 3 spare), frames of a kind byte: even, built (source, source port, destination,
    destination port picks, payload length, 3 spare); odd, raw (length, little-endian 2 bytes,
    and the bytes, then (kind >> 1) * 16 zeros). Address picks: 0 10.1.0.2, 1 10.1.0.1,
    2 10.1.0.9, 3 fd00:1::2, 4 fd00:1::1, 5 fd00:1::9, 6 0.0.0.0, 7 ::, 8 ::ffff:10.1.0.2; ports
    4000+pick, peers' 5000+pick."""
    def sock(flags, local, lport, remote=0, rport=0):
        return bytes([flags, local, lport, remote, rport, 0, 0, 0])

    def built(src, sport, dst, dport, length=5):
        return bytes([0, src, sport, dst, dport, length, 0, 0, 0])

    def raw(frame):  # to the harness's MAC; trailing zeros as the kind's (kind >> 1) * 16
        frame = bytes.fromhex("02000000000b") + frame[6:]
        pad = 0
        while pad < 127 and len(frame) >= 16 and not any(frame[-16:]):
            frame, pad = frame[:-16], pad + 1
        return bytes([1 | pad << 1]) + struct.pack("<H", len(frame)) + frame

    sockets = (sock(0, 0, 0) + sock(8, 6, 1, 1, 0) + sock(1 | 4, 7, 2) + sock(1 | 4, 7, 2) +
               sock(1 | 2, 3, 3))
    yield "mixed", (bytes([5]) + sockets + built(1, 0, 0, 0) + built(1, 0, 0, 1) +
                    built(1, 1, 0, 1) + built(1, 2, 0, 2) + built(4, 0, 3, 2) +
                    built(1, 3, 0, 3) + built(4, 1, 3, 3) + built(1, 0, 2, 0))
    wildcards = bytes([2]) + sock(0, 6, 0) + sock(1, 7, 0)
    yield "raw_frames", wildcards + b"".join(raw(bytes(f)) for _, f in frame_seeds)
    for name, f in frame_seeds:  # one a seed too: a run's inputs are shorter than all of them
        yield "raw_" + name, wildcards + raw(bytes(f))
    # An ICMP error about a packet with nothing after its header quotes it whole: too short
    # for the parser's ports (the IPv6 one, unknown_next_header_nothing_after, was found).
    short = ETH / IP(src="10.1.0.1", dst="10.1.0.2", proto=200)
    yield "unknown_protocol_nothing_after", wildcards + raw(bytes(short))


def socket_table():
    """Calls on a socket table (fuzz/socket_table_fuzzer.cc): a byte (0: hash4 on, 1: off),
    then 3 bytes a call: the call (0,1 open; 2 bind; 3 connect; 4 disconnect; 5 rehash; 6 bind
    to device; 7 close), which socket, and its argument (open: 1 IPv6, 2 v6only, 4 reuseport,
    8 the second owner, bits 4-5 the device; bind: address pick + 8 * port pick; connect: peer
    pick + 8 * port pick)."""
    mixed = bytes([0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 0, 1, 0, 3, 1, 0, 0, 0, 1, 2, 2, 13,
                   3, 2, 2, 0, 0, 3, 2, 3, 3, 4, 1, 0, 6, 0, 1, 5, 0, 17, 7, 1, 0])
    yield "mixed", mixed
    yield "mixed_no_hash4", bytes([1]) + mixed[1:]
    group = bytes([0, 0, 0, 4, 2, 0, 2, 0, 0, 4, 2, 1, 2, 0, 0, 4, 2, 2, 2, 3, 1, 0,
                   0, 0, 12, 2, 3, 2, 4, 1, 0, 7, 0, 0])
    yield "reuseport", group


def channel():
    """Steps on a data channel (fuzz/channel_fuzzer.cc): a shape byte (bit 0: a thread scribbles
    over the TX ring; bit 1: two RX rings; bits 2-3: 2 << n slots; bit 4: 128-byte buffers),
    then steps, each an op byte (op % 12; bit 5: the last RX ring) and its arguments."""
    peer = bytes(10) + bytes([0xff, 0xff, 10, 1, 0, 1])  # ::ffff:10.1.0.1

    def send(length, flags=3):  # op 0: socket, length (even byte: the next byte), flags, peer
        return bytes([0, 1, 0, length, flags]) + peer + bytes([0x13, 0x88])

    def stage(payload, ring_bit=0):  # op 5: length, payload, socket
        return bytes([5 | ring_bit, len(payload)]) + payload + bytes([1])

    turn, finish, publish, wake = bytes([9, 8]), bytes([10]), bytes([7]), bytes([8])
    consume = bytes([2, 0, 2])  # the consumer index moved on by two
    yield "sends", bytes([0x04]) + send(5) + send(0) + send(64) + turn + finish + send(7) + \
        turn + finish + bytes([11 | 16]) + send(1) + bytes([11])
    yield "sends_too_long", bytes([0x04]) + send(5) + bytes([0, 1, 1, 0xff, 0xff, 0, 0]) + \
        bytes(19) + send(3) + turn + finish
    yield "rx", bytes([0x06]) + stage(b"hello") + stage(b"again") + publish + wake + consume + \
        stage(b"x" * 60, 32) + bytes([7 | 32, 8 | 32]) + stage(b"more") + publish
    yield "rx_full", bytes([0x00]) + stage(b"a") + stage(b"b") + stage(b"c") + publish + \
        consume + stage(b"d") + publish
    yield "rx_consumer_garbage", bytes([0x04]) + stage(b"a") + publish + \
        bytes([2, 1, 0x10, 0, 0, 0]) + stage(b"b") + publish + turn
    yield "scribbled", bytes([0x05]) + (send(9) + turn + finish) * 8
    yield "raw", bytes([0x14, 4, 0x00, 0x10, 0, 0, 8]) + b"garbage!" + send(4) + turn + finish


def service():
    """Calls on quadsockd's services in one session (fuzz/service_fuzzer.cc): an op byte each
    (op % 16: 0,1 Open, 2 Bind, 3 Connect, 4 Rehash, 5 Disconnect, 6 Close, 7 Get, 8 List, 9
    Batch, 10 Send, 11 SendBatch, 12 AttachChannel, 13 KeepAlive, 14 SetNeighbor, 15
    GetCounters) and its arguments: a handle pick (< 200: one this input opened), an address
    pick (< 38: a listed one: 0 10.1.0.2, 1 10.1.0.1, 3 fd00:1::2, 4 fd00:1::1), a port pick
    (< 128: 4000 + n % 4; < 192: 5000 + n % 2; < 224: 0)."""
    v4, v6 = bytes([0, 0, 0]), bytes([0, 1, 0])  # Open: family pick, flags
    bind = lambda address: bytes([2, 0, address, 0])
    connect = lambda address: bytes([3, 0, address, 128])
    send = bytes([10, 0, 5]) + b"hello" + bytes([0, 0])
    get, close = bytes([7, 0]), bytes([6, 0])
    yield "lifecycle4", v4 + bind(0) + connect(1) + send + get + bytes([8, 0, 0, 0, 0]) + \
        bytes([4, 0, 0, 1, 1]) + bytes([5, 0]) + close + get
    yield "lifecycle6", v6 + bind(3) + connect(4) + send + get + close
    yield "batch", bytes([9, 3, 0, 0, 1, 0, 0, 0, 5, 0])
    yield "attach", v4 + bind(0) + bytes([12, 1, 0, 0]) + bytes([12, 0, 1, 0, 1, 0, 0])
    yield "strangers", bytes([7, 230, 4]) + b"nope" + bytes([7, 210]) + bytes([6, 210]) + \
        bytes([2, 210, 0, 0])
    yield "admin", bytes([14, 1, 17]) + b"02:00:00:00:00:01" + bytes([15, 13])
    yield "big_send", v4 + bind(0) + bytes([10, 0, 0, 3, 1, 1, 128])


def main():
    os.makedirs(os.path.join(HERE, "corpus", "service"), exist_ok=True)
    for name, b in service():
        with open(os.path.join(HERE, "corpus", "service", name), "wb") as out:
            out.write(b)
    os.makedirs(os.path.join(HERE, "corpus", "channel"), exist_ok=True)
    for name, b in channel():
        with open(os.path.join(HERE, "corpus", "channel", name), "wb") as out:
            out.write(b)
    for name, b in socket_table():
        with open(os.path.join(HERE, "corpus", "socket_table", name), "wb") as out:
            out.write(b)
    frame_seeds = list(frames())
    for name, b in receive(frame_seeds):
        with open(os.path.join(HERE, "corpus", "receive", name), "wb") as out:
            out.write(b)
    for name, f in frame_seeds:
        with open(os.path.join(HERE, "corpus", "frame", name), "wb") as out:
            out.write(bytes(f))
    os.makedirs(os.path.join(HERE, "corpus", "xdp"), exist_ok=True)
    for name, f in xdp(frame_seeds):
        with open(os.path.join(HERE, "corpus", "xdp", name), "wb") as out:
            out.write(bytes(f))
    for name, b in reassembly():
        with open(os.path.join(HERE, "corpus", "reassembly", name), "wb") as out:
            out.write(b)


if __name__ == "__main__":
    main()
