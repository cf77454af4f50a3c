#!/usr/bin/python3
"""Prints the frames that arrive on an interface, one hex line each, for a bounded time.

    ip netns exec NS scripts/capture_frames.py --interface veth1 --seconds 5 --count 100

Uses an AF_PACKET socket (root). Stops at --count frames or after --seconds, whichever is first.
"""
import argparse
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interface", required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--ready", help="a file to create once the socket listens")
    args = parser.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((args.interface, 0))
    if args.ready:
        open(args.ready, "w").close()
    deadline = time.monotonic() + args.seconds
    seen = 0
    while seen < args.count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            break
        frame, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        print(frame.hex(), flush=True)
        seen += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
