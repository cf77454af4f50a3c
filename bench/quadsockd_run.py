"""The real quadsockd on a benchmark's receiving veth (bench/netbench.py's application cases,
bench/echo_latency.py): its flags, where its binary is, and the process.
"""

import os
import shutil
import subprocess
import tempfile
import time

from testbed import LOCAL, NICE, RECEIVER_CPU, RECEIVER_ENV, HarnessError, stop

# quadsockd for the app_* cases: the in-process quadsock cases' AF_XDP setup (copy mode, one
# queue, rings of 2048, a UMEM of twice that), room for 100k sockets in one session, small
# receive queues (the channel's sockets use none), no administration listener (the session's
# GetCounters suffices). Its whole process runs on the receiving CPU at the receivers' nice
# value, so its poll thread is where the in-process stack's is.
QUADSOCKD_FLAGS = ["--xdp_mode=copy", "--queues=1", "--ring_size=2048", "--umem_frames=4096",
                   f"--address={LOCAL}/16", "--max_sockets=131072",
                   "--max_sockets_per_client=131072", "--max_sockets_per_peer=131072",
                   "--receive_queue_depth=16", "--admin_listen="]


def quadsockd_path(bins):
    """quadsockd beside the tools (bench/seed_table copies it there), or in the runfiles'
    service/ beside bench/ (the smoke test's --bin-dir is its runfiles' bench/)."""
    here = os.path.join(bins, "quadsockd")
    if os.access(here, os.X_OK):
        return here
    return os.path.join(os.path.dirname(os.path.abspath(bins)), "service", "quadsockd")


class Quadsockd:
    """The real quadsockd on the receiving veth, for an app_* case: in the receiving namespace,
    on the receiving CPU (taskset: every thread of it; or on `cpu`), at the receivers' nice value,
    with QUADSOCKD_FLAGS and `flags`. Its log goes to a file (a pipe nobody reads would block
    it); `listen` is its Unix listener."""

    def __init__(self, tb, bins, name, wait, retries=6, cpu=RECEIVER_CPU, flags=()):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"qsb-{os.getpid()}-quadsockd-")
        self.listen = f"unix:{os.path.join(self.dir, 'quadsock.sock')}"
        self.log_path = os.path.join(self.dir, "quadsockd.log")
        cmd = ["ip", "netns", "exec", tb.rx_ns, *NICE, *RECEIVER_ENV,
               "taskset", "-c", str(cpu), quadsockd_path(bins),
               f"--interface={tb.rx_dev}", f"--listen={self.listen}", *QUADSOCKD_FLAGS, *flags]
        self.proc = None
        try:
            for attempt in range(retries + 1):
                with open(self.log_path, "w") as log:
                    self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=subprocess.STDOUT)
                if self._wait_serving(wait):
                    return
                text = self.log()
                if "Device or resource busy" not in text or attempt == retries:
                    raise HarnessError(f"{name}: quadsockd failed: {text.strip()[-2000:]}")
                time.sleep(0.5)
        except BaseException:
            self.close()
            raise

    def _wait_serving(self, wait):
        """Whether quadsockd logged that it serves (False: it ended first)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if " quadsockd: serving " in self.log():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        raise HarnessError(f"{self.name}: quadsockd not serving within {wait} s: "
                           f"{self.log().strip()[-2000:]}")

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)
