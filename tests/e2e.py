"""The end-to-end tests' harness: quadsockd as a process checked to its exit (Daemon), a test
case in a private network namespace (E2eTestCase), the veth pair with the kernel peer's
addresses (peer_network), and the waits and kernel queries the tests share. A test sets
QUADSOCKD (its first argument) before it starts a Daemon:

    import e2e
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
"""

import json
import os
import signal
import subprocess
import time
import unittest

import netns
import quadsock
import sanitizer_report

QUADSOCKD = None
STACK4, STACK6 = "10.8.0.2", "fd00:8::2"
PEER4, PEER6 = "10.8.0.1", "fd00:8::1"


def xdp_attached(dev):
    # check=True: when `ip` itself fails, that is an error, not "no program attached".
    out = subprocess.run(["ip", "-d", "link", "show", dev], capture_output=True, text=True,
                         check=True).stdout
    return "prog/xdp" in out


def wait_until(predicate, timeout, what):
    """Waits for a positive event (never for time alone): fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting until " + what)
        time.sleep(0.01)


def vlan_stripping(dev):
    """What ethtool says of the device's VLAN tag stripping on receive: "on" or "off"."""
    out = subprocess.run(["ethtool", "-k", dev], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if line.startswith("rx-vlan-offload:"):
            return line.split()[1]
    raise AssertionError("ethtool -k %s names no rx-vlan-offload:\n%s" % (dev, out))


def veth_drops(dev, netns_name=None):
    """The veth's own counts of frames dropped (rx, tx), as `ip -s link` shows them."""
    cmd = ["ip"] + (["-n", netns_name] if netns_name else []) + ["-s", "-j", "link", "show", dev]
    stats = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                      check=True).stdout)[0]["stats64"]
    return stats["rx"]["dropped"], stats["tx"]["dropped"]


class Daemon:
    """quadsockd as a process, with its log kept for failure messages. A test ends it with
    finish(), which checks it to the end; stop() is for a test that stops it on purpose."""

    def __init__(self, extra=(), flagfile=False, target=None, credentials=None):
        """`extra` flags after the defaults (a flag given again wins); `target` (and the
        client's TLS `credentials`): where it is up and checked, when `extra` moves --listen."""
        self.stopped_by_test = False
        self.credentials = credentials
        self.socket_path = "/tmp/quadsock-e2e-%d.sock" % os.getpid()
        self.log = open("/tmp/quadsock-e2e-%d.log" % os.getpid(), "w+")
        flags = ["--interface=qs0", "--address=%s/24,%s/64" % (STACK4, STACK6),
                 "--listen=unix:" + self.socket_path,
                 "--admin_listen=unix:/tmp/quadsock-e2e-%d-admin.sock" % os.getpid(),
                 "--metrics_listen=127.0.0.1:9464",
                 "--lease_seconds=10"] + list(extra)
        if flagfile:
            # One flag per line, as a host's configuration file would have them (the
            # Kubernetes DaemonSet in docker/kubernetes passes the node's so).
            path = "/tmp/quadsock-e2e-%d.flags" % os.getpid()
            with open(path, "w") as f:
                f.write("\n".join(flags) + "\n")
            flags = ["--flagfile=" + path]
        self.proc = subprocess.Popen([QUADSOCKD] + flags, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.target = target or "unix:" + self.socket_path
        self.admin_target = "unix:/tmp/quadsock-e2e-%d-admin.sock" % os.getpid()
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("quadsockd exited with %d:\n%s" % (self.proc.returncode,
                                                                         self.output()))
            try:
                with quadsock.Client(self.target, hold=False, credentials=self.credentials) as c:
                    if c.health() == "SERVING":
                        return
            except quadsock.QuadsockError:
                pass
            time.sleep(0.1)
        raise AssertionError("quadsockd did not become SERVING:\n" + self.output())

    def output(self):
        if self.log.closed:
            return self.final_output
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, sig=signal.SIGTERM, timeout=5):
        """The test stops it (its exit is the test's to judge: finish() then only reads the log
        for a sanitizer's report)."""
        self.stopped_by_test = True
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode

    def wait_exit(self, timeout):
        """The test made it stop by itself: its exit code (finish() then only reads the log for
        a sanitizer's report); fails when it still runs after `timeout` seconds."""
        self.stopped_by_test = True
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("quadsockd still runs %d s on:\n%s" % (timeout, self.output()))

    def close(self):
        """Kills it (if it still runs) and closes its log: for set-up that failed."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if not self.log.closed:
            self.final_output = self.output()
            self.log.close()

    def frame_accounting_problem(self):
        """None when every UMEM frame is free or on a ring (none leaked), else what is wrong.
        The kernel may still be moving the last frames between two rings, and a test that
        filled the gRPC threads may still hold them: asks until both settle (10 s)."""
        deadline = time.monotonic() + 10
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                with quadsock.Client(self.target, hold=False, credentials=self.credentials) as c:
                    if c.check_frame_accounting():
                        return None
                    last = "the check failed"
            except quadsock.QuadsockError as e:
                last = str(e)
            time.sleep(0.05)
        return "frame accounting at the end of the test: " + last

    def finish(self):
        """The end of a test, checked: quadsockd still runs (unless the test stopped it),
        every UMEM frame is accounted for, SIGTERM ends it with 0 within 20 s, and its log
        holds no sanitizer report. Closes it in every case; one AssertionError says all that
        was wrong, with the end of its log."""
        problems = []
        try:
            if not self.stopped_by_test:
                if self.proc.poll() is not None:
                    problems.append("quadsockd died during the test (exit %d)"
                                    % self.proc.returncode)
                else:
                    problem = self.frame_accounting_problem()
                    if problem:
                        problems.append(problem)
                    self.proc.send_signal(signal.SIGTERM)
                    try:
                        if self.proc.wait(timeout=20) != 0:
                            problems.append("SIGTERM ended quadsockd with %d, not 0"
                                            % self.proc.returncode)
                    except subprocess.TimeoutExpired:
                        problems.append("quadsockd did not exit within 20 s of SIGTERM")
            log = self.output()
            report = sanitizer_report.first_line(log)
            if report:
                problems.append("a sanitizer reported: " + report)
        finally:
            self.close()
        if problems:
            raise AssertionError("; ".join(problems) + "\nthe end of quadsockd's log:\n"
                                 + "\n".join(log.splitlines()[-60:]))


class E2eTestCase(unittest.TestCase):
    """An end-to-end test case, in this process's private network namespace."""

    @classmethod
    def setUpClass(cls):
        netns.enter_private_namespace()

    def end(self, *clients):
        """A test's end: its clients closed, self.daemon checked to its exit (Daemon.finish),
        and self.net removed whatever that said."""
        try:
            for c in clients:
                try:
                    c.close()
                except Exception:  # the daemon may be gone already (finish says so)
                    pass
            self.daemon.finish()
        finally:
            self.net.close()


def peer_network():
    """The end-to-end tests' veth pair: qs0 here for quadsockd, qs1 in the peer's namespace
    with PEER4/24 and PEER6/64."""
    net = netns.PeerNetwork("qs0", "qs1")
    net.peer_shell("ip addr add %s/24 dev qs1 && ip addr add %s/64 dev qs1 nodad"
                   % (PEER4, PEER6))
    return net
