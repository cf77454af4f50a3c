"""Network namespaces for end-to-end tests (root): this process in a private namespace of its
own (quadsockd's side), a named peer namespace for the kernel, and a veth pair between them.

    netns.enter_private_namespace()              # once, first thing
    with netns.PeerNetwork("qs0", "qs1") as net:
        net.peer_shell("ip addr add 10.8.0.1/24 dev qs1")
        sock = net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)   # a kernel socket over there
"""

import ctypes
import os
import socket
import subprocess
import threading

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s (these tests need root)" % (what, os.strerror(err)))


def enter_private_namespace():
    """Moves this process into a new network namespace that vanishes with it."""
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def sh(command):
    subprocess.run(["sh", "-c", command], check=True)


class PeerNetwork:
    def __init__(self, local, peer, queues=1):
        """`queues`: RX and TX queues of each veth end (the peer's TX queue is local's RX)."""
        self.local, self.peer = local, peer
        self.ns = "qs-e2e-%d-%s" % (os.getpid(), peer)
        sh("ip netns add %s" % self.ns)
        q = " numrxqueues %d numtxqueues %d" % (queues, queues) if queues != 1 else ""
        sh("ip link add name %s%s type veth peer name %s%s netns %s"
           % (local, q, peer, q, self.ns))
        sh("ip link set %s up" % local)
        self.peer_shell("ip link set lo up && ip link set %s up" % peer)
        # XDP sees veth frames with the checksum still to do: make the peer's kernel compute it.
        self.peer_shell("ethtool -K %s tx off >/dev/null" % peer)
        self._fd = os.open("/run/netns/" + self.ns, os.O_RDONLY)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        os.close(self._fd)
        subprocess.run(["ip", "link", "del", self.local], stderr=subprocess.DEVNULL)
        sh("ip netns del %s" % self.ns)

    def peer_shell(self, command, check=True):
        return subprocess.run(["ip", "netns", "exec", self.ns, "sh", "-c", command],
                              check=check).returncode

    def peer_socket(self, family, kind, proto=0):
        """A kernel socket made inside the peer namespace (it stays there)."""
        result = {}

        def make():
            try:
                _check(_libc.setns(self._fd, CLONE_NEWNET), "setns")
                result["sock"] = socket.socket(family, kind, proto)
            except OSError as e:
                result["error"] = e
        t = threading.Thread(target=make)
        t.start()
        t.join()
        if "error" in result:
            raise result["error"]
        return result["sock"]
