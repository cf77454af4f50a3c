"""Unit tests of the Python client's own logic (no server): endpoints and generated modules.
The client against a running quadsockd is tested end to end in tests/quadsockd_e2e_test.py."""

import os
import re
import unittest
from unittest import mock

import grpc

import quadsock
from quadsock.std import health_pb2
from quadsock import client as client_module
from quadsock import packed
from quadsock.v1 import socket_pb2


class EndpointTest(unittest.TestCase):

    def test_forms(self):
        self.assertEqual(quadsock.parse_endpoint("10.1.0.2:53").address, "10.1.0.2")
        self.assertEqual(quadsock.parse_endpoint("10.1.0.2:53").port, 53)
        self.assertEqual(quadsock.parse_endpoint("[fd00::2]:4000").address, "fd00::2")
        self.assertEqual(quadsock.parse_endpoint(("fd00::2", 7)).port, 7)

    def test_rejects_bare_ipv6_and_garbage(self):
        for bad in ("fd00::2:53", "nothing", "10.1.0.2"):
            with self.assertRaises(ValueError):
                quadsock.parse_endpoint(bad)


class GeneratedCodeTest(unittest.TestCase):

    def test_messages_round_trip_and_names_match_the_protocols(self):
        req = socket_pb2.OpenRequest(family=6, reuse_port=True)
        self.assertEqual(socket_pb2.OpenRequest.FromString(req.SerializeToString()), req)
        self.assertEqual(socket_pb2.DESCRIPTOR.services_by_name["SocketService"].full_name,
                         "quadsock.v1.SocketService")
        self.assertEqual(health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                         "grpc.health.v1.Health")


class SharedFactsTest(unittest.TestCase):
    """The facts the Python client states for itself are the C++ side's (common/protocol.h)."""

    def setUp(self):
        path = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "quadsock"),
                            "common", "protocol.h")
        with open(path) as f:
            self.header = f.read()

    def cpp(self, pattern):
        m = re.search(pattern, self.header)
        self.assertIsNotNone(m, pattern)
        return m.group(1)

    def test_session_header_and_keepalive(self):
        self.assertEqual(client_module.SESSION_HEADER, self.cpp(r'kSessionHeader\[\] = "([^"]+)"'))
        self.assertEqual(client_module.KEEPALIVE,
                         float(self.cpp(r"kClientKeepalive = absl::Seconds\((\d+)\)")))
        self.assertEqual(client_module.KEEPALIVE_TIMEOUT,
                         float(self.cpp(r"kClientKeepaliveTimeout = absl::Seconds\((\d+)\)")))


class InMessageStatusTest(unittest.TestCase):

    def test_every_message_that_carries_one(self):
        for message in (socket_pb2.StreamEnd(code=5, message="closed"),
                        socket_pb2.SendResult(queued=1, code=5, message="closed"),
                        socket_pb2.SocketOpResult(code=5, message="closed")):
            self.assertEqual(client_module._status_of(message),
                             (grpc.StatusCode.NOT_FOUND, "closed"))
        self.assertEqual(client_module._status_of(socket_pb2.SendResult()),
                         (grpc.StatusCode.OK, ""))


class _FakeStream:
    """A Receive stream that yields the given datagrams, then ends (as at the timeout)."""

    def __init__(self, datagrams):
        self._datagrams = list(datagrams)
        self.cancelled = False

    def __iter__(self):
        for d in self._datagrams:
            if self.cancelled:
                return
            yield d

    def cancel(self):
        self.cancelled = True


class _FakeClient:
    """Stands for quadsock.Client: records the Receive request, answers with a fake stream."""

    def __init__(self, datagrams):
        self.stream_ = _FakeStream(datagrams)
        self.request = None

    def stream(self, method, request, **kwargs):
        self.request = request
        return self.stream_


class ReceiveTest(unittest.TestCase):

    def datagrams(self, n):
        return [socket_pb2.Datagram(payload=b"d%d" % i, sequence=i + 1) for i in range(n)]

    def test_count_zero_means_no_limit(self):
        client = _FakeClient(self.datagrams(5))
        got = list(quadsock.Socket(client, "h").receive(timeout=1, count=0))
        self.assertEqual([d.payload for d in got], [b"d0", b"d1", b"d2", b"d3", b"d4"])
        self.assertEqual(client.request.max_datagrams, 0)

    def test_count_stops_after_that_many(self):
        client = _FakeClient(self.datagrams(5))
        got = list(quadsock.Socket(client, "h").receive(timeout=1, count=2))
        self.assertEqual(len(got), 2)
        self.assertEqual(client.request.max_datagrams, 2)
        self.assertTrue(client.stream_.cancelled)


class _FailedCall(grpc.RpcError):
    """A failed call as grpc raises it, with details in its trailing metadata."""

    def __init__(self, details):
        self.details_bin = details

    def code(self):
        return grpc.StatusCode.FAILED_PRECONDITION

    def details(self):
        return "datagram 2: the socket is not connected"

    def trailing_metadata(self):
        return (("grpc-status-details-bin", self.details_bin),) if self.details_bin else ()


class SendBatchTest(unittest.TestCase):

    def call(self, details):
        client = mock.Mock()
        client.call.side_effect = lambda *a, **k: client_module._call(mock.Mock(
            side_effect=_FailedCall(details)))
        return quadsock.Socket(client, "h").send_batch([b"a", b"b", b"c"])

    def test_a_failure_part_way_says_how_many_went(self):
        status = socket_pb2.ErrorStatus(code=9, message="datagram 2: ...")
        status.details.add().Pack(socket_pb2.SendBatchResponse(queued=2))
        with self.assertRaises(quadsock.PartialSendError) as e:
            self.call(status.SerializeToString())
        self.assertEqual(e.exception.queued, 2)
        self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)

    def test_without_details_it_is_a_plain_error(self):
        with self.assertRaises(quadsock.QuadsockError) as e:
            self.call(None)
        self.assertNotIsInstance(e.exception, quadsock.PartialSendError)


class PackedBatchTest(unittest.TestCase):
    """A packed batch as quadsockd sends it: descriptors as the rings hold them, payloads back to
    back (stack/channel/packed.h)."""

    @staticmethod
    def descriptor(index, payload, peer, local, ports, flags, arrival=7, sequence=1):
        return packed.DESCRIPTOR.pack(index, len(payload), arrival, sequence, peer, local,
                                              ports[0], ports[1], flags)

    def test_ipv4_and_ipv6_datagrams_in_order(self):
        def v4(a):  # v4-mapped
            return bytes(10) + b"\xff\xff" + bytes(a)
        v6 = bytes.fromhex("fd000001000000000000000000000001")
        d = (self.descriptor(3, b"one", v4([10, 8, 0, 1]), v4([10, 8, 0, 2]), (5000, 4000), 1,
                             arrival=11, sequence=9) +
             self.descriptor(4, b"", v6, v6, (6000, 4001), 0) +
             self.descriptor(5, b"three", v4([1, 2, 3, 4]), v4([5, 6, 7, 8]), (1, 2), 1))
        self.assertEqual(packed.unpack(d, b"onethree"), [
            (3, b"one", ("10.8.0.1", 5000), ("10.8.0.2", 4000), 11, 9),
            (4, b"", ("fd00:1::1", 6000), ("fd00:1::1", 4001), 7, 1),
            (5, b"three", ("1.2.3.4", 1), ("5.6.7.8", 2), 7, 1),
        ])
        self.assertEqual(packed.unpack(b"", b""), [])

    def test_bytes_that_do_not_add_up_are_refused(self):
        one = self.descriptor(1, b"abc", bytes(16), bytes(16), (1, 2), 0)
        for descriptors, payloads in ((one, b"ab"), (one, b"abcd"), (one[:-1], b"abc"),
                                      (b"", b"x")):
            with self.assertRaises(ValueError):
                packed.unpack(descriptors, payloads)


class AdministrationTest(unittest.TestCase):

    def test_no_session_for_the_administration_listener(self):
        with mock.patch.object(grpc, "insecure_channel") as channel:
            client = quadsock.Client("unix:/run/quadsock-admin/admin.sock", session=False)
            unary = channel.return_value.unary_unary.return_value
            self.assertEqual(unary.call_count, 0, "a session was created")
            client.set_neighbor("10.1.0.1", "02:00:00:00:00:01")
            self.assertEqual(unary.call_args.kwargs["metadata"], ())
            client.close()
            self.assertEqual(unary.call_count, 1, "close ended a session it does not have")


if __name__ == "__main__":
    unittest.main()
