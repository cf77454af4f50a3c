"""A UDP echo server driven entirely over gRPC: quadsockd owns the socket, this script only
tells it what to do.

    echo_server.py --target unix:/run/quadsock/quadsock.sock --port 7 [--seconds 60]
"""

import argparse
import sys
import time

import quadsock


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="unix:/run/quadsock/quadsock.sock")
    parser.add_argument("--port", type=int, default=7)
    parser.add_argument("--family", choices=["ipv4", "ipv6"], default="ipv6",
                        help="ipv6 (the default) also serves IPv4 through v4-mapped addresses")
    parser.add_argument("--seconds", type=float, default=60, help="stop after this long")
    args = parser.parse_args()
    deadline = time.time() + args.seconds
    echoed = 0
    with quadsock.Client(args.target, name="echo-server") as client:
        with client.open(args.family) as sock:
            local = sock.bind("[::]:%d" % args.port if args.family == "ipv6"
                              else "0.0.0.0:%d" % args.port)
            print("echoing on %s for %.0f s" % (local, args.seconds), flush=True)
            while time.time() < deadline:
                for d in sock.receive(timeout=max(0.1, deadline - time.time())):
                    sock.send(d.payload, d.peer)
                    echoed += 1
    print("echoed %d datagrams" % echoed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
