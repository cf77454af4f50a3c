"""quadsockd's neighbour cache against frames from the wire (root): the real daemon on AF_XDP on
a veth pair, the kernel as its IPv6 peer, and scapy (an independent implementation of NDP)
forging what the peer's side of the wire says.

A forged unsolicited advertisement (S=0, O=1) may move the peer's MAC, but only to STALE (RFC
4861 7.2.5; it used to be REACHABLE), and the real peer's announcement to all nodes (ff02::1)
must reach the stack (the XDP program used to pass it to the kernel) and mend the entry, while an
announcement about an address the stack has no entry for stays the kernel's.

Usage (Bazel passes it): neighbor_e2e_test.py QUADSOCKD
"""

import json
import os
import socket
import subprocess
import sys
import unittest

import netns
import quadsock
import quadsockd_e2e_test as e2e

FORGED = "02:00:00:00:00:66"


def mac_of(dev, ns=None):
    cmd = ["ip"] + (["-n", ns] if ns else []) + ["-j", "link", "show", dev]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                     check=True).stdout)[0]["address"]


class NeighborE2eTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        netns.enter_private_namespace()

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
        for c in (self.admin, self.client):
            try:
                c.close()
            except Exception:  # the daemon may be gone already
                pass
        self.daemon.close()
        self.net.close()

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


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
