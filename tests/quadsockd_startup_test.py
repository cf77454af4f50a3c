"""What quadsockd says when it cannot or must not start (root, private network namespaces): an
address the kernel holds is refused with the kernel's address, interface and the command that
frees it (unless --allow_kernel_address); run without privileges it says what is missing in its
own words, and libbpf's lines (one of which blames the kernel's BPF support) only with --verbose.

Usage (Bazel passes it): quadsockd_startup_test.py QUADSOCKD
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import netns
import e2e
from e2e import PEER4, STACK4, STACK6


def quadsockd(*flags, user=None):
    """Runs quadsockd to its exit (as `user` if given): (exit status, what it printed)."""
    wrap = ([] if user is None else
            ["setpriv", "--reuid=" + user, "--regid=nogroup", "--clear-groups"])
    p = subprocess.run(wrap + [e2e.QUADSOCKD, "--interface=qs0",
                               "--listen=unix:/tmp/quadsock-startup-%d.sock" % os.getpid(),
                               "--admin_listen="] + list(flags),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return p.returncode, p.stdout


class StartupTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        netns.enter_private_namespace()

    def setUp(self):
        self.net = netns.PeerNetwork("qs0", "qs1")
        self.net.peer_shell("ip addr add %s/24 dev qs1" % PEER4)

    def tearDown(self):
        self.net.close()

    def test_an_address_the_kernel_holds_on_the_interface_is_refused(self):
        subprocess.run(["ip", "addr", "add", STACK4 + "/24", "dev", "qs0"], check=True)
        code, out = quadsockd("--address=%s/24" % STACK4)
        self.assertEqual(code, 1, out)
        self.assertIn("bad --address: FAILED_PRECONDITION: %s is the kernel's address too: it "
                      "holds %s/24 on qs0, the interface quadsockd is to serve" % (STACK4, STACK4),
                      out)
        self.assertIn("Take it from the kernel (ip addr del %s/24 dev qs0)" % STACK4, out)
        self.assertIn("--allow_kernel_address", out)
        self.assertFalse(e2e.xdp_attached("qs0"), "a refused start attached its program")

    def test_so_is_one_on_another_interface(self):
        subprocess.run(["ip", "addr", "add", STACK6 + "/128", "dev", "lo"], check=True)
        code, out = quadsockd("--address=%s/24,%s/64" % (STACK4, STACK6))
        self.assertEqual(code, 1, out)
        self.assertIn("%s is the kernel's address too: it holds %s/128 on lo: the host's own "
                      "traffic to it would stay in the kernel" % (STACK6, STACK6), out)
        self.assertIn("(ip addr del %s/128 dev lo)" % STACK6, out)

    def test_the_override_starts_anyway(self):
        subprocess.run(["ip", "addr", "add", STACK4 + "/24", "dev", "qs0"], check=True)
        daemon = e2e.Daemon(["--allow_kernel_address"])  # waits until it is SERVING
        try:
            self.assertNotIn("kernel's address", daemon.output())
            self.assertEqual(daemon.stop(signal.SIGTERM), 0, daemon.output())
        finally:
            daemon.close()

    def test_without_privileges_it_says_what_is_missing_and_keeps_libbpf_quiet(self):
        # Where the unprivileged user can run it from (Bazel's runfiles are under root's home).
        folder = tempfile.mkdtemp(prefix="quadsock-startup-", dir="/tmp")
        try:
            os.chmod(folder, 0o755)
            binary = os.path.join(folder, "quadsockd")
            shutil.copy(e2e.QUADSOCKD, binary)
            os.chmod(binary, 0o755)
            real, e2e.QUADSOCKD = e2e.QUADSOCKD, binary
            try:
                code, out = quadsockd("--address=%s/24" % STACK4, user="nobody")
                verbose_code, verbose = quadsockd("--address=%s/24" % STACK4, "--verbose",
                                                  user="nobody")
            finally:
                e2e.QUADSOCKD = real
        finally:
            shutil.rmtree(folder)
        self.assertEqual(code, 1, out)
        self.assertNotIn("libbpf: ", out)
        self.assertNotIn("Make sure your kernel supports BPF", out)
        self.assertIn("cannot start on qs0", out)
        self.assertIn("PERMISSION_DENIED: cannot load the XDP steering program: Operation not "
                      "permitted (loading BPF needs root, or CAP_BPF, CAP_NET_ADMIN and "
                      "CAP_PERFMON: run quadsockd as root or in its container)", out)
        self.assertIn("--verbose adds libbpf's own messages", out)
        # Asked for, libbpf's lines come in quadsockd's log, each marked as libbpf's.
        self.assertEqual(verbose_code, 1, verbose)
        self.assertIn("quadsockd: libbpf: ", verbose)
        self.assertIn("run quadsockd as root or in its container", verbose)


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
