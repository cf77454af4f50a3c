"""The Python client's HTTP/2 keepalive: the channel options it is built with (the C++ client's),
and what they are for: a stream to a server that stopped answering (its host lost power, its
link was cut: no FIN, no RST) fails with UNAVAILABLE instead of waiting out its deadline.

The server here is a stand-in written with grpcio, reached through a relay that can be frozen:
frozen, the relay keeps both connections open but passes nothing more."""

import os
import select
import shutil
import socket
import tempfile
import threading
import time
import unittest
from concurrent import futures
from unittest import mock

import grpc

import quadsock
from quadsock.v1 import socket_pb2, socket_pb2_grpc


class OptionsTest(unittest.TestCase):

    def channel_options(self, **kwargs):
        with mock.patch.object(grpc, "insecure_channel") as channel:
            quadsock.Client("unix:/nowhere.sock", hold=False, **kwargs)
        return dict(channel.call_args.kwargs["options"])

    def test_the_cpp_clients_keepalive_by_default(self):
        self.assertEqual(self.channel_options(), {
            "grpc.keepalive_time_ms": 20000,
            "grpc.keepalive_timeout_ms": 10000,
            "grpc.http2.max_pings_without_data": 0,
            "grpc.http2.min_time_between_pings_ms": 20000,
        })

    def test_chosen_times_and_none(self):
        options = self.channel_options(keepalive=7.5, keepalive_timeout=2)
        self.assertEqual(options["grpc.keepalive_time_ms"], 7500)
        self.assertEqual(options["grpc.keepalive_timeout_ms"], 2000)
        self.assertEqual(options["grpc.http2.min_time_between_pings_ms"], 7500)
        self.assertEqual(self.channel_options(keepalive=0), {})

    def test_secure_channels_get_them_too(self):
        with mock.patch.object(grpc, "secure_channel") as channel:
            quadsock.Client("localhost:1", credentials=object(), hold=False)
        self.assertEqual(dict(channel.call_args.kwargs["options"])["grpc.keepalive_time_ms"],
                         20000)


class _Server(socket_pb2_grpc.SocketServiceServicer):
    """Sessions and a Receive stream that never sends: enough to hold streams open."""

    def CreateSession(self, request, context):
        return socket_pb2.CreateSessionResponse(session="s1", lease_seconds=30)

    def Session(self, request, context):
        yield socket_pb2.SessionEvent(message="held")
        while context.is_active():
            time.sleep(0.05)

    def Receive(self, request, context):
        while context.is_active():
            time.sleep(0.05)
        return iter(())

    def EndSession(self, request, context):
        return socket_pb2.EndSessionResponse()


class _FreezableRelay:
    """Relays Unix-socket connections to `server_path` until frozen."""

    def __init__(self, directory, server_path):
        self.path = os.path.join(directory, "relay.sock")
        self._server_path = server_path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        self._pairs = []
        self.ping_acks = 0  # HTTP/2 PING ACK frames passed from the server to a client
        self._frozen = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def freeze(self):
        self._frozen.set()

    def stop(self):
        """Closes everything: the clients' connections fail at once (no more frozen). Once."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._thread.join()
        for s in [self._listener] + [s for pair in self._pairs for s in pair]:
            s.close()
        os.unlink(self.path)

    def _run(self):
        while not self._stopped.is_set():
            if self._frozen.is_set():
                time.sleep(0.02)
                continue
            readable, _, _ = select.select(
                [self._listener] + [s for pair in self._pairs for s in pair], [], [], 0.02)
            for s in readable:
                if s is self._listener:
                    client, _ = self._listener.accept()
                    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    server.connect(self._server_path)
                    self._pairs.append((client, server))
                    continue
                pair = next(p for p in self._pairs if s in p)
                data = s.recv(16384)
                if data:
                    if s is pair[1] and _is_ping_ack(data):
                        self.ping_acks += 1
                    (pair[1] if s is pair[0] else pair[0]).sendall(data)


def _is_ping_ack(data):
    """One HTTP/2 frame alone: PING (type 6) with the ACK flag, 8 bytes of payload."""
    return len(data) == 17 and data[:3] == b"\x00\x00\x08" and data[3] == 6 and data[4] & 1


class VanishedServerTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="qs-ka-", dir="/tmp")  # short: a socket path
        server_path = os.path.join(self.dir, "server.sock")
        # The server never pings, and takes the client's pings as often as the test sends them.
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=[
            ("grpc.http2.min_ping_interval_without_data_ms", 50),
            ("grpc.http2.max_ping_strikes", 0),
        ])
        socket_pb2_grpc.add_SocketServiceServicer_to_server(_Server(), self.server)
        self.server.add_insecure_port("unix:" + server_path)
        self.server.start()
        self.relay = _FreezableRelay(self.dir, server_path)

    def tearDown(self):
        self.relay.stop()
        self.server.stop(0)
        shutil.rmtree(self.dir)

    def test_a_stream_to_a_server_that_stopped_answering_fails(self):
        client = quadsock.Client("unix:" + self.relay.path, keepalive=0.2, keepalive_timeout=0.3)
        ended = []

        def receive():
            try:
                list(quadsock.Socket(client, "h").receive(timeout=20))
                ended.append("deadline")
            except quadsock.QuadsockError as e:
                ended.append(e.code)

        reader = threading.Thread(target=receive, daemon=True)
        reader.start()
        # The stream is up, and answered pings keep it: wait until two were answered.
        deadline = time.monotonic() + 20
        while self.relay.ping_acks < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertGreaterEqual(self.relay.ping_acks, 2, "no pings answered")
        self.assertEqual(ended, [])
        self.relay.freeze()
        start = time.monotonic()
        reader.join(timeout=5)
        self.assertEqual(ended, [grpc.StatusCode.UNAVAILABLE])
        self.assertLess(time.monotonic() - start, 5)
        self.relay.stop()
        client.close()  # fails fast now that the relay is gone


if __name__ == "__main__":
    unittest.main()
