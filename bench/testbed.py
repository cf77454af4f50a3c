"""The network benchmarks' testbed: two namespaces joined by a veth pair (the receiving end's
NAPI in a kthread, pinned next to the receiver), and the process helpers of the harness
(bench/netbench.py).

Namespaces and veths are named after this process (qsb-PID-*); stale ones of dead runs are
removed when a testbed is made.
"""

import contextlib
import os
import re
import selectors
import signal
import subprocess
import time

RECEIVER_CPU = 0
GENERATOR_CPU = 1
LOCAL = "10.9.0.2"  # the receiver's address (kernel or quadsock), on a /16
# The veth's NAPI kthread (pinned next to the receiver) runs at the default priority, below the
# receiver: the consumer of a receive queue must win the CPU over its producer, or under
# overload the producer fills queues the consumer never gets to drain (receive livelock; Mogul
# and Ramakrishnan, 1997). Measured here with both at -20: at 7.7 Mpps offered quadsock with 500
# connected sockets delivered 0.05 Mpps, and capacities flipped between about half and twice
# their value from run to run; with the NAPI thread at 0 it delivered 1.3 Mpps at that load.
NAPI_NICE = 0

# The receiver and the generator run at nice -20: on a shared machine, other
# work (someone's compiler) then takes little of their CPUs during a case. Only with the
# scheduler's autogroups off (see autogroup_off): with them on, nice ranks threads only within
# their session, and every other session's build shares a CPU equally with the receiver.
NICE = ["nice", "-n", "-20"]
AUTOGROUP = "/proc/sys/kernel/sched_autogroup_enabled"
# Every receiver's heap on transparent huge pages (glibc >= 2.35 madvises its arenas), as
# quadsockd's container runs (docker/Containerfile): with 100k sockets each datagram's table
# entry and socket are cold, and on 4 KiB pages most of them also miss the TLB (the figure is in
# bench/PERFORMANCE.md).
RECEIVER_ENV = ["env", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"]


class HarnessError(Exception):
    pass


@contextlib.contextmanager
def autogroup_off(path=AUTOGROUP):
    """Turns the scheduler's autogroups off for the block (processes started in it then compete
    by their nice values machine-wide); restores the setting on the way out, also on an
    exception or KeyboardInterrupt (SIGTERM is one in the harness). A kernel without autogroups
    (no file) is left as it is."""
    try:
        with open(path) as f:
            saved = f.read().strip()
    except FileNotFoundError:
        yield None
        return
    if saved != "0":
        with open(path, "w") as f:
            f.write("0")
    try:
        yield saved
    finally:
        if saved != "0":
            with open(path, "w") as f:
                f.write(saved)


def sh(*args, check=True, ns=None, quiet=False):
    """Runs a command (in namespace `ns`), returns its stdout."""
    cmd = list(args)
    if ns is not None:
        cmd = ["ip", "netns", "exec", ns] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_stale_namespaces():
    for line in sh("ip", "netns", "list", check=False).splitlines():
        m = re.match(r"(qsb-(\d+)-\w+)", line)
        if m and not pid_alive(int(m.group(2))):
            sh("ip", "netns", "del", m.group(1), check=False)


class Testbed:
    """The two namespaces and the veth pair; a context manager that removes them."""

    def __init__(self):
        pid = os.getpid()
        self.gen_ns = f"qsb-{pid}-gen"
        self.rx_ns = f"qsb-{pid}-rx"
        self.gen_dev = f"qg{pid % 10**7}"
        self.rx_dev = f"qr{pid % 10**7}"
        self.kernel_address = False
        self.rx_mac = None

    def __enter__(self):
        remove_stale_namespaces()
        try:
            sh("ip", "netns", "add", self.gen_ns)
            sh("ip", "netns", "add", self.rx_ns)
            sh("ip", "link", "add", self.gen_dev, "netns", self.gen_ns, "type", "veth", "peer",
               "name", self.rx_dev, "netns", self.rx_ns)
            for ns, dev in ((self.gen_ns, self.gen_dev), (self.rx_ns, self.rx_dev)):
                sh("ip", "-n", ns, "link", "set", "lo", "up")
                sh("ip", "-n", ns, "link", "set", dev, "up")
            # veth takes XDP frames (the generator's XDP_TX) only into a peer with NAPI: GRO on
            # gives it NAPI also without an XDP program (the kernel cases). Threaded NAPI puts
            # that work in a kthread that we pin next to the receiver.
            sh("ethtool", "-K", self.rx_dev, "gro", "on", ns=self.rx_ns)
            sh("sh", "-c", f"echo 1 > /sys/class/net/{self.rx_dev}/threaded", ns=self.rx_ns)
            sh("sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", ns=self.rx_ns)
            sh("sysctl", "-qw", f"net.ipv4.conf.{self.rx_dev}.rp_filter=0", ns=self.rx_ns)
            self.rx_mac = sh("cat", f"/sys/class/net/{self.rx_dev}/address",
                             ns=self.rx_ns).strip()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        sh("ip", "netns", "del", self.gen_ns, check=False)
        sh("ip", "netns", "del", self.rx_ns, check=False)

    def set_kernel_address(self, present):
        if present == self.kernel_address:
            return
        verb = "add" if present else "del"
        sh("ip", "-n", self.rx_ns, "addr", verb, f"{LOCAL}/16", "dev", self.rx_dev)
        self.kernel_address = present

    def napi_pids(self):
        """The receiving veth's NAPI kthreads."""
        prefix = f"napi/{self.rx_dev}-"[:15]
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if comm.startswith(prefix):
                pids.append(int(pid))
        return pids

    def veth_drops(self):
        """The drop and error counters of both veth ends (`ethtool -S`), as {"gen.NAME" or
        "rx.NAME": count}: losses before XDP or the stack (e.g. gen.tx_queue_0_xdp_xmit_errors,
        frames the generator's XDP_TX could not put on the peer's ring) that the AF_XDP rings
        and the receiver never see."""
        counters = {}
        for role, ns, dev in (("gen", self.gen_ns, self.gen_dev), ("rx", self.rx_ns,
                                                                   self.rx_dev)):
            text = sh("ethtool", "-S", dev, ns=ns, check=False)
            for name, value in drop_counters(text).items():
                counters[f"{role}.{name}"] = value
        return counters

    def pin_napi(self, cpus=(RECEIVER_CPU,)):
        """Pins the receiving veth's NAPI kthreads to the receiver's CPU (or `cpus`); returns how
        many."""
        pids = self.napi_pids()
        for pid in pids:
            os.sched_setaffinity(pid, set(cpus))
            os.setpriority(os.PRIO_PROCESS, pid, NAPI_NICE)
        return len(pids)


def drop_counters(ethtool_s):
    """The counters of `ethtool -S` output whose names say drop or error."""
    counters = {}
    for line in ethtool_s.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and ("drop" in name or "error" in name) and value.strip().isdigit():
            counters[name] = int(value)
    return counters


def counter_deltas(before, after):
    """after - before, per counter present in both."""
    return {k: after[k] - before[k] for k in after if k in before}


def cpu_seconds(pids):
    """CPU time so far of every thread of `pids` (/proc/<pid>/task/*/schedstat), in seconds."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9


def read_line(proc, want, timeout):
    """Reads proc's stdout until a line starting with `want`; returns it (None at EOF)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError(f"no {want!r} from {proc.args[7]} within {timeout:.0f} s")
            if not sel.select(left):
                continue
            line = proc.stdout.readline()
            if not line:
                return None
            if line.startswith(want):
                return line
    finally:
        sel.close()


def stop(proc):
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
