"""quadsockd end to end (root): the real daemon on AF_XDP on a veth pair in private network
namespaces, driven over gRPC by the Python client (an implementation in another language than
the server), exchanging datagrams with the kernel's own UDP sockets on the peer side.

Usage (Bazel passes these): quadsockd_e2e_test.py QUADSOCKD ECHO_SERVER
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc

import e2e
import prometheus_page
import quadsock
from e2e import (Daemon, E2eTestCase, PEER4, PEER6, STACK4, STACK6, peer_network,
                 veth_drops, vlan_stripping, wait_until, xdp_attached)
from quadsock.v1 import socket_pb2, socket_pb2_grpc

ECHO_SERVER = None


def udp4_checksum(source, destination, segment):
    """The UDP checksum over IPv4 (RFC 768) of a segment whose checksum field is zero."""
    data = (socket.inet_aton(source) + socket.inet_aton(destination)
            + struct.pack("!BBH", 0, socket.IPPROTO_UDP, len(segment)) + segment)
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return (~total & 0xffff) or 0xffff


# A command run as nobody: setpriv changes the user, not a preexec_fn, so that Python can vfork.
# A fork of this process, with gRPC's threads in it, runs gRPC's fork handler, which waits for
# gRPC's thread pool to go idle: in one run it waited until the test timed out (5 minutes).
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


# A relay of Unix-socket connections (stdlib only, so that nobody can run it): listens on
# argv[1], connects each client to argv[2], says "ready".
RELAY = """
import socket, sys, threading
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(16)
print("ready", flush=True)
while True:
    client, _ = server.accept()
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.connect(sys.argv[2])
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
"""


class QuadsockdTest(E2eTestCase):

    def setUp(self):
        self.net = peer_network()
        self.daemon = Daemon()
        self.client = quadsock.Client(self.daemon.target, name="e2e")
        self.peers = []

    def tearDown(self):
        for s in self.peers:
            s.close()
        self.end(self.client)

    def peer_udp(self, family, address, port):
        s = self.net.peer_socket(family, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.bind((address, port))
        self.peers.append(s)
        return s

    def exchange(self, family, stack_ip, peer_ip):
        fam = socket.AF_INET if family == "ipv4" else socket.AF_INET6
        peer = self.peer_udp(fam, peer_ip, 5000)
        wildcard = "0.0.0.0:4000" if family == "ipv4" else "[::]:4000"
        with self.client.open(family) as sock:
            sock.bind(wildcard)
            peer.sendto(b"hello from the kernel", (stack_ip, 4000))
            d = sock.receive_one(timeout=5)
            self.assertIsNotNone(d, "quadsockd received nothing")
            self.assertEqual(d.payload, b"hello from the kernel")
            sock.send(b"hello from quadsock", d.peer)
            data, src = peer.recvfrom(2048)
            self.assertEqual((data, src[0]), (b"hello from quadsock", stack_ip))
            sock.connect((peer_ip, 5000))
            peer.connect((stack_ip, 4000))
            sock.send(b"connected")
            self.assertEqual(peer.recv(2048), b"connected")
            big = b"m" * (1500 - (28 if family == "ipv4" else 48))
            peer.send(big)
            self.assertEqual(sock.receive_one(timeout=5).payload, big)
            self.assertTrue(sock.get().in_hash4)
            # Queued datagrams read one at a time: each receive takes only its own.
            for p in (b"q1", b"q2", b"q3"):
                peer.send(p)
            wait_until(lambda: sock.get().counters.queued == 3, 10, "three datagrams are queued")
            for p in (b"q1", b"q2", b"q3"):
                d = sock.receive_one(timeout=2)
                self.assertIsNotNone(d, f"{p!r} was lost")
                self.assertEqual(d.payload, p)

    def test_udp_with_kernel_peer_over_ipv4(self):
        self.exchange("ipv4", STACK4, PEER4)

    def test_udp_with_kernel_peer_over_ipv6(self):
        self.exchange("ipv6", STACK6, PEER6)

    def test_a_closed_kernel_port_fails_the_next_send(self):
        # The kernel answers with port unreachable; the connected socket's next send says so,
        # once, as send() on a connected kernel socket would (ECONNREFUSED).
        with self.client.open("ipv4") as sock:
            sock.connect((PEER4, 5997))
            sock.send(b"anyone?")
            deadline = time.monotonic() + 5
            while not sock.get().pending_error and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(sock.get().pending_error, "ECONNREFUSED (ICMP port unreachable)")
            with self.assertRaises(quadsock.QuadsockError) as refused:
                sock.send(b"still there?")
            self.assertEqual(refused.exception.code, grpc.StatusCode.ABORTED)
            self.assertIn("ECONNREFUSED", refused.exception.message)
            self.assertEqual(sock.get().counters.icmp_errors, 1)
            sock.send(b"once more")  # reported once: this one goes

    def test_a_send_batch_that_fails_part_way_says_how_many_went(self):
        # A retry sends only the rest: the count is a field, not only words in the message.
        peer = self.peer_udp(socket.AF_INET, PEER4, 5003)
        with self.client.open("ipv4") as sock:
            sock.bind((STACK4, 0))
            with self.assertRaises(quadsock.PartialSendError) as failed:
                sock.send_batch([(b"one", (PEER4, 5003)), (b"two", (PEER4, 5003)), b"nowhere"])
            self.assertEqual(failed.exception.queued, 2)
            self.assertEqual(failed.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
            self.assertEqual([peer.recv(2048), peer.recv(2048)], [b"one", b"two"])

    def test_exchange_both_ways_on_one_stream(self):
        peer = self.peer_udp(socket.AF_INET, PEER4, 5002)
        with self.client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            with sock.exchange() as x:
                x.send([(b"out%d" % i, (PEER4, 5002)) for i in range(3)])
                for i in range(3):
                    self.assertEqual(peer.recvfrom(2048)[0], b"out%d" % i)
                for i in range(3):
                    peer.sendto(b"in%d" % i, (STACK4, 4000))
                got = []
                for event in x.events(timeout=3):
                    self.assertIsNone(event.send_failure)
                    got += [(d.payload, d.peer) for d in event.received]
                    if len(got) == 3:
                        break
                self.assertEqual(got, [(b"in%d" % i, "%s:5002" % PEER4) for i in range(3)])
                # The second datagram has no destination (not connected): one went, then why.
                x.send([(b"ok", (PEER4, 5002)), b"nowhere"])
                event = next(x.events(timeout=3))
                self.assertEqual(event.send_failure.queued, 1)
                self.assertEqual(event.send_failure.code, grpc.StatusCode.FAILED_PRECONDITION)
                self.assertEqual(peer.recvfrom(2048)[0], b"ok")
                # Nothing more about that send: the next event is the next datagram in.
                peer.sendto(b"after", (STACK4, 4000))
                event = next(x.events(timeout=3))
                self.assertIsNone(event.send_failure)
                self.assertEqual([d.payload for d in event.received], [b"after"])
                sock.close()  # ends the stream: the socket is gone
                with self.assertRaises(quadsock.QuadsockError) as e:
                    list(x.events(timeout=3))
                self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_rehash_while_datagrams_flow_loses_none_after_the_switch(self):
        peer = self.peer_udp(socket.AF_INET, PEER4, 5001)
        after = 1000  # datagrams sent to the new port once Rehash returned
        switched = threading.Event()
        first_to_new_port = []
        last = []
        with self.client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            sock.connect((PEER4, 5001))
            received = set()

            def receive():
                for d in sock.receive(timeout=30):
                    received.add(int(d.payload))
                    if last and last[0] in received:
                        return
            reader = threading.Thread(target=receive)
            reader.start()

            def send():
                i = 0
                while not first_to_new_port or i < first_to_new_port[0] + after:
                    if switched.is_set() and not first_to_new_port:
                        first_to_new_port.append(i)
                    peer.sendto(b"%d" % i, (STACK4, 4001 if first_to_new_port else 4000))
                    if i % 50 == 0:
                        time.sleep(0.002)
                    i += 1
                last.append(i - 1)
            before = self.loss_counters(sock)
            sender = threading.Thread(target=send)
            sender.start()
            # Datagrams flow to the old port (the Receive stream is up and they arrive) ...
            wait_until(lambda: len(received) >= 10, 10, "datagrams arrive at the old port")
            # ... when address and port change at once; from the moment Rehash returns, the
            # peer aims at the new port, and every datagram it sends there must arrive.
            self.assertEqual(sock.rehash(address=STACK4, port=4001), "%s:4001" % STACK4)
            switched.set()
            sender.join()
            reader.join()
            lost = sorted(set(range(first_to_new_port[0], last[0] + 1)) - received)
            if lost:
                # On a loaded machine, frames may be dropped before the stack (the veth, the
                # AF_XDP rings) or counted as dropped by it (a full receive queue): those are
                # not losses of the rehash. Lost beyond all counted drops is.
                after_counts = self.loss_counters(sock)
                dropped = {k: after_counts[k] - before[k] for k in before}
                self.assertLessEqual(len(lost), sum(dropped.values()),
                                     "datagrams lost after the switch, more than were counted "
                                     "as dropped (%s): %s" % (dropped, lost))

    def loss_counters(self, sock):
        """Every count of a datagram dropped on its way from the peer to the socket's reader."""
        c = self.client.counters()
        qs0_rx, _ = veth_drops("qs0")
        _, qs1_tx = veth_drops("qs1", self.net.ns)
        return {
            "veth qs1 tx dropped": qs1_tx,
            "veth qs0 rx dropped": qs0_rx,
            "AF_XDP rx dropped": sum(q.counters.rx_dropped for q in c.queues),
            "receive budget full": c.stack.receive_budget_full,
            "socket rx dropped": sock.get().counters.rx_dropped,
        }

    def test_health_reflection_and_metrics(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("quadsock.v1.SocketService"), "SERVING")
        with quadsock.Client(self.daemon.admin_target, session=False) as admin:
            services = admin.services()
        for name in ("quadsock.v1.AdminService", "grpc.health.v1.Health"):
            self.assertIn(name, services)
        iface = self.client.interfaces()[0]
        self.assertEqual((iface.name, iface.bind_mode), ("qs0", "copy"))
        self.assertIn(iface.xdp_mode, ("native", "generic"))
        self.assertEqual(self.net.peer_shell("ping -c 1 -W 2 %s >/dev/null" % STACK4), 0)
        text = self.scrape()
        self.assertIn('quadsock_icmp_echo_replies_total{interface="qs0"} 1\n', text)
        self.assertIn("quadsock_xdp_redirect_total", text)

    def scrape(self, timeout=10):
        return urllib.request.urlopen("http://127.0.0.1:9464/metrics",
                                      timeout=timeout).read().decode()

    def test_metrics_follow_prometheus_conventions_and_the_dashboard_reads_them(self):
        # Traffic first, so that the page holds moving counters, not only zeros.
        self.assertEqual(self.net.peer_shell("ping -c 1 -W 2 %s >/dev/null" % STACK4), 0)
        families = prometheus_page.check_page(self, self.scrape(), interface="qs0")
        self.assertGreaterEqual(families["quadsock_rx_frames"].samples[0].value, 1)
        self.assertIn("quadsock_table_lookup_chain_steps", families)  # the histogram
        exported = prometheus_page.sample_names(families)
        names = prometheus_page.dashboard_metric_names(prometheus_page.load_dashboard())
        self.assertGreaterEqual(len(names), 20, names)
        missing = {n: panels for n, panels in names.items() if n not in exported}
        self.assertEqual(missing, {}, "the dashboard queries metrics quadsockd does not export")

    def test_idle_connections_do_not_stall_a_scrape(self):
        # Each of these would hold a one-at-a-time endpoint for its whole timeout (5 s): the
        # scrape behind three of them would need 15 s, more than it is given.
        idle = [socket.create_connection(("127.0.0.1", 9464), timeout=5) for _ in range(3)]
        try:
            for _ in range(3):
                self.assertIn("quadsock_build_info", self.scrape(timeout=10))
        finally:
            for s in idle:
                s.close()

    def test_sigterm_drains_streams_and_detaches(self):
        # A Receive stream and an Exchange stream, each seen working before the signal.
        peer = self.peer_udp(socket.AF_INET, PEER4, 5003)
        sock = self.client.open("ipv4")
        sock.bind("0.0.0.0:4000")
        other = self.client.open("ipv4")
        other.bind("0.0.0.0:4002")
        errors = []
        up = threading.Event()

        def receive():
            try:
                for _ in sock.receive(timeout=30):
                    up.set()
            except quadsock.QuadsockError as e:
                errors.append(e.code)
        reader = threading.Thread(target=receive)
        reader.start()
        peer.sendto(b"up?", (STACK4, 4000))
        self.assertTrue(up.wait(10), "the Receive stream got nothing")
        with other.exchange() as x:
            x.send([(b"out", (PEER4, 5003))])
            self.assertEqual(peer.recvfrom(2048)[0], b"out")
            self.assertTrue(xdp_attached("qs0"))
            started = time.time()
            self.assertEqual(self.daemon.stop(signal.SIGTERM, timeout=5), 0, self.daemon.output())
            self.assertLess(time.time() - started, 5)
            reader.join(timeout=5)
            self.assertEqual(errors, [grpc.StatusCode.UNAVAILABLE])
            with self.assertRaises(quadsock.QuadsockError) as ended:
                list(x.events(timeout=5))
            self.assertEqual(ended.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertFalse(xdp_attached("qs0"), "the XDP program outlived quadsockd")

    def test_sigkill_leaves_no_program_and_a_restart_works(self):
        self.assertTrue(xdp_attached("qs0"))
        self.daemon.stop(signal.SIGKILL)
        deadline = time.time() + 5
        while xdp_attached("qs0") and time.time() < deadline:
            time.sleep(0.1)
        self.assertFalse(xdp_attached("qs0"), "an XDP program outlived quadsockd")
        self.daemon.close()
        self.daemon = Daemon()  # starts cleanly again on the same interface
        with quadsock.Client(self.daemon.target) as c:
            self.assertEqual(c.health(), "SERVING")

    def test_flags_from_a_flagfile(self):
        # Both addresses on the file's one --address line: each family answers.
        self.daemon.close()
        try:
            self.client.close()
        except quadsock.QuadsockError:  # its daemon is gone
            pass
        self.daemon = Daemon(flagfile=True)
        self.client = quadsock.Client(self.daemon.target, name="e2e")
        self.exchange("ipv4", STACK4, PEER4)
        self.exchange("ipv6", STACK6, PEER6)

    def test_spinning_poll_threads_carry_traffic_and_then_sleep(self):
        # --poll_spin_us over real AF_XDP: the startup line says so, datagrams go both ways, and
        # once the spin after the last frame is over the poll threads sleep (no CPU).
        self.restart("--poll_spin_us=200")
        self.assertIn("poll threads spin 200us", self.daemon.output())
        self.exchange("ipv4", STACK4, PEER4)
        self.exchange("ipv6", STACK6, PEER6)

        def cpu_seconds():
            with open("/proc/%d/stat" % self.daemon.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        time.sleep(0.1)
        before = cpu_seconds()
        time.sleep(1)
        self.assertLess(cpu_seconds() - before, 0.2, "quadsockd kept spinning with no frames")

    def test_echo_server_example(self):
        echo = subprocess.Popen([ECHO_SERVER, "--target", self.daemon.target, "--port", "7",
                                 "--seconds", "5"], stdout=subprocess.PIPE, text=True)
        self.assertIn("echoing on", echo.stdout.readline())
        for family, addr in ((socket.AF_INET, STACK4), (socket.AF_INET6, STACK6)):
            peer = self.peer_udp(family, PEER4 if family == socket.AF_INET else PEER6, 0)
            peer.sendto(b"echo me", (addr, 7))
            self.assertEqual(peer.recv(2048), b"echo me")
        echo.wait(timeout=10)
        self.assertEqual(echo.returncode, 0)
        with echo.stdout:
            self.assertIn("echoed 2 datagrams", echo.stdout.read())

    def test_a_client_that_goes_away_leaves_no_sockets(self):
        other = quadsock.Client(self.daemon.target, name="leaver")
        s = other.open("ipv4")
        s.bind("0.0.0.0:4100")
        self.assertEqual(self.client.counters().sockets, 1)
        other._holder.cancel()  # the client vanishes without saying goodbye
        deadline = time.time() + 5
        while self.client.counters().sockets and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.client.counters().sockets, 0)


    def test_a_bad_udp_checksum_is_said_once_with_the_hint(self):
        # What a kernel peer whose checksums were left to offload sends (the UDP checksum not
        # finished), made on purpose with a raw socket: any wrong checksum but 0 (none).
        raw = self.net.peer_socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        self.peers.append(raw)
        payload = b"checksum left to offload"
        header = struct.pack("!HHHH", 5000, 4000, 8 + len(payload), 0)
        good = udp4_checksum(PEER4, STACK4, header + payload)
        bad = header[:6] + struct.pack("!H", good ^ 0x00ff) + payload

        def bad_checksums():
            return self.client.counters().stack.parse_errors["bad_udp_checksum"]

        def hints():
            return [line for line in self.daemon.output().splitlines()
                    if "with a bad UDP checksum" in line]

        self.assertEqual(hints(), [])
        for _ in range(3):
            raw.sendto(bad, (STACK4, 0))
        wait_until(lambda: bad_checksums() == 3, 10, "3 datagrams are dropped for their checksum")
        wait_until(hints, 10, "the log says so; it has:\n" + self.daemon.output())
        first = hints()
        self.assertEqual(len(first), 1, first)
        self.assertIn("parse_errors.bad_udp_checksum", first[0])
        self.assertIn("ethtool -K <peer> tx off", first[0])
        # More within the minute are counted, not said again until quadsockd's last look as it
        # stops. The witness that a look came between, and held them back: the control plane
        # looks at the counters, then at the interface, once a second; two MTU changes, each
        # seen after the one before, mean that a whole look came after the 6 drops.
        for _ in range(3):
            raw.sendto(bad, (STACK4, 0))
        wait_until(lambda: bad_checksums() == 6, 10, "3 more are dropped")
        for seen, mtu in enumerate((1600, 1700), 1):
            subprocess.run(["ip", "link", "set", "qs0", "mtu", str(mtu)], check=True)
            wait_until(lambda: self.client.counters().interface_mtu_changes == seen, 10,
                       "quadsockd sees the MTU of %d" % mtu)
        stopped = self.daemon
        self.restart()
        lines = stopped.output().splitlines()
        said = [i for i, line in enumerate(lines) if "with a bad UDP checksum" in line]
        stopping = [i for i, line in enumerate(lines) if line.endswith(": stopping")]
        self.assertEqual([lines[i] for i in said[:1]], first)
        self.assertEqual(len(said), 2, "\n".join(lines))
        self.assertIn("3 datagrams more with a bad UDP checksum", lines[said[1]])
        self.assertIn("(6 in all)", lines[said[1]])
        self.assertEqual(len(stopping), 1, "\n".join(lines))
        self.assertGreater(said[1], stopping[0], "said before quadsockd stopped:\n"
                           + "\n".join(lines))

    def restart(self, *extra):
        """quadsockd again, with these flags added; self.client is a session with it."""
        try:
            self.client.close()
        except quadsock.QuadsockError:
            pass
        # A clean exit, which gives back what it changed on qs0 (tag stripping), as a SIGKILL
        # would not; checked as at a test's end.
        self.daemon.finish()
        self.daemon = Daemon(extra)
        self.client = quadsock.Client(self.daemon.target, name="e2e")

    def test_max_sockets_bounds_every_client_together(self):
        # Both clients are root's, one peer: its limit over the total, so the total is what holds.
        self.restart("--max_sockets=2", "--max_sockets_per_client=2", "--max_sockets_per_peer=3")
        other = quadsock.Client(self.daemon.target, name="other")
        try:
            first, second = self.client.open("ipv4"), other.open("ipv6")
            with self.assertRaises(quadsock.QuadsockError) as full:
                self.client.open("ipv4")
            self.assertEqual(full.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn("2 sockets", full.exception.message)
            second.close()  # room again
            self.client.open("ipv4").close()
            first.close()
        finally:
            other.close()

    def test_max_grpc_threads_refuses_calls_beyond_them(self):
        # Each open stream holds a thread: with few threads, more streams are refused, and once
        # they end, calls work again.
        # (Over the per-peer streams, which would refuse first: this test's streams are all root's.)
        self.restart("--max_grpc_threads=4", "--max_streams_per_peer=100")
        socks = [self.client.open("ipv4") for _ in range(8)]
        streams, refused = [], None
        for s in socks:
            stream = self.client.stream("Receive", socket_pb2.ReceiveRequest(
                socket=s.handle), timeout=10)
            streams.append(stream)
            try:
                s.get()  # a call made while the stream holds its thread
            except quadsock.QuadsockError as e:
                refused = e
                break
        for stream in streams:  # or a stream was the call refused
            if refused is None and stream.done() and stream.code() != grpc.StatusCode.OK:
                refused = quadsock.QuadsockError(stream.code(), stream.details())
        self.assertIsNotNone(refused, "8 streams and calls on 4 threads: none refused")
        self.assertEqual(refused.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        for stream in streams:
            stream.cancel()
        wait_until(lambda: self.try_get(socks[0]), 10, "calls work again once streams ended")

    @staticmethod
    def try_get(sock):
        try:
            sock.get()
            return True
        except quadsock.QuadsockError:
            return False

    def test_a_lease_runs_out_in_the_real_daemon(self):
        lapsing = quadsock.Client(self.daemon.target, name="lapsing", lease_seconds=2, hold=False)
        s = lapsing.open("ipv4")
        s.bind("0.0.0.0:4200")
        self.assertEqual(self.client.counters().sockets, 1)
        # No call for longer than the lease: its session and socket are gone.
        wait_until(lambda: self.client.counters().sockets == 0, 15, "the lapsed socket closed")
        with self.assertRaises(quadsock.QuadsockError) as gone:
            s.get()
        self.assertEqual(gone.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        lapsing.close()

    def test_the_admin_socket_refuses_a_user_other_than_root(self):
        path = "/tmp/quadsock-e2e-%d-admin.sock" % os.getpid()
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        connect = ("import socket, sys\n"
                   "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                   "try:\n"
                   "    s.connect(sys.argv[1])\n"
                   "except PermissionError:\n"
                   "    sys.exit(13)\n")

        nobody = subprocess.run(AS_NOBODY + ["/usr/bin/python3", "-c", connect, path],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(nobody.returncode, 13, "nobody could connect: " + nobody.stderr)
        # root can, and is answered without a session.
        with quadsock.Client("unix:" + path, session=False) as admin:
            self.assertEqual(admin.counters().sockets, 0)


    def test_a_session_on_the_unix_socket_is_its_users_own(self):
        # Another local user, nobody, in the socket's group (the .deb's quadsock group), reaches
        # quadsockd through a relay it runs: quadsockd sees nobody's uid, root sees root's.
        os.chown(self.daemon.socket_path, 0, 65534)
        folder = tempfile.mkdtemp(prefix="quadsock-e2e-nobody-")
        os.chown(folder, 65534, 65534)
        relay_path = os.path.join(folder, "relay.sock")
        relay = subprocess.Popen(AS_NOBODY + ["/usr/bin/python3", "-c", RELAY, relay_path,
                                              self.daemon.socket_path],
                                 stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(relay.stdout.readline().strip(), "ready")
            nobody = "unix:" + relay_path
            with grpc.insecure_channel(nobody) as channel:
                stub = socket_pb2_grpc.SocketServiceStub(channel)
                with self.assertRaises(grpc.RpcError) as stolen:
                    stub.KeepAlive(socket_pb2.KeepAliveRequest(), timeout=10,
                                   metadata=((quadsock.client.SESSION_HEADER,
                                              self.client.session),))
                self.assertEqual(stolen.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
                self.assertIn("another local user", stolen.exception.details())
            # Its own session works, and root may use it too.
            with quadsock.Client(nobody, name="nobody") as own:
                own.open("ipv4").close()
                with grpc.insecure_channel(self.daemon.target) as channel:
                    socket_pb2_grpc.SocketServiceStub(channel).KeepAlive(
                        socket_pb2.KeepAliveRequest(), timeout=10,
                        metadata=((quadsock.client.SESSION_HEADER, own.session),))
            self.assertIn('("nobody") created for fd:', self.daemon.output())
            self.assertIn("(uid:65534)", self.daemon.output())
        finally:
            relay.kill()
            relay.wait()
            relay.stdout.close()
            shutil.rmtree(folder)

    def test_vlan_takes_tagged_frames_and_keeps_the_tags_visible(self):
        # veth strips tags by default; setUp's quadsockd (untagged) turned that off too.
        self.assertEqual(vlan_stripping("qs0"), "off")
        self.restart("--vlan=100")
        self.assertEqual(vlan_stripping("qs0"), "off", "quadsockd left tag stripping on")
        # What it cannot see on a veth, it says: a tag the peer hands beside the frame.
        self.assertIn("so that even VLAN 100's go to the kernel; where tagged frames may come, "
                      "run `ethtool -K PEER txvlan off`", self.daemon.output())
        mac = json.loads(subprocess.run(["ip", "-j", "link", "show", "qs0"], capture_output=True,
                                        text=True, check=True).stdout)[0]["address"]
        with self.client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            # The kernel here has no 802.1Q devices: scapy sends the tagged frame on qs1.
            send = ("from scapy.all import Ether, Dot1Q, IP, UDP, sendp\n"
                    "sendp(Ether(dst='%s') / Dot1Q(vlan=100) / IP(src='%s', dst='%s') / "
                    "UDP(sport=5000, dport=4000) / b'tagged', iface='qs1', verbose=False)\n"
                    % (mac, PEER4, STACK4))
            subprocess.run(["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", send],
                           check=True, timeout=60)
            d = sock.receive_one(timeout=10)
            self.assertIsNotNone(d, "the tagged datagram did not arrive")
            self.assertEqual((d.payload, d.peer), (b"tagged", "%s:5000" % PEER4))
        self.assertEqual(self.daemon.stop(signal.SIGTERM), 0, self.daemon.output())
        self.assertEqual(vlan_stripping("qs0"), "on", "not turned back on at a clean exit")

    def test_vlan_is_refused_when_tag_stripping_cannot_be_turned_off(self):
        # Without CAP_NET_ADMIN quadsockd can load its program but not change qs0's features.
        # A clean exit first: it turns the stripping that setUp's daemon turned off back on.
        self.assertEqual(self.daemon.stop(signal.SIGTERM), 0, self.daemon.output())
        self.daemon.close()
        self.assertEqual(vlan_stripping("qs0"), "on")
        p = subprocess.run(["setpriv", "--bounding-set=-net_admin", e2e.QUADSOCKD,
                            "--interface=qs0", "--address=%s/24" % STACK4, "--vlan=100",
                            "--listen=unix:/tmp/quadsock-e2e-vlan-%d.sock" % os.getpid(),
                            "--admin_listen=unix:/tmp/quadsock-e2e-vlan-%d-admin.sock"
                            % os.getpid(), "--metrics_listen="],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("strips VLAN tags on receive", p.stderr)
        self.assertIn("ethtool -K qs0 rxvlan off", p.stderr)
        self.assertEqual(vlan_stripping("qs0"), "on")
        self.assertFalse(xdp_attached("qs0"), "a refused start left its XDP program")


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    ECHO_SERVER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
