"""The data channel's packed batches (ChannelResponse's `descriptors` and `payloads`, as
stack/channel/packed.h writes them): each datagram's descriptor exactly as in quadsockd's rings,
the payloads back to back in the same order."""

import ipaddress
import struct

# A packed batch's descriptor (stack/channel/layout.h's ChannelDescriptor, little-endian):
# socket index, payload length, arrival, sequence, peer and local addresses (16 bytes, IPv4
# ones v4-mapped), their ports, flags.
DESCRIPTOR = struct.Struct("<IIqQ16s16sHHI")
IPV4 = 1  # flags: the addresses are IPv4


def _address(address, v4):
    return str(ipaddress.IPv4Address(address[12:]) if v4 else ipaddress.IPv6Address(address))


def unpack(descriptors, payloads):
    """The (index, payload, (peer address, port), (local address, port), arrival, sequence) of a
    packed batch (ChannelResponse's descriptors and payloads), in order, addresses as text;
    ValueError when its bytes do not add up."""
    if len(descriptors) % DESCRIPTOR.size:
        raise ValueError("%d bytes of descriptors are not whole descriptors" % len(descriptors))
    out = []
    offset = 0
    for index, length, arrival, sequence, peer, local, peer_port, local_port, flags in \
            DESCRIPTOR.iter_unpack(descriptors):
        if offset + length > len(payloads):
            raise ValueError("the descriptors name more bytes than the %d of payloads"
                             % len(payloads))
        v4 = bool(flags & IPV4)
        out.append((index, payloads[offset:offset + length],
                    (_address(peer, v4), peer_port), (_address(local, v4), local_port),
                    arrival, sequence))
        offset += length
    if offset != len(payloads):
        raise ValueError("%d bytes of payloads, the descriptors name %d" % (len(payloads), offset))
    return out
