"""quadsockd's neighbour cache against frames from the wire (root): the real daemon on AF_XDP on
a veth pair, the kernel as its IPv6 peer, and scapy (an independent implementation of NDP)
forging what the peer's side of the wire says.

A forged unsolicited advertisement (S=0, O=1) may move the peer's MAC, but only to STALE (RFC
4861 7.2.5; it used to be REACHABLE), and the real peer's announcement to all nodes (ff02::1)
must reach the stack (the XDP program used to pass it to the kernel) and mend the entry, while an
announcement about an address the stack has no entry for stays the kernel's. quadsockd's flags for
the limits of neighbour resolution take effect on the wire.

Usage (Bazel passes it): neighbor_e2e_test.py QUADSOCKD
"""

import json
import os
import random
import select
import socket
import subprocess
import sys
import time
import unittest

import e2e
import netns
import quadsock

FORGED = "02:00:00:00:00:66"
WIRE_FLOOD = None  # tests/wire_flood, from the command line


def mac_of(dev, ns=None):
    cmd = ["ip"] + (["-n", ns] if ns else []) + ["-j", "link", "show", dev]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                     check=True).stdout)[0]["address"]


class NeighborE2eTest(e2e.E2eTestCase):

    def setUp(self):
        self.net = netns.PeerNetwork("qs0", "qs1")
        self.net.peer_shell("ip addr add %s/64 dev qs1 nodad" % e2e.PEER6)
        self.daemon = e2e.Daemon()
        self.client = quadsock.Client(self.daemon.target, name="neighbours")
        self.admin = quadsock.Client(
            "unix:/tmp/quadsock-e2e-%d-admin.sock" % os.getpid(), session=False)
        self.peer_mac = mac_of("qs1", self.net.ns)
        self.stack_mac = mac_of("qs0")

    def tearDown(self):
        self.end(self.admin, self.client)

    def peer_entry(self):
        for n in self.admin.neighbors():
            if n.address == e2e.PEER6:
                return n
        return None

    def scapy(self, frame):
        """Sends one frame (scapy expression) from the peer's side of the veth."""
        code = ("from scapy.all import *\n"
                "sendp(%s, iface='qs1', verbose=False)\n" % frame)
        subprocess.run(["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", code],
                       check=True, timeout=60)

    def advertise(self, mac, dst_ip, dst_mac):
        """An unsolicited advertisement for the peer's address (S=0, O=1), saying `mac`."""
        self.scapy("Ether(src='%s', dst='%s') / IPv6(src='%s', dst='%s', hlim=255) / "
                   "ICMPv6ND_NA(tgt='%s', R=0, S=0, O=1) / ICMPv6NDOptDstLLAddr(lladdr='%s')"
                   % (self.peer_mac, dst_mac, e2e.PEER6, dst_ip, e2e.PEER6, mac))

    def test_announcements_about_others_stay_the_kernels(self):
        # The stack has no entry for the peer yet: its announcement to all nodes is the
        # kernel's (it used to be taken from the kernel whatever its target).
        self.assertIsNone(self.peer_entry())
        before = self.admin.counters().xdp
        for _ in range(3):
            self.advertise(self.peer_mac, "ff02::1", "33:33:00:00:00:01")
        e2e.wait_until(lambda: self.admin.counters().xdp.pass_not_owned >=
                       before.pass_not_owned + 3, 10, "the announcements passed to the kernel")
        self.assertEqual(self.admin.counters().xdp.redirect, before.redirect)
        self.assertIsNone(self.peer_entry())

    def test_a_forged_advertisement_is_stale_and_the_peers_announcement_mends_it(self):
        peer = self.net.peer_socket(socket.AF_INET6, socket.SOCK_DGRAM)
        peer.settimeout(10)
        peer.bind((e2e.PEER6, 5000))
        try:
            with self.client.open("ipv6") as sock:
                # The stack resolves the kernel peer: its solicited answer makes it REACHABLE.
                sock.send(b"first", "[%s]:5000" % e2e.PEER6)
                self.assertEqual(peer.recvfrom(100)[0], b"first")
                e2e.wait_until(lambda: self.peer_entry() is not None and
                               self.peer_entry().state == "reachable", 10,
                               "the peer is reachable: %s" % self.peer_entry())
                self.assertEqual(self.peer_entry().mac, self.peer_mac)

                # Forged, to our address: the MAC moves, but the entry is only STALE.
                self.advertise(FORGED, e2e.STACK6, self.stack_mac)
                e2e.wait_until(lambda: self.peer_entry().mac == FORGED, 10,
                               "the forged advertisement arrived: %s" % self.peer_entry())
                self.assertEqual(self.peer_entry().state, "stale")

                # The real peer's announcement to all nodes reaches the stack and mends it.
                self.advertise(self.peer_mac, "ff02::1", "33:33:00:00:00:01")
                e2e.wait_until(lambda: self.peer_entry().mac == self.peer_mac, 10,
                               "the announcement to all nodes mended the entry: %s; "
                               "counters: %s" % (self.peer_entry(), self.admin.counters()))
                sock.send(b"again", "[%s]:5000" % e2e.PEER6)
                self.assertEqual(peer.recvfrom(100)[0], b"again")
        finally:
            peer.close()

    def test_a_solicitation_flood_leaves_a_live_flow_its_datagrams(self):
        """200,000 solicitations a second for a second, each from a new source of the /64 with
        a MAC of its own, and beside them a live flow of 2,000 numbered datagrams a second to a
        socket of the stack (wire_flood sends both). The senders are learned at the table's
        rate (1,024 a second and a burst of 1,024: far fewer than its 4,096 entries, which the
        flood would fill), the rest answered and counted; and nothing that reached the stack is
        dropped there (no parse error, no socket missing, no queue full): a datagram of the
        flow the socket did not get never reached the stack. How much of the flow a flood
        leaves is bench/ns_flood_bench.py's to measure: a frame lost on a full ring says the
        poll thread was late, which a test on a loaded machine cannot tell from a slow stack."""
        sock = self.client.open("ipv6", receive_queue_depth=16384)
        sock.bind("[%s]:7000" % e2e.STACK6)
        before = self.admin.counters()
        started = time.monotonic()
        run = subprocess.run(
            ["ip", "netns", "exec", self.net.ns, WIRE_FLOOD, "--interface=qs1",
             "--to_mac=" + self.stack_mac, "--target=" + e2e.STACK6, "--sources=fd00:8::/64",
             "--solicitations_per_second=200000", "--udp_from=" + e2e.PEER6,
             "--udp_port=7000", "--datagrams_per_second=2000", "--seconds=1"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        sent = json.loads(run.stdout)
        self.assertGreater(sent["datagrams"], 0)
        self.assertGreater(sent["solicitations"], 0)

        def frames_in():
            return sum(q.counters.rx_frames for q in self.admin.counters().queues)

        # Everything sent has reached the stack or been lost before it once the count of frames
        # received stops moving.
        last = -1
        while frames_in() != last:
            last = frames_in()
            settled = time.monotonic()
            time.sleep(0.5)
        after = self.admin.counters()
        stack_frames = last - sum(q.counters.rx_frames for q in before.queues)
        got = sock.get().counters.rx_datagrams
        learned = len(self.admin.neighbors())
        answered_only = (after.stack.neighbor_learn_rate_limited -
                         before.stack.neighbor_learn_rate_limited)
        print("flood: %d solicitations and %d datagrams in %.2f s; %d frames reached the "
              "stack; the flow's datagrams received: %d; neighbours %d, answered only %d"
              % (sent["solicitations"], sent["datagrams"], sent["seconds"], stack_frames, got,
                 learned, answered_only), file=sys.stderr)

        def dropped(c):
            return (c.stack.udp_no_socket + c.stack.udp_queue_full +
                    sum(c.stack.parse_errors.values()))
        self.assertEqual(dropped(after), dropped(before), "dropped in the stack: %s" % after)
        self.assertEqual(sock.get().counters.rx_dropped, 0)
        self.assertLessEqual(got, sent["datagrams"])
        # The bucket over the whole time frames could have come (from the flood's start until
        # they stopped), plus the peer's own entry.
        bound = 1024 * (settled - started) + 1024 + 1
        self.assertLessEqual(learned, bound)
        solicitations_in = stack_frames - got
        self.assertGreaterEqual(answered_only, solicitations_in - bound,
                                "solicitations neither learned nor counted: %s" % after)


# Run by Debian's python3 in the peer's namespace: sniffs the ARP requests from the stack's MAC
# (argv[1]), says "ready", and at a line on stdin prints the addresses they asked for.
ARP_SNIFFER = r"""
import json, sys, time
from scapy.all import ARP, AsyncSniffer
got = []
sniffer = AsyncSniffer(iface="qs1", filter="arp and ether src " + sys.argv[1], store=False,
                       prn=got.append)
sniffer.start()
time.sleep(1)  # the sniffer's socket is open once start() has returned; a margin for its filter
print("ready", flush=True)
sys.stdin.readline()
sniffer.stop()
print(json.dumps([p[ARP].pdst for p in got if p.haslayer(ARP) and p[ARP].op == 1]))
"""


class NeighborLimitFlagsTest(e2e.E2eTestCase):
    """--max_unresolved_neighbors and --neighbor_probes_per_second, lowered, hold on the wire
    (the defaults, 256 and 256 a second, would let all of these through)."""

    def setUp(self):
        self.net = netns.PeerNetwork("qs0", "qs1")
        self.daemon = self.admin = self.client = self.sniffer = None

    def tearDown(self):
        if self.sniffer is not None and self.sniffer.poll() is None:
            self.sniffer.kill()
            self.sniffer.wait(timeout=10)
        for c in (self.admin, self.client):
            try:
                if c is not None:
                    c.close()
            except Exception:  # the daemon may be gone already (finish says so)
                pass
        try:
            if self.daemon is not None:
                self.daemon.finish()
        finally:
            self.net.close()

    def start(self, *flags):
        """quadsockd with `flags`, a client of it, and its administration client."""
        self.daemon = e2e.Daemon(extra=flags)
        self.client = quadsock.Client(self.daemon.target, name="neighbour-limits")
        self.admin = quadsock.Client(
            "unix:/tmp/quadsock-e2e-%d-admin.sock" % os.getpid(), session=False)

    def send_to_strangers(self, count):
        """Sends a datagram to each of `count` random on-link addresses nobody holds."""
        targets = ["10.8.0.%d" % i for i in random.sample(range(100, 250), count)]
        with self.client.open("ipv4") as sock:
            for t in targets:
                sock.send(b"anyone?", "%s:9" % t)
        return targets

    def test_max_unresolved_neighbors(self):
        # The one client's peer may take them all here (its share is half by default).
        self.start("--max_unresolved_neighbors=4", "--max_unresolved_neighbors_per_peer=4")
        self.sniffer = subprocess.Popen(
            ["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", ARP_SNIFFER,
             mac_of("qs0")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.sniffer.stdout], [], [], 60)
        self.assertTrue(ready and self.sniffer.stdout.readline().strip() == "ready")
        targets = self.send_to_strangers(10)
        # Four resolutions start (the per-client cap, 64, follows the lower total), six
        # datagrams are refused one; the four are asked for again a second later.
        def refused():
            c = self.admin.counters().stack
            return c.neighbor_unresolved_full + c.neighbor_owner_unresolved_full
        e2e.wait_until(lambda: refused() == 6 and
                       self.admin.counters().stack.neighbor_probes >= 8, 20,
                       "six refused and two rounds of probes: %s" % self.admin.counters())
        entries = [n for n in self.admin.neighbors() if n.address in targets]
        self.assertLessEqual(len(entries), 4, entries)
        asked, _ = self.sniffer.communicate("stop\n", timeout=60)
        asked = json.loads(asked.strip().splitlines()[-1])
        self.assertEqual(len(set(asked)), 4, asked)
        self.assertLessEqual(set(asked), set(targets))
        self.assertEqual(refused(), 6)

    def test_neighbor_probes_per_second(self):
        # One probe a second (bursts of one): of ten new resolutions at once, some are refused
        # for the probe rate, unless sending them took about ten seconds.
        self.start("--neighbor_probes_per_second=1")
        self.send_to_strangers(10)
        e2e.wait_until(lambda: self.admin.counters().stack.neighbor_probes_rate_limited > 0,
                       10, "probes held back: %s" % self.admin.counters())
        c = self.admin.counters().stack
        self.assertEqual(c.neighbor_unresolved_full + c.neighbor_owner_unresolved_full, 0)


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    WIRE_FLOOD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
