"""Fair shares (root): attacks on a shared quadsockd by one tenant, each performed against the
real daemon, and the other tenant shown unaffected (README's "Security model" lists each).

Usage (Bazel passes it): fair_shares_e2e_test.py QUADSOCKD
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import grpc

import e2e
import quadsock
from e2e import wait_until


def unix_listening(path):
    """Whether a Unix stream socket bound to `path` listens (/proc/net/unix: __SO_ACCEPTCON)."""
    with open("/proc/net/unix") as table:
        next(table)
        for line in table:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == path and int(fields[3], 16) & 0x10000:
                return True
    return False


class TcpTenantsTest(e2e.E2eTestCase):
    """Tenants as TCP peers (no mTLS: each counted by its host, an IPv6 one by its /64): an
    attacker at SITE, any number of its addresses, and a victim at OTHER."""

    SITE = "fd00:99::"          # the attacker's /64: any number of addresses in it
    OTHER = "fd00:98::5"        # another site's client
    LISTEN = "fd00:99::1"
    FLAGS = []                  # the test's own

    def setUp(self):
        self.net = e2e.peer_network()
        addresses = [self.LISTEN] + [self.SITE + str(i) for i in range(11, 15)] + [self.OTHER]
        for a in addresses:
            subprocess.run(["ip", "addr", "add", a + "/64", "dev", "lo", "nodad"], check=True)
        self.relays, self.clients = [], []
        self.port = 50061
        # A TCP listener has TLS (no client certificates here: --allow_unauthenticated_tcp).
        # The clients reach it through Unix relays, as "localhost".
        self.tmp = tempfile.mkdtemp()
        cert, key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=quadsockd",
                        "-addext", "subjectAltName=DNS:localhost"],
                       check=True, capture_output=True)
        with open(cert, "rb") as f:
            self.credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        self.daemon = e2e.Daemon(["--listen=[%s]:%d" % (self.LISTEN, self.port),
                                  "--tls_cert=" + cert, "--tls_key=" + key,
                                  "--allow_unauthenticated_tcp"] + self.FLAGS,
                                 target=self.relay_from(self.OTHER),
                                 credentials=self.credentials)

    def tearDown(self):
        for c in self.clients:
            try:
                c.close()
            except Exception:  # an attacker's client that was refused
                pass
        try:
            self.daemon.finish()
        finally:
            for r in self.relays:
                r.kill()
                r.wait()
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.net.close()

    def relay_from(self, source):
        """A Unix socket whose connections reach quadsockd's TCP listener from `source` (a
        socat relay: gRPC cannot pick its source address); its gRPC target."""
        path = os.path.join(self.tmp, "relay-%d.sock" % len(self.relays))
        relay = subprocess.Popen(
            ["socat", "UNIX-LISTEN:%s,fork" % path,
             "TCP6:[%s]:%d,bind=[%s]" % (self.LISTEN, self.port, source)],
            stderr=subprocess.DEVNULL)
        self.relays.append(relay)
        # Listening, not only bound: a connection between socat's bind and its listen is
        # refused (seen on a loaded machine).
        wait_until(lambda: unix_listening(path), 10, "socat listens on " + path)
        return "unix:" + path

    def client_from(self, source):
        """A client whose connection to quadsockd comes from `source`."""
        client = quadsock.Client(self.relay_from(source), name="from " + source,
                                 credentials=self.credentials)
        self.clients.append(client)
        return client



class TcpPeersTest(TcpTenantsTest):
    """One site's many addresses are one peer."""

    FLAGS = ["--max_sessions_per_peer=2"]

    def test_one_ipv6_site_is_one_peer_however_many_addresses_it_uses(self):
        first = self.client_from(self.SITE + "11")
        second = self.client_from(self.SITE + "12")
        first.open("ipv4")
        second.open("ipv4")
        # A third address of the same /64: the peer's third session, over its share.
        with self.assertRaises(quadsock.QuadsockError) as refused:
            self.client_from(self.SITE + "13").open("ipv4")
        self.assertIn("RESOURCE_EXHAUSTED", str(refused.exception))
        # Another site is another peer: its sessions are untouched.
        self.client_from(self.OTHER).open("ipv4")


class ReceiveBudgetTest(TcpTenantsTest):
    """One peer's sockets take at most its share of the receive budget (half by default): the
    rest stays the others', for their Opens and their datagrams."""

    FLAGS = ["--max_receive_mib=16"]

    def test_a_peer_that_takes_its_share_leaves_the_rest_to_the_others(self):
        attacker = self.client_from(self.SITE + "11")
        # Queues of 65,536 datagrams: 1 MiB of cells each, taken at Open.
        opened = 0
        with self.assertRaises(quadsock.QuadsockError) as refused:
            for _ in range(32):
                attacker.open("ipv4", receive_queue_depth=65536)
                opened += 1
        self.assertIn("RESOURCE_EXHAUSTED", str(refused.exception))
        self.assertIn("--max_receive_mib_per_peer", str(refused.exception))
        self.assertGreater(opened, 0)
        self.assertLessEqual(opened, 8)  # its share: 8 of the 16 MiB
        # The victim opens as deep a queue, and its datagrams arrive, every one.
        victim = self.client_from(self.OTHER)
        sock = victim.open("ipv4", receive_queue_depth=65536)
        sock.bind("%s:4000" % e2e.STACK4)
        peer = self.net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for i in range(100):
                peer.sendto(b"victim %d" % i, (e2e.STACK4, 4000))
            got = [d.payload for d in sock.receive(timeout=5.0, count=100)]
        finally:
            peer.close()
        self.assertEqual(sorted(got), sorted(b"victim %d" % i for i in range(100)))


class ChannelBudgetTest(TcpTenantsTest):
    """One peer's sessions' data channels take at most its share of --max_all_channels_mib
    (half by default): four sessions of one client cannot take it all."""

    FLAGS = ["--max_all_channels_mib=64"]

    def test_a_peers_sessions_cannot_take_every_channel(self):
        # Rings of 8,192 slots: some 26 MiB a channel (two rings, 1,600 bytes a slot).
        attacker = [self.client_from(self.SITE + str(i)) for i in (11, 12, 13)]
        victim = self.client_from(self.OTHER)
        for c in attacker + [victim]:
            c.open("ipv4")  # a socket to put on the channel: its creation waits for the attach
        channels = []
        try:
            channels.append(attacker[0].channel(ring_slots=8192))
            with self.assertRaises(quadsock.QuadsockError) as refused:
                for c in attacker[1:]:
                    channels.append(c.channel(ring_slots=8192))
            self.assertIn("RESOURCE_EXHAUSTED", str(refused.exception))
            self.assertIn("--max_channel_mib_per_peer", str(refused.exception))
            # The rest is the others'.
            channels.append(victim.channel(ring_slots=8192))
        finally:
            for c in channels:
                c.close()


class NeighborsTest(TcpTenantsTest):
    """One peer's sessions together have at most their share (half by default) of the
    neighbours being resolved at once: sending to many made-up on-link addresses from several
    sessions leaves the rest to the others."""

    FLAGS = ["--max_unresolved_neighbors=16", "--max_unresolved_neighbors_per_client=8"]

    def test_a_peers_sessions_cannot_take_every_unresolved_entry(self):
        # Two sessions of one client, each to eight addresses no host has: their peer's share is
        # eight (half of 16), so the second session's are refused.
        attacker = [self.client_from(self.SITE + str(i)) for i in (11, 12)]
        for n, client in enumerate(attacker):
            sock = client.open("ipv4")
            for host in range(8):
                sock.send(b"x", "10.8.0.%d:9" % (100 + 10 * n + host))
        refused = self.client_from(self.OTHER).counters().stack.neighbor_owner_unresolved_full
        self.assertEqual(refused, 8)
        # Another client's datagram to a neighbour not yet resolved (the peer host) arrives.
        victim = self.client_from(self.OTHER)
        sock = victim.open("ipv4")
        peer = self.net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            peer.bind((e2e.PEER4, 5000))
            peer.settimeout(5)
            sock.send(b"victim", "%s:5000" % e2e.PEER4)
            self.assertEqual(peer.recvfrom(100)[0], b"victim")
        finally:
            peer.close()


class ThreadsTest(e2e.E2eTestCase):
    """What holds one of gRPC's threads counts against a per-peer limit, or is not served on
    the clients' listener at all."""

    def setUp(self):
        self.net = e2e.peer_network()
        self.daemon = e2e.Daemon(["--max_grpc_threads=16"])
        self.held = []

    def tearDown(self):
        for channel, release in self.held:
            release.set()
            channel.close()
        try:
            self.daemon.finish()
        finally:
            self.net.close()

    def idle_streams(self, method, count):
        """`count` streams of `method` (a path) that send nothing until the test ends, each on a
        connection of its own; their calls."""
        calls = []
        for _ in range(count):
            channel = grpc.insecure_channel(self.daemon.target)
            release = threading.Event()

            def idle(release=release):
                release.wait()
                return
                yield  # a generator: it sends nothing until released

            call = channel.stream_stream(method)(idle(), timeout=60)
            self.held.append((channel, release))
            calls.append(call)
        return calls

    def test_idle_streams_no_session_counts_cannot_take_the_threads(self):
        # Server reflection and a made-up method need no session: forty idle streams of each,
        # each of which would hold one of gRPC's threads (there are 16).
        calls = (self.idle_streams("/grpc.reflection.v1alpha.ServerReflection/"
                                   "ServerReflectionInfo", 40) +
                 self.idle_streams("/no.Such/Method", 40))
        # Another tenant's calls are answered.
        with quadsock.Client(self.daemon.target, name="victim") as victim:
            victim.open("ipv4")
            self.assertEqual(victim.health(), "SERVING")
        # Each stream was refused at once: no such service on the clients' listener.
        for call in calls:
            self.assertEqual(call.code(), grpc.StatusCode.UNIMPLEMENTED)
        # The administration listener has reflection.
        with quadsock.Client(self.daemon.admin_target, session=False) as admin:
            self.assertIn("quadsock.v1.AdminService", admin.services())


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
