"""quadsockd and what happens to its interface under it (root): the real daemon on a veth pair,
the interface set down and up again (and its peer, for no carrier), its MTU raised and lowered,
and the interface deleted, while quadsockd runs. Down and up, and an MTU raised, are logged and
counted, and quadsockd serves on (a datagram each way after, and the frame accounting at the
end); an MTU below the one it started with, or the interface deleted, stops it cleanly with
exit 1, saying why.

Usage (Bazel passes it): interface_e2e_test.py QUADSOCKD
"""

import os
import socket
import subprocess
import sys
import unittest

import e2e
import quadsock


class InterfaceE2eTest(e2e.E2eTestCase):

    def setUp(self):
        self.net = e2e.peer_network()
        self.daemon = e2e.Daemon()
        self.client = quadsock.Client(self.daemon.target, name="interface")

    def tearDown(self):
        self.end(self.client)

    def exchange(self):
        """A datagram from the kernel peer to a socket of quadsockd's, and one back."""
        peer = self.net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.settimeout(5)
        peer.bind((e2e.PEER4, 5000))
        try:
            with self.client.open("ipv4") as sock:
                sock.bind("%s:4000" % e2e.STACK4)
                peer.sendto(b"there?", (e2e.STACK4, 4000))
                d = sock.receive_one(timeout=5)
                self.assertIsNotNone(d, "quadsockd received nothing")
                sock.send(b"here", d.peer)
                self.assertEqual(peer.recvfrom(100)[0], b"here")
        finally:
            peer.close()

    def admin_counters(self):
        with quadsock.Client(self.daemon.admin_target, session=False) as admin:
            return admin.counters()

    def test_the_interface_down_and_up_again(self):
        # Set down here, then no carrier (the peer's end down): each logged and counted once,
        # and datagrams flow again once it is up (checked to the end by finish()).
        for down, up, why in (("ip link set qs0 down", "ip link set qs0 up", "set down"),
                              (None, None, "no carrier")):
            if down:
                subprocess.run(down.split(), check=True)
            else:
                self.net.peer_shell("ip link set qs1 down")
            e2e.wait_until(lambda: "qs0 is down (%s)" % why in self.daemon.output(), 10,
                           "quadsockd says qs0 is down (%s)" % why)
            if down:
                # What quadsockd sends meanwhile (the first datagram to the peer: its ARP
                # request goes at once): the kernel refuses the TX wake-up; the frame's UMEM
                # buffer comes back whether it was dropped or sent later (finish() checks the
                # accounting).
                with self.client.open("ipv4") as s:
                    s.send(b"into a link that is down", "%s:5000" % e2e.PEER4)
                e2e.wait_until(lambda: sum(q.counters.tx_kicks_failed
                                           for q in self.admin_counters().queues) > 0, 10,
                               "a refused TX wake-up is counted: %s" % self.admin_counters())
            if up:
                subprocess.run(up.split(), check=True)
            else:
                self.net.peer_shell("ip link set qs1 up")
            e2e.wait_until(lambda: self.daemon.output().count("qs0 is up again") ==
                           (1 if down else 2), 10, "quadsockd says qs0 is up again")
        self.assertEqual(self.admin_counters().interface_down, 2)
        self.exchange()

    def test_an_mtu_raised_is_logged_and_one_lowered_stops_quadsockd(self):
        subprocess.run("ip link set qs0 mtu 1600".split(), check=True)
        e2e.wait_until(lambda: "qs0's MTU changed from 1500 to 1600: quadsockd keeps to 1500" in
                       self.daemon.output(), 10, "quadsockd says the MTU was raised")
        self.assertEqual(self.admin_counters().interface_mtu_changes, 1)
        self.exchange()  # at 1500, as before
        subprocess.run("ip link set qs0 mtu 1400".split(), check=True)
        self.assertEqual(self.daemon.wait_exit(20), 1, self.daemon.output())
        self.assertIn("qs0's MTU changed from 1600 to 1400, below the 1500 quadsockd runs with: "
                      "stopping (exit 1", self.daemon.output())

    def test_the_interface_deleted_stops_quadsockd(self):
        subprocess.run("ip link del qs0".split(), check=True)
        self.assertEqual(self.daemon.wait_exit(20), 1, self.daemon.output())
        out = self.daemon.output()
        self.assertRegex(out, r"qs0 \(index \d+\) is gone: stopping \(exit 1")
        self.assertIn("quadsockd: stopped in", out)


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
