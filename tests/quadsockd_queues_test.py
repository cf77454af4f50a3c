"""quadsockd on a veth with four RX queues (root, private network namespaces): every queue is
served by default, a start that would leave queues unserved is refused, frames that reach a queue
without an AF_XDP socket are counted as such (redirect_no_xsk) when the operator allowed it, the
bind mode reported is the one the kernel bound, and with --vlan=0 tags stay visible to XDP.

The kernel's veth hands a frame to the RX queue of the number of the TX queue the sender's
kernel picked, by a hash of the flow: many sockets with different source ports spread over the
four queues.

Usage (Bazel passes it): quadsockd_queues_test.py QUADSOCKD ECHO_SERVER
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

import e2e
import netns
import quadsock
from e2e import PEER4, STACK4, wait_until, xdp_attached

QUEUES = 4
FLOWS = 200


def feature(dev, name):
    """What `ethtool -k` says of a feature: "on" or "off"."""
    out = subprocess.run(["ethtool", "-k", dev], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if line.startswith(name + ":"):
            return line.split()[1]
    raise AssertionError("ethtool -k %s names no %s:\n%s" % (dev, name, out))


def stripping(dev):
    """802.1Q and 802.1ad tag stripping on receive, as ethtool names them."""
    return feature(dev, "rx-vlan-offload"), feature(dev, "rx-vlan-stag-hw-parse")


def qs0_mac():
    return json.loads(subprocess.run(["ip", "-j", "link", "show", "qs0"], capture_output=True,
                                     text=True, check=True).stdout)[0]["address"]


class QueuesTest(e2e.E2eTestCase):

    def setUp(self):
        self.net = netns.PeerNetwork("qs0", "qs1", queues=QUEUES)
        self.net.peer_shell("ip addr add %s/24 dev qs1" % PEER4)
        self.daemon = None
        self.client = None
        self.peers = []

    def tearDown(self):
        for s in self.peers:
            s.close()
        try:
            if self.client is not None:
                self.client.close()
            if self.daemon is not None:
                self.daemon.finish()
        finally:
            self.net.close()

    def start(self, *extra):
        self.daemon = e2e.Daemon(extra)
        self.client = quadsock.Client(self.daemon.target, name="queues")

    def send_flows(self, port):
        """FLOWS kernel sockets, each its own flow (source port), send their number to `port`."""
        for i in range(FLOWS):
            s = self.net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.peers.append(s)
            s.sendto(b"%d" % i, (STACK4, port))

    def counters(self):
        c = self.client.counters()
        return c, {q.queue: q.counters for q in c.queues}

    def test_every_rx_queue_is_served_by_default_and_every_flow_arrives(self):
        self.start()
        iface = self.client.interfaces()[0]
        # veth has no zero-copy: every queue is bound in copy mode, as the kernel says.
        self.assertEqual([(q.queue, q.mode) for q in iface.queues],
                         [(q, "copy") for q in range(QUEUES)])
        self.assertEqual(iface.bind_mode, "copy")
        self.assertIn("AF_XDP copy, 4 queues", self.daemon.output())
        received = set()
        with self.client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            self.send_flows(4000)
            deadline = time.monotonic() + 30
            while len(received) < FLOWS and time.monotonic() < deadline:
                d = sock.receive_one(timeout=1)
                if d is not None:
                    received.add(int(d.payload))
        c, queues = self.counters()
        self.assertEqual(sorted(set(range(FLOWS)) - received), [],
                         "flows that did not arrive; counters: %s" % c)
        busy = [q for q, k in queues.items() if k.rx_frames > 0]
        self.assertGreater(len(busy), 1, "the flows all came in on one queue: %s" % queues)
        self.assertEqual(c.xdp.redirect_no_xsk, 0)

    def refused(self, *flags):
        """quadsockd's error output, when it refuses to start with these flags."""
        p = subprocess.run([e2e.QUADSOCKD, "--interface=qs0", "--address=%s/24" % STACK4,
                            "--listen=unix:/tmp/quadsock-queues-%d.sock" % os.getpid(),
                            "--admin_listen=", "--metrics_listen="] + list(flags),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertFalse(xdp_attached("qs0"), "a refused start left its XDP program")
        return p.stderr

    def test_zerocopy_is_refused_where_the_kernel_has_none(self):
        err = self.refused("--xdp_mode=zerocopy")
        self.assertIn("qs0 queue 0: zero-copy was asked for", err)
        self.assertIn("auto or copy mode would run", err)

    def test_fewer_queues_than_the_interface_has_are_refused(self):
        err = self.refused("--queues=1")
        for fix in ("has 4 RX queues", "queues 1-3", "--queues=4", "ethtool -L qs0 combined 1",
                    "ethtool -N qs0", "--allow_unserved_queues"):
            self.assertIn(fix, err)

    def test_frames_on_unserved_queues_are_counted_and_not_as_redirected(self):
        self.start("--queues=1", "--allow_unserved_queues")
        self.assertIn("1 of 4 RX queues", self.daemon.output())
        # ARP could land on an unserved queue too: the peer knows quadsock's MAC already (as
        # ntuple rules would steer ARP to a served queue).
        self.net.peer_shell("ip neigh replace %s lladdr %s dev qs1 nud permanent"
                            % (STACK4, qs0_mac()))
        received = set()
        with self.client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            self.send_flows(4000)

            def settled():
                while True:
                    d = sock.receive_one(timeout=0.2)
                    if d is None:
                        break
                    received.add(int(d.payload))
                return len(received) + self.client.counters().xdp.redirect_no_xsk >= FLOWS
            wait_until(settled, 30, "every flow reached the socket or counted in redirect_no_xsk")
        c, queues = self.counters()
        self.assertEqual(len(received) + c.xdp.redirect_no_xsk, FLOWS, str(c))
        self.assertGreater(c.xdp.redirect_no_xsk, 0, "no flow came in on queues 1-3")
        # Redirected means handed to queue 0's socket: what it received or dropped, no more.
        def balanced():
            c, queues = self.counters()
            return c.xdp.redirect == queues[0].rx_frames + queues[0].rx_dropped
        wait_until(balanced, 10, "xdp redirect equals what queue 0's socket took: %s"
                   % (self.counters(),))
        page = urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=10).read().decode()
        metric = re.search(r"^quadsock_xdp_redirect_no_xsk_total(\{[^}]*\})? (\d+)", page, re.M)
        self.assertIsNotNone(metric, "no quadsock_xdp_redirect_no_xsk_total on the page")
        self.assertEqual(int(metric.group(2)), c.xdp.redirect_no_xsk)

    def test_vlan_0_keeps_tags_visible_and_takes_no_tagged_frame(self):
        self.assertEqual(stripping("qs0"), ("on", "on"))  # veth strips both by default
        self.start()
        self.assertEqual(stripping("qs0"), ("off", "off"), "tag stripping left on")
        pass_not_owned = self.client.counters().xdp.pass_not_owned
        with self.client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            # The kernel here has no 802.1Q devices: scapy sends the tagged frames on qs1, then
            # an untagged one.
            send = ("from scapy.all import Ether, Dot1Q, Dot1AD, IP, UDP, sendp\n"
                    "def udp(p): return IP(src='%s', dst='%s') / UDP(sport=5000, dport=4000) / p\n"
                    "e = Ether(dst='%s')\n"
                    "sendp([e / Dot1Q(vlan=7) / udp(b'vlan 7'), e / Dot1AD(vlan=7) / udp(b'ad'),"
                    " e / udp(b'untagged')], iface='qs1', verbose=False)\n"
                    % (PEER4, STACK4, qs0_mac()))
            subprocess.run(["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", send],
                           check=True, timeout=60)
            d = sock.receive_one(timeout=10)
            self.assertIsNotNone(d, "the untagged datagram did not arrive")
            self.assertEqual(d.payload, b"untagged")
            self.assertIsNone(sock.receive_one(timeout=0.5))
        self.assertGreaterEqual(self.client.counters().xdp.pass_not_owned, pass_not_owned + 1)
        self.assertEqual(self.daemon.stop(signal.SIGTERM), 0, self.daemon.output())
        self.assertEqual(stripping("qs0"), ("on", "on"), "not turned back on at a clean exit")


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
