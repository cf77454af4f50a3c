"""quadsock: a Python client for quadsockd, quadsock's userspace UDP stack service.

    import quadsock

    with quadsock.Client("unix:/run/quadsock/quadsock.sock") as client:
        with client.open("ipv4") as sock:
            sock.bind("0.0.0.0:4000")
            for datagram in sock.receive(timeout=5):
                sock.send(b"echo: " + datagram.payload, datagram.peer)

        # Every socket of the session on one stream (the session's data channel):
        with client.channel(credit=1024) as channel:
            for d in channel.receive(timeout=5):      # d.index: its socket's index
                channel.send(d.index, b"echo: " + d.payload, d.peer)

Runs on Debian's /usr/bin/python3 with python3-grpcio and python3-protobuf.
"""

from quadsock.client import (Channel, ChannelDatagram, Client, Datagram, Exchange, ExchangeEvent,
                             PartialSendError, QuadsockError, SendError, SendFailure, Socket,
                             keepalive_options, parse_endpoint)

__all__ = ["Channel", "ChannelDatagram", "Client", "Datagram", "Exchange", "ExchangeEvent",
           "PartialSendError", "QuadsockError", "SendError", "SendFailure", "Socket",
           "keepalive_options",
           "parse_endpoint"]
