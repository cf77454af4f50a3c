"""The Linux 6.13 hash4 scenario through quadsockd: N sockets connected to N kernel peers, datagrams both
ways, ping, a live rehash, and a report with hash4's share of the lookups.

    connected_demo.py --target unix:/tmp/q.sock --peer-netns NS --stack 10.9.0.2 --peer 10.9.0.1 \\
                 --stack6 fd00:9::2 --peer6 fd00:9::1 [--sockets 500] [--rounds 200]

Every datagram of every socket comes to the demo on one stream, the session's data channel
(StreamChannel), and the replies go out on it too; a burst of --rounds datagrams from each peer
measures the rate at which the demo receives through it. Kernel peer sockets are made inside
--peer-netns (root). Exits 1 unless every datagram is accounted for: what the demo received
plus what the sockets counted as dropped is what reached the sockets (their counters).
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


class Receiver:
    """What the demo takes off the channel: every datagram counted, each checked to have come to
    the socket it was meant for."""

    def __init__(self, channel, problems):
        self.channel = channel
        self.problems = problems
        self.total = 0
        self.last = time.monotonic()  # when the last batch came

    def take(self, want, timeout, check):
        """Receives until `want` datagrams came or `timeout` seconds passed without one; `check`
        gets each. Returns how many came."""
        got = 0
        while got < want:
            batch = self.channel.receive_batch(want - got, timeout=timeout)
            if not batch:
                break
            for d in batch:
                check(d)
            got += len(batch)
            self.total += len(batch)
            self.last = time.monotonic()
        return got


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--peer-netns", required=True)
    p.add_argument("--stack", required=True)
    p.add_argument("--peer", required=True)
    p.add_argument("--stack6", required=True)
    p.add_argument("--peer6", required=True)
    p.add_argument("--sockets", type=int, default=500)
    p.add_argument("--rounds", type=int, default=200,
                   help="datagrams each peer sends for the rate (default 200)")
    args = p.parse_args()
    n = args.sockets
    problems = []
    started = time.time()
    with quadsock.Client(args.target, name="connected-demo") as client:
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
        number = {s.index: i for i, s in enumerate(socks)}
        print("opened %d sockets on %s:4000, each connected to its own kernel peer" % (n, args.stack))
        subprocess.run(["ip", "netns", "exec", args.peer_netns, "ping", "-c", "1", "-W", "2",
                        args.stack], stdout=subprocess.DEVNULL, check=False)

        # One stream for every socket of the session, those opened later too. The ring holds a
        # burst of the rate test; the window bounds what is on its way to the demo.
        channel = client.channel(credit=4096, ring_slots=16384)
        print("all %d sockets on one data channel (a StreamChannel stream)" % n)
        rx = Receiver(channel, problems)

        def own(payload_of):
            """A check that a datagram came to the socket whose peer sent it."""
            def check(d):
                i = number.get(d.index)
                if i is None or d.payload != payload_of(i, d):
                    problems.append("socket #%d received %r, another flow's datagram" %
                                    (d.index, d.payload[:32]))
            return check

        # Kernel -> quadsock: each peer sends its number; each socket must get exactly its own.
        for i, k in enumerate(peers):
            k.send(b"%d" % i)
            if i % 100 == 99:
                time.sleep(0.01)
        seen = set()

        def first(i, d):
            seen.add(i)
            return b"%d" % i
        to_quadsock = rx.take(n, 3, own(first))
        to_quadsock = len(seen) if to_quadsock == n else to_quadsock
        if to_quadsock != n:
            problems.append("%d of %d sockets received their peer's datagram" % (to_quadsock, n))

        # quadsock -> kernel: each socket answers its peer, all on the channel, 1024 a request.
        replies = [(s, b"reply %d" % i) for i, s in enumerate(socks)]
        for at in range(0, n, 1024):
            channel.send_batch(replies[at:at + 1024])
        to_kernel = 0
        for i, k in enumerate(peers):
            try:
                if k.recv(2048) == b"reply %d" % i:
                    to_kernel += 1
                else:
                    problems.append("peer %d got another socket's reply" % i)
            except socket.timeout:
                problems.append("peer %d got no reply" % i)

        # The rate: every peer sends --rounds datagrams, a round at a time, while the demo
        # receives them all on the channel. The senders stay a little ahead of the receiver (the
        # offered load follows it, within what quadsockd's AF_XDP ring holds), so the rate is
        # the channel's to the demo.
        rounds, burst = args.rounds, n * args.rounds
        sent = [0]

        def send_rounds():
            for r in range(rounds):
                give_up = time.monotonic() + 3  # the receiver stopped: the round goes anyway
                while sent[0] - (rx.total - base) > 1024 and time.monotonic() < give_up:
                    time.sleep(0.001)
                for i, k in enumerate(peers):
                    k.send(b"%d %d" % (i, r))
                sent[0] += n
        base = rx.total
        sender = threading.Thread(target=send_rounds)
        t0 = time.monotonic()
        sender.start()
        rate_got = rx.take(burst, 3, own(lambda i, d: b"%d %d" % (i, int(d.payload.split()[1]))))
        elapsed = rx.last - t0
        sender.join()
        rate = rate_got / elapsed if elapsed > 0 else 0.0

        # IPv6 both ways (its socket joins the channel as it opens), and ping both families.
        k6 = in_netns(args.peer_netns, lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
        k6.bind((args.peer6, 6000))
        k6.settimeout(3)
        with client.open("ipv6") as s6:
            s6.bind("[::]:6000")
            deadline = time.monotonic() + 5
            while not s6.get().on_channel and time.monotonic() < deadline:
                time.sleep(0.01)
            k6.sendto(b"over ipv6", (args.stack6, 6000))
            got6 = []
            rx.take(1, 3, got6.append)
            if [(d.socket, d.payload) for d in got6] != [(s6, b"over ipv6")]:
                problems.append("IPv6 datagram to quadsock lost")
            channel.send(s6, b"ipv6 reply", (args.peer6, 6000))
            try:
                ok6 = k6.recv(2048) == b"ipv6 reply"
            except socket.timeout:
                ok6 = False
            if not ok6:
                problems.append("IPv6 datagram from quadsock lost")
            counted = [s6.get().counters]
        pings = {}
        for fam, addr in (("-4", args.stack), ("-6", args.stack6)):
            r = subprocess.run(["ip", "netns", "exec", args.peer_netns, "ping", fam, "-c", "3",
                                "-i", "0.2", "-W", "2", addr], capture_output=True, text=True)
            pings[addr] = r.returncode == 0
            if r.returncode != 0:
                problems.append("ping %s failed" % addr)

        # A live rehash: socket 0 moves to port 4001 while its peer streams at it.
        k0, s0 = peers[0], socks[0]
        sent_new = 200
        s0.rehash(port=4001)
        for j in range(sent_new):
            k0.sendto(b"after %d" % j, (args.stack, 4001))
        got_new = rx.take(sent_new, 3, own(lambda i, d: b"after %d" % int(d.payload.split()[1])
                                           if i == 0 else None))
        if got_new != sent_new:
            problems.append("rehashed socket got %d of %d datagrams" % (got_new, sent_new))

        # Every datagram accounted for: what reached the sockets (their counters) is what the
        # demo received plus what they dropped. A datagram still on its way is waited for.
        def delivered():
            cs = [x.counters for x in client.list()] + counted
            return (sum(c.rx_datagrams for c in cs), sum(c.rx_dropped for c in cs))
        deadline = time.monotonic() + 5
        reached, dropped = delivered()
        while rx.total != reached and time.monotonic() < deadline:
            rx.take(reached - rx.total, 0.5, own(lambda i, d: d.payload))
            reached, dropped = delivered()
        if rx.total != reached:
            problems.append("the sockets took %d datagrams; %d reached the demo" %
                            (reached, rx.total))
        failures = channel.send_failures()
        for f in failures:
            problems.append("a send on the channel failed: %s" % f)
        end = channel.close()
        if end is not None:
            problems.append("the channel ended with %s" % end)

        c = client.counters()
        t = c.table
        ratio = t.hash4_hits / t.lookups if t.lookups else 0.0
        print()
        print("report")
        print("  datagrams kernel -> quadsock   %d of %d, each to its own socket" % (to_quadsock, n))
        print("  datagrams quadsock -> kernel   %d of %d" % (to_kernel, n))
        print("  received on the channel        %d of %d (%d sockets x %d) in %.2f s: %.0f datagrams/s" % (
            rate_got, burst, n, rounds, elapsed, rate))
        print("  accounted for                  %d reached the sockets = %d received + %d dropped" % (
            reached + dropped, rx.total, dropped))
        lost = sum(q.counters.rx_dropped for q in c.queues)
        if lost:
            print("  before the sockets             %d frames dropped by quadsockd's queues (counted)" % lost)
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
