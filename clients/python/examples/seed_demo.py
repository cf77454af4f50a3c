"""The Linux 6.13 hash4 scenario through quadsockd: N sockets connected to N kernel peers, datagrams both
ways, ping, a live rehash, and a report with hash4's share of the lookups.

    seed_demo.py --target unix:/tmp/q.sock --peer-netns NS --stack 10.9.0.2 --peer 10.9.0.1 \\
                 --stack6 fd00:9::2 --peer6 fd00:9::1 [--sockets 500]

Kernel peer sockets are made inside --peer-netns (root). Exits 1 unless every datagram is
accounted for.
"""

import argparse
import ctypes
import os
import socket
import subprocess
import sys
import threading
import time

import quadsock

CLONE_NEWNET = 0x40000000


def in_netns(ns, fn):
    """Runs fn() on a thread inside network namespace `ns`; sockets it makes stay there."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open("/run/netns/" + ns, os.O_RDONLY)
    out = {}

    def run():
        if libc.setns(fd, CLONE_NEWNET) != 0:
            out["error"] = OSError(ctypes.get_errno(), "setns into " + ns)
            return
        try:
            out["value"] = fn()
        except OSError as e:
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    os.close(fd)
    if "error" in out:
        raise out["error"]
    return out["value"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--peer-netns", required=True)
    p.add_argument("--stack", required=True)
    p.add_argument("--peer", required=True)
    p.add_argument("--stack6", required=True)
    p.add_argument("--peer6", required=True)
    p.add_argument("--sockets", type=int, default=500)
    args = p.parse_args()
    n = args.sockets
    problems = []
    started = time.time()
    with quadsock.Client(args.target, name="seed-demo") as client:
        iface = client.interfaces()[0]
        print("quadsockd on %s: XDP %s, AF_XDP %s, addresses %s" % (
            iface.name, iface.xdp_mode, iface.bind_mode, ", ".join(client.addresses())))

        # N kernel peers, N quadsock sockets sharing one port, each connected to its peer.
        peers = in_netns(args.peer_netns, lambda: [socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                                                   for _ in range(n)])
        socks = []
        for i, k in enumerate(peers):
            k.bind((args.peer, 20000 + i))
            k.connect((args.stack, 4000))
            k.settimeout(3)
            s = client.open("ipv4", reuse_port=True)
            s.bind("%s:4000" % args.stack)
            s.connect((args.peer, 20000 + i))
            socks.append(s)
        print("opened %d sockets on %s:4000, each connected to its own kernel peer" % (n, args.stack))
        subprocess.run(["ip", "netns", "exec", args.peer_netns, "ping", "-c", "1", "-W", "2",
                        args.stack], stdout=subprocess.DEVNULL, check=False)

        # Kernel -> quadsock: each peer sends its number; each socket must get exactly its own.
        for i, k in enumerate(peers):
            k.send(b"%d" % i)
            if i % 100 == 99:
                time.sleep(0.01)
        to_quadsock = 0
        for i, s in enumerate(socks):
            d = s.receive_one(timeout=3)
            if d is None:
                problems.append("socket %d received nothing" % i)
            elif d.payload != b"%d" % i:
                problems.append("socket %d received %r, another flow's datagram" % (i, d.payload))
            else:
                to_quadsock += 1
        # quadsock -> kernel: each socket answers its peer.
        for i, s in enumerate(socks):
            s.send(b"reply %d" % i)
        to_kernel = 0
        for i, k in enumerate(peers):
            try:
                if k.recv(2048) == b"reply %d" % i:
                    to_kernel += 1
                else:
                    problems.append("peer %d got another socket's reply" % i)
            except socket.timeout:
                problems.append("peer %d got no reply" % i)

        # IPv6 both ways, and ping both families.
        k6 = in_netns(args.peer_netns, lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
        k6.bind((args.peer6, 6000))
        k6.settimeout(3)
        with client.open("ipv6") as s6:
            s6.bind("[::]:6000")
            k6.sendto(b"over ipv6", (args.stack6, 6000))
            d = s6.receive_one(timeout=3)
            if d is None or d.payload != b"over ipv6":
                problems.append("IPv6 datagram to quadsock lost")
            s6.send(b"ipv6 reply", (args.peer6, 6000))
            try:
                ok6 = k6.recv(2048) == b"ipv6 reply"
            except socket.timeout:
                ok6 = False
            if not ok6:
                problems.append("IPv6 datagram from quadsock lost")
        pings = {}
        for fam, addr in (("-4", args.stack), ("-6", args.stack6)):
            r = subprocess.run(["ip", "netns", "exec", args.peer_netns, "ping", fam, "-c", "3",
                                "-i", "0.2", "-W", "2", addr], capture_output=True, text=True)
            pings[addr] = r.returncode == 0
            if r.returncode != 0:
                problems.append("ping %s failed" % addr)

        # A live rehash: socket 0 moves to port 4001 while its peer streams at it.
        k0, s0 = peers[0], socks[0]
        sent_new, got_new = 0, 0
        s0.rehash(port=4001)
        for j in range(200):
            k0.sendto(b"after %d" % j, (args.stack, 4001))
            sent_new += 1
        for d in s0.receive(timeout=3, count=sent_new):
            got_new += 1
        if got_new != sent_new:
            problems.append("rehashed socket got %d of %d datagrams" % (got_new, sent_new))

        c = client.counters()
        t = c.table
        ratio = t.hash4_hits / t.lookups if t.lookups else 0.0
        print()
        print("report")
        print("  datagrams kernel -> quadsock   %d of %d, each to its own socket" % (to_quadsock, n))
        print("  datagrams quadsock -> kernel   %d of %d" % (to_kernel, n))
        print("  IPv6 both ways                 %s" % ("ok" if not any("IPv6" in x for x in problems) else "FAILED"))
        print("  ping / ping -6                 %s" % ", ".join("%s %s" % (a, "ok" if v else "FAILED") for a, v in pings.items()))
        print("  rehash to port 4001 live       %d of %d datagrams after the switch" % (got_new, sent_new))
        print("  table lookups                  %d, hash4 hits %d (%.0f%%), hash4 entries %d" % (
            t.lookups, t.hash4_hits, 100 * ratio, t.hash4_entries))
        print("  XDP program                    %s mode: %d frames steered to quadsock, %d left to the kernel" % (
            iface.xdp_mode, c.xdp.redirect, c.xdp.pass_not_owned + c.xdp.pass_other))
        for q in c.queues:
            print("  queue %d (%s)                  rx %d, tx %d, rx dropped %d" % (
                q.queue, q.mode, q.counters.rx_frames, q.counters.tx_frames, q.counters.rx_dropped))
        frames_ok = client.check_frame_accounting()
        if not frames_ok:
            problems.append("frame accounting is broken (quadsockd's log says how)")
        print("  frame accounting               %s" % ("ok" if frames_ok else "BROKEN"))
        print("  took %.1f s" % (time.time() - started))
        for s in socks:
            s.close()
        for k in peers:
            k.close()
    if problems:
        print("\nPROBLEMS:\n  " + "\n  ".join(problems[:20]))
        return 1
    print("\nevery datagram accounted for")
    return 0


if __name__ == "__main__":
    sys.exit(main())
