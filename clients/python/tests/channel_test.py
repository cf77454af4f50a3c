"""The Python client's data channel (StreamChannel) against the real quadsockd (root): the daemon
on AF_XDP on one end of a veth pair in this process's private network namespace, the kernel's
own UDP sockets on the other end (a peer namespace).

Usage (Bazel passes it): channel_test.py QUADSOCKD
"""

import os
import signal
import socket
import subprocess
import sys
import unittest

import grpc

import netns
import quadsock
from e2e import wait_until

QUADSOCKD = None
STACK, PEER = "10.8.0.2", "10.8.0.1"



class ChannelTest(unittest.TestCase):
    """One daemon and one network for the suite; a session (Client) per test."""

    @classmethod
    def setUpClass(cls):
        netns.enter_private_namespace()
        cls.net = netns.PeerNetwork("qsch0", "qsch1")
        cls.net.peer_shell("ip addr add %s/24 dev qsch1" % PEER)
        tmp = os.environ.get("TEST_TMPDIR", "/tmp")
        cls.log = open(os.path.join(tmp, "quadsockd.log"), "w+")
        sock = "/tmp/quadsock-channel-%d.sock" % os.getpid()
        cls.target = "unix:" + sock
        cls.daemon = subprocess.Popen(
            [QUADSOCKD, "--interface=qsch0", "--address=%s/24" % STACK, "--listen=" + cls.target,
             "--admin_listen=unix:/tmp/quadsock-channel-%d-admin.sock" % os.getpid(),
             "--umem_frames=2048", "--ring_size=512"],
            stdout=cls.log, stderr=subprocess.STDOUT)

        def serving():
            if cls.daemon.poll() is not None:
                raise AssertionError("quadsockd exited:\n" + cls.output())
            try:
                with quadsock.Client(cls.target, hold=False) as c:
                    return c.health() == "SERVING"
            except quadsock.QuadsockError:
                return False
        wait_until(serving, 20, "quadsockd is SERVING")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.send_signal(signal.SIGTERM)
        rc = cls.daemon.wait(timeout=10)
        cls.net.close()
        if rc != 0:
            raise AssertionError("quadsockd exited with %d:\n%s" % (rc, cls.output()))
        cls.log.close()

    @classmethod
    def output(cls):
        cls.log.flush()
        cls.log.seek(0)
        return cls.log.read()

    def setUp(self):
        self.client = quadsock.Client(self.target, name="channel-test")
        self.kernel = []

    def tearDown(self):
        for k in self.kernel:
            k.close()
        self.client.close()

    def peer(self, port):
        """A kernel UDP socket in the peer namespace, bound to PEER:port."""
        k = self.net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
        k.settimeout(5)
        k.bind((PEER, port))
        self.kernel.append(k)
        return k

    def bound(self, port):
        s = self.client.open("ipv4")
        s.bind("%s:%d" % (STACK, port))
        return s

    def handled(self, socks, n):
        """Until the sockets' counters say `n` datagrams reached them (queued or dropped)."""
        def done():
            return sum(s.get().counters.rx_datagrams + s.get().counters.rx_dropped
                       for s in socks) >= n
        wait_until(done, 10, "%d datagrams reached the sockets" % n)

    def test_datagrams_of_several_sockets_come_on_one_stream_tagged_with_their_socket(self):
        socks = [self.bound(4000 + i) for i in range(3)]
        self.assertEqual(len({s.index for s in socks}), 3)
        self.assertTrue(all(s.index > 0 for s in socks))
        k = self.peer(5000)
        with self.client.channel(credit=64) as ch:
            self.assertTrue(all(s.get().on_channel for s in socks))
            for i, s in enumerate(socks):
                for j in range(4):
                    k.sendto(b"%d.%d" % (i, j), (STACK, 4000 + i))
            got = list(ch.receive(timeout=10, count=12))
            self.assertEqual(len(got), 12)
            for d in got:
                i = int(d.payload.split(b".")[0])
                self.assertIs(d.socket, socks[i])
                self.assertEqual(d.index, socks[i].index)
                self.assertEqual(d.peer, "%s:5000" % PEER)
                self.assertEqual(d.local, "%s:%d" % (STACK, 4000 + i))
            # Per socket in order, numbered from 1.
            for i, s in enumerate(socks):
                mine = [d for d in got if d.index == s.index]
                self.assertEqual([d.payload for d in mine], [b"%d.%d" % (i, j) for j in range(4)])
                self.assertEqual([d.sequence for d in mine], [1, 2, 3, 4])
            # A socket opened later joins a channel of every socket.
            late = self.bound(4010)
            wait_until(lambda: late.get().on_channel, 10, "the new socket is on the channel")
            k.sendto(b"late", (STACK, 4010))
            d = ch.receive_batch(timeout=10)
            self.assertEqual([(x.payload, x.socket) for x in d], [(b"late", late)])
            self.assertIsNone(ch.close(), "the stream did not end OK")
        # The stream's end takes the sockets off the channel.
        wait_until(lambda: not socks[0].get().on_channel, 10, "the socket is off the channel")

    def test_packed_batches_and_a_message_per_datagram_carry_the_same(self):
        s = self.bound(4000)
        k = self.peer(5000)
        seen = {}
        for packed in (True, False):
            with self.client.channel(credit=64, packed=packed) as ch:
                for j in range(3):
                    k.sendto(b"%s %d" % (str(packed).encode(), j), (STACK, 4000))
                got = list(ch.receive(timeout=10, count=3))
                self.assertIsNone(ch.close(), "the stream did not end OK")
            seen[packed] = [(d.index, d.socket, d.payload.split(b" ")[1], d.peer, d.local)
                            for d in got]
            self.assertEqual([d.payload for d in got],
                             [b"%s %d" % (str(packed).encode(), j) for j in range(3)])
            self.assertTrue(all(d.arrival_unix_nanos > 0 for d in got))
            # Numbered per socket from 1: the second channel's follow the first's.
            first = 1 if packed else 4
            self.assertEqual([d.sequence for d in got], [first, first + 1, first + 2])
            wait_until(lambda: not s.get().on_channel, 10, "the socket is off the channel")
        self.assertEqual(seen[True], seen[False])
        self.assertEqual(seen[True][0][1:], (s, b"0", "%s:5000" % PEER, "%s:4000" % STACK))

    def test_the_window_bounds_what_the_client_holds_and_every_datagram_is_accounted_for(self):
        s = self.bound(4000)
        other = self.bound(4001)  # not named: not on the channel
        k = self.peer(5000)
        # The suite's one daemon has carried other tests' datagrams: count from here.
        written = self.client.counters().stream_datagrams
        with self.client.channel(sockets=[s], credit=4, ring_slots=16) as ch:
            self.assertFalse(other.get().on_channel)
            for j in range(40):
                k.sendto(b"%d" % j, (STACK, 4000))
            self.handled([s], 40)
            # The server sent what the window allowed, no more: 4 datagrams wait in the client
            # (the rest in quadsockd's ring of 16; what overflowed it was dropped and counted).
            # The witness: a request that grants nothing (a send) has the stream look at its
            # rings again, and it counts a wait for credit, having written 4.
            # Again until it is counted: a socket counts a datagram a moment before its ring
            # shows it.
            waits = self.client.counters().stream_credit_waits

            def looked():
                ch.send(s, b"look", "%s:5000" % PEER)
                self.assertEqual(k.recv(2048), b"look")
                return self.client.counters().stream_credit_waits > waits
            wait_until(looked, 10, "the stream waits for credit")
            self.assertEqual(self.client.counters().stream_datagrams - written, 4)
            got = ch.receive_batch(100, timeout=10)
            self.assertEqual(len(got), 4)
            # Taking them granted more: everything in the ring comes, in order.
            got += list(ch.receive(timeout=2))
            c = s.get().counters
            self.assertEqual(len(got), c.rx_datagrams)
            self.assertEqual(len(got) + c.rx_dropped, 40)
            self.assertGreaterEqual(len(got), 16)
            sequences = [d.sequence for d in got]
            self.assertEqual(sequences, sorted(sequences))

    def test_sends_go_out_and_a_failed_one_comes_back_as_an_error(self):
        s = self.bound(4000)
        connected = self.client.open("ipv4")
        connected.connect((PEER, 5001))
        k, k1 = self.peer(5000), self.peer(5001)
        with self.client.channel() as ch:
            first = ch.send(s, b"one", "%s:5000" % PEER)
            self.assertEqual(first, 2)  # the first request attached the channel
            ch.send_batch([(s, b"two", (PEER, 5000)), (connected.index, b"three")])
            self.assertEqual(k.recvfrom(2048), (b"one", (STACK, 4000)))
            self.assertEqual(k.recv(2048), b"two")
            self.assertEqual(k1.recv(2048), b"three")
            # Unconnected with no destination: FAILED_PRECONDITION, with its request's number.
            bad = ch.send_batch([(s, b"ok", (PEER, 5000)), (s, b"nowhere")])
            with self.assertRaises(quadsock.SendError) as e:
                list(ch.receive(timeout=10))
            self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
            self.assertEqual((e.exception.request, e.exception.queued), (bad, 1))
            self.assertEqual(k.recv(2048), b"ok")
            # A socket index the session does not have: NOT_FOUND, seen by send_failures().
            unknown = ch.send(999, b"x", (PEER, 5000))
            failures = []
            wait_until(lambda: failures.extend(ch.send_failures()) or failures, 10,
                       "the failure came back")
            self.assertEqual([(f.request, f.code) for f in failures],
                             [(unknown, grpc.StatusCode.NOT_FOUND)])
            # The stream goes on: datagrams still come.
            k.sendto(b"still", (STACK, 4000))
            self.assertEqual([d.payload for d in ch.receive(timeout=10, count=1)], [b"still"])
            self.assertIsNone(ch.close())

    def test_one_channel_per_session_and_only_its_own_sockets(self):
        s = self.bound(4000)
        with self.client.channel():
            with self.assertRaises(quadsock.QuadsockError) as e:
                self.client.channel()
            self.assertEqual(e.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        with quadsock.Client(self.target, name="other") as other:
            with self.assertRaises(quadsock.QuadsockError) as e:
                other.channel(sockets=[s.handle])
            self.assertEqual(e.exception.code, grpc.StatusCode.PERMISSION_DENIED)

    def test_the_sessions_end_ends_the_stream(self):
        self.bound(4000)
        ch = self.client.channel()
        self.client.call("EndSession", quadsock.client.socket_pb2.EndSessionRequest())
        with self.assertRaises(quadsock.QuadsockError) as e:
            list(ch.receive(timeout=10))
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(quadsock.QuadsockError):
            ch.send(1, b"x", (PEER, 5000))
        self.assertEqual(ch.close().code, grpc.StatusCode.NOT_FOUND)


if __name__ == "__main__":
    QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main()
