"""Unit tests of the Python client's own logic (no server): endpoints and generated modules.
The client against a running quadsockd is tested end to end in tests/quadsockd_e2e_test.py."""

import unittest

import quadsock
from quadsock.std import health_pb2
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


if __name__ == "__main__":
    unittest.main()
