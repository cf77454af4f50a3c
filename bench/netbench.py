"""The network benchmarks' harness: two namespaces joined by a veth pair, a receiver pinned to
CPU 0 in one, the project's XDP generator (trafficgen) pinned to CPU 1 in the other, and the
cases of the Linux 6.13 hash4 comparison (bench/seed_table; the AF_XDP benchmark is a subset of them).

Each case starts `receiver` (bench/receiver.cc) in the receiving namespace, waits for READY,
pins the receiving veth's NAPI kthread to CPU 0 (threaded NAPI: the kernel's receive work for
the veth runs there, next to the receiver, so the receiver's whole cost is on one CPU), starts
`trafficgen` (bench/trafficgen.cc) in the sending namespace, and reads the receiver's samples
(packets per second over fixed windows). Two methods:

- capacity (the default): per case, one receiver in --serve mode, and a coarse-to-fine search
  over the paced generator's rate for the highest offered rate it delivers at >= 95% (see
  CAPACITY and search_capacity); every (offered, delivered) point is kept.
- full load (--full-load): the unpaced generator, cases in rounds (so that a burst of other
  load on the shared machine spreads over all of them), then the offered-load sweep.

The app_* cases receive through the real service: quadsockd (its whole process on CPU 0) on
the receiving veth, and `app_receiver` (bench/app_receiver.cc) beside it, a client that opens
the case's sockets, attaches the session's data channel (shared memory) and counts; the
receiver's CPU time is both processes'. Each of their runs ends with the accounting (every
datagram quadsockd delivered to a socket received by the application or counted as dropped);
a run where it does not hold fails the run.

    sudo /usr/bin/python3 bench/netbench.py --bin-dir=DIR --out=/tmp/t.json   # all cases
    (bench/seed_table builds the tools and calls this; `--smoke` runs ~1 s per case.)

Namespaces and veths are named after this process (qsb-PID-*) and removed on exit, on an
exception and on SIGINT/SIGTERM; stale ones of dead runs are removed at start.
"""

import argparse
import contextlib
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from netbench_report import (CAPACITY_FRACTION, capacity_markdown, evaluate, machine, markdown,
                             parse_wake_latency, plot, round_ratios)
from quadsockd_run import QUADSOCKD_FLAGS, Quadsockd, quadsockd_path  # noqa: F401
from testbed import (GENERATOR_CPU, LOCAL, NICE, RECEIVER_CPU, RECEIVER_ENV, HarnessError,
                     Testbed, autogroup_off, counter_deltas, cpu_seconds, read_line, stop)

PORT = 4000
CONNECTED_BASE = "10.9.1.1"  # connected peers: flow i from CONNECTED_BASE + i // 50000
MISS_BASE = "10.9.2.1"  # flows that no socket is connected to (hash4 misses, new flows)
PORT_BASE = 10000
PORTS_PER_IP = 50000
MISS_FLOWS = 50000
BUSY_RETRIES = 6  # see start_receiver

# name -> (receiver arguments, generator flows, generator source base, kernel address needed)
CASES = {
    "kernel_unconnected": (["--mode=kernel", "--listener"], 500, CONNECTED_BASE, True),
    "kernel_conn500": (["--mode=kernel", "--sockets=500"], 500, CONNECTED_BASE, True),
    "kernel_conn500_miss": (["--mode=kernel", "--sockets=500", "--listener"], MISS_FLOWS,
                            MISS_BASE, True),
    "quadsock_unconnected": (["--mode=quadsock", "--listener"], 500, CONNECTED_BASE, False),
    "quadsock_conn500_hash4off": (["--mode=quadsock", "--sockets=500", "--hash4=false"], 500,
                                  CONNECTED_BASE, False),
    "quadsock_conn500": (["--mode=quadsock", "--sockets=500"], 500, CONNECTED_BASE, False),
    "quadsock_conn10k": (["--mode=quadsock", "--sockets=10000"], 10000, CONNECTED_BASE, False),
    "quadsock_conn100k": (["--mode=quadsock", "--sockets=100000"], 100000, CONNECTED_BASE,
                          False),
    "quadsock_newflow_conn100k": (["--mode=quadsock", "--sockets=100000", "--listener"],
                                  MISS_FLOWS, MISS_BASE, False),
    "ceiling_xdp_drop": (["--mode=xdpdrop"], 500, CONNECTED_BASE, False),
    "ceiling_afxdp": (["--mode=afxdp"], 500, CONNECTED_BASE, False),
    # The real quadsockd on the receiving veth and a separate application process
    # (bench/app_receiver.cc, through clients/cpp) that opens the same sockets as the cases
    # above and takes their datagrams from the session's data channel: shared memory (_shm) or
    # the StreamChannel gRPC stream over the same Unix socket (_grpc).
    "app_quadsock_unconnected_shm": (["--listener"], 500, CONNECTED_BASE, False),
    "app_quadsock_conn500_shm": (["--sockets=500"], 500, CONNECTED_BASE, False),
    "app_quadsock_conn100k_shm": (["--sockets=100000"], 100000, CONNECTED_BASE, False),
    "app_quadsock_unconnected_grpc": (["--listener", "--transport=grpc"], 500, CONNECTED_BASE,
                                      False),
    "app_quadsock_conn500_grpc": (["--sockets=500", "--transport=grpc"], 500, CONNECTED_BASE,
                                  False),
}
ALL_CASES = list(CASES)
APP_CASES = {c for c in CASES if c.startswith("app_")}
# The application's data channel: slots per ring (quadsockd's default is 1024; 4096 covers a
# scheduling delay of the application about as long as the AF_XDP ring's does).
APP_RING_SLOTS = 4096
# How long an application may take for its final report (it lists up to 100k sockets' counters).
FINAL_REPORT_SECONDS = 300
# Not a case of the table: a receiver that gets nothing (500 connected sockets, traffic from
# flows none of them is connected to, no listener), for the smoke test to see that a broken
# case fails the run. `--cases=broken_selftest` only.
CASES["broken_selftest"] = (["--mode=quadsock", "--sockets=500"], MISS_FLOWS, MISS_BASE, False)

# Offered-load sweep: the receivers, and the offered rates (pps).
SWEEP_CASES = ["kernel_conn500", "quadsock_conn500"]
SWEEP_RATES = [100e3, 200e3, 400e3, 600e3, 800e3, 1.0e6, 1.3e6, 1.6e6, 2.0e6, 2.5e6, 3.0e6]
SMOKE_SWEEP_RATES = [50e3, 200e3]


def receiver_command(tb, bins, name, extra, listen=None):
    """The receiver's command line for case `name` (and the kernel's address set for it); for
    an app_* case the application's, a client of quadsockd at `listen`."""
    rx_args, _, _, kernel = CASES[name]
    tb.set_kernel_address(kernel)
    if name in APP_CASES:
        return ["ip", "netns", "exec", tb.rx_ns, *NICE, *RECEIVER_ENV,
                os.path.join(bins, "app_receiver"), *rx_args, f"--listen={listen}",
                f"--local={LOCAL}", f"--port={PORT}", f"--ip_base={CONNECTED_BASE}",
                f"--port_base={PORT_BASE}", f"--ports_per_ip={PORTS_PER_IP}",
                f"--ring_slots={APP_RING_SLOTS}", f"--cpu={RECEIVER_CPU}", *extra]
    return ["ip", "netns", "exec", tb.rx_ns, *NICE, *RECEIVER_ENV,
            os.path.join(bins, "receiver"), *rx_args,
            f"--interface={tb.rx_dev}", f"--local={LOCAL}", f"--port={PORT}",
            f"--ip_base={CONNECTED_BASE}", f"--port_base={PORT_BASE}",
            f"--ports_per_ip={PORTS_PER_IP}", f"--cpu={RECEIVER_CPU}", *extra]


def generator_command(tb, bins, flows, base, seconds, rate):
    return ["ip", "netns", "exec", tb.gen_ns, *NICE, os.path.join(bins, "trafficgen"),
            f"--interface={tb.gen_dev}", f"--dst_mac={tb.rx_mac}", f"--dst={LOCAL}:{PORT}",
            f"--flows={flows}", f"--ports_per_ip={PORTS_PER_IP}", f"--ip_base={base}",
            f"--port_base={PORT_BASE}", f"--duration={seconds}", f"--rate={rate}",
            f"--cpu={GENERATOR_CPU}"]


def accounting_problem(name, details):
    """For an app_* case: why its application's accounting does not hold (None if it does):
    every datagram quadsockd delivered to a socket was received by the application, counted as
    dropped, or is queued (bench/app_receiver.cc)."""
    if name not in APP_CASES:
        return None
    d = details or {}
    if d.get("accounting_ok") == 1:
        return None
    return (f"{name}: accounting: received {d.get('received')} + dropped "
            f"{d.get('socket_rx_dropped')} + queued {d.get('socket_queued')} against "
            f"{d.get('udp_delivered')} delivered to the sockets ({d.get('socket_rx_datagrams')} "
            f"on the channel)" if d else f"{name}: accounting: no details from the application")


class Receiving:
    """A case's receiving side: the receiver process (the one that speaks READY, COUNT and
    the JSON line), and for an app_* case quadsockd beside it. pids() are what CPU 0's receiver
    time is taken over."""

    def __init__(self, tb, bins, name, extra, stdin, wait):
        self.daemon = None
        listen = None
        # Before quadsockd starts: it refuses an address the kernel holds (a kernel_* case
        # before it leaves LOCAL on the veth).
        tb.set_kernel_address(CASES[name][3])
        if name in APP_CASES:
            self.daemon = Quadsockd(tb, bins, name, wait, retries=BUSY_RETRIES)
            listen = self.daemon.listen
        try:
            self.proc = start_receiver(tb, receiver_command(tb, bins, name, extra, listen), name,
                                       stdin=stdin, wait=wait)
        except BaseException:
            self.close()
            raise

    def pids(self):
        return [self.proc.pid] + ([self.daemon.proc.pid] if self.daemon else [])

    def close(self):
        stop(getattr(self, "proc", None))
        if self.daemon is not None:
            self.daemon.close()


def start_receiver(tb, cmd, name, stdin, wait):
    """Starts a receiver, waits for its READY and pins the NAPI kthread. The kernel lets go of
    an AF_XDP socket's queue in deferred work after its process ends: a receiver that finds the
    queue busy is started again, 0.5 s later, up to BUSY_RETRIES times."""
    for attempt in range(BUSY_RETRIES + 1):
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            if read_line(proc, "READY", timeout=wait) is not None:
                if tb.pin_napi() == 0:
                    raise HarnessError(f"{name}: no NAPI kthread for {tb.rx_dev} to pin")
                return proc
            proc.wait(timeout=5)
            err = proc.stderr.read().strip()
        except BaseException:
            stop(proc)
            raise
        if "Device or resource busy" not in err or attempt == BUSY_RETRIES:
            raise HarnessError(f"{name}: receiver failed: {err}")
        time.sleep(0.5)


def run_case(tb, bins, name, timing, rate=0.0):
    """One run of case `name`; returns the receiver's samples, details and the generator's."""
    _, flows, base, _ = CASES[name]
    rx_extra = [f"--warmup={timing['warmup']}", f"--window={timing['window']}",
                f"--samples={timing['windows']}", f"--wait={timing['wait']}"]
    duration = timing["wait"] + timing["warmup"] + timing["windows"] * timing["window"] + 1
    gen_cmd = generator_command(tb, bins, flows, base, duration, rate)
    receiving = rx = gen = None
    try:
        receiving = Receiving(tb, bins, name, rx_extra, stdin=None, wait=120)
        rx = receiving.proc
        load = os.getloadavg()[0]
        gen = subprocess.Popen(gen_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        # An application case reports after taking its accounting from quadsockd (a List of
        # up to 100k sockets): bounded, but by the machine's load, not by the case's length.
        line = read_line(rx, "{", timeout=duration + (300 if name in APP_CASES else 30))
        rx.wait(timeout=10)
        stop(gen)
        gen_out, gen_err = gen.communicate(timeout=10)
        if line is None:
            raise HarnessError(f"{name}: receiver ended without a result: "
                               f"{rx.stderr.read().strip()}")
        result = json.loads(line)
        gen_lines = [l for l in gen_out.splitlines() if l.startswith("{")]
        if gen.returncode != 0 or not gen_lines:
            raise HarnessError(f"{name}: generator failed: {gen_err.strip()}")
        result["generator"] = json.loads(gen_lines[-1])
        result["loadavg"] = load
        problem = accounting_problem(name, result.get("details"))
        if problem:
            raise HarnessError(problem)
        return result
    finally:
        stop(gen)
        if receiving is not None:
            receiving.close()


# --- Capacity: the highest offered rate a receiver delivers at >= CAPACITY_FRACTION.
#
# One receiver per case runs in --serve mode for the whole search (it keeps a running count);
# each point runs the paced generator for a fixed time at a requested rate and compares what
# the receiver counted while it ran (not what it drains from its queues afterwards) with the
# frames the generator sent.
# The generator's own pps, not the rate asked for, is the offered rate recorded.
CAPACITY = {
    "point_seconds": 1.0,   # generator run per point
    "drain_seconds": 0.1,   # the count is read this often until it stops moving (drained)
    "drain_max_seconds": 5.0,
    "start_pps": 50e3,      # first paced rate; doubled until a point fails
    "floor_pps": 5e3,       # halved down to this when even the first fails
    "first_tries": 2,       # the first paced rate fails only when this many runs in a row do
    "coarse_points": 8,     # at most, doubling (or halving) from start_pps
    "bisections": 4,        # then log-space bisection: 2 ** (1 / 16), about 4.4% apart
    "repeats": 2,           # runs that must all pass for a bisection point to pass
    "runs_at_capacity": 3,  # runs at the rate found, all passing (else it is lowered)
    "case_budget_seconds": 40.0,
    # After every search, the costs at one rate common to the cases that reach it (the cost
    # per packet falls as the rate rises, so costs taken at each case's own capacity compare
    # cases at different rates): common_runs rounds in which each case that passed a point at
    # or above common_pps runs a fresh receiver for a warm-up point and a measured point at
    # common_pps, the cases in turn, so that their ratios share the kernel's drift over the
    # run. 0: none.
    "common_pps": 1.5e6,
    "common_runs": 5,
}
GENERATOR_EXTRA = []  # more trafficgen arguments for the capacity points
SMOKE_CAPACITY = dict(CAPACITY, point_seconds=0.5, coarse_points=1, bisections=0, repeats=1,
                      first_tries=1,
                      runs_at_capacity=1, case_budget_seconds=15.0, common_pps=4e4,
                      common_runs=1)


class ServedReceiver:
    """A receiver in --serve mode: counts until its stdin closes; count() reads the total.
    For an app_* case, quadsockd beside it. After close(), `accounting` says why the case's
    accounting does not hold (None: it does, or the case has none)."""

    def __init__(self, tb, bins, name, wait):
        _, self.flows, self.base, _ = CASES[name]
        self.name = name
        self.accounting = None
        self.final_report_error = None
        self.receiving = Receiving(tb, bins, name, ["--serve"], stdin=subprocess.PIPE,
                                   wait=wait)
        self.proc = self.receiving.proc

    def pids(self):
        return self.receiving.pids()

    def count(self):
        try:
            self.proc.stdin.write("COUNT\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise HarnessError(f"{self.name}: receiver gone: {e}")
        line = read_line(self.proc, "COUNT", timeout=10)
        if line is None:
            raise HarnessError(f"{self.name}: receiver ended: {self.proc.stderr.read().strip()}")
        return int(line.split()[1])

    def close(self):
        """Stops the receiver; returns its final JSON (None if it gave none)."""
        result = None
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                # An application reads quadsockd's counters of up to 100k sockets first: on a
                # loaded machine (CI beside other work) that alone has taken over a minute.
                line = read_line(self.proc, "{", timeout=FINAL_REPORT_SECONDS)
                result = json.loads(line) if line else None
            except (OSError, HarnessError, ValueError) as e:
                self.final_report_error = str(e)
        self.receiving.close()
        self.accounting = accounting_problem(self.name, (result or {}).get("details"))
        if self.accounting and result is None:
            self.accounting += (f" (no final report within {FINAL_REPORT_SECONDS} s: "
                                f"{self.final_report_error or 'it ended without one'})")
        return result


def run_generator(tb, bins, flows, base, seconds, rate):
    cmd = generator_command(tb, bins, flows, base, seconds, rate) + GENERATOR_EXTRA
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        raise HarnessError("generator did not end")
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise HarnessError(f"generator failed: {p.stderr.strip()}")
    return json.loads(lines[-1])


def settle(rx, cfg):
    """Waits until the receiver's count stops moving (its queues drained); returns it."""
    last = rx.count()
    deadline = time.monotonic() + cfg["drain_max_seconds"]
    while time.monotonic() < deadline:
        time.sleep(cfg["drain_seconds"])
        now = rx.count()
        if now == last:
            break
        last = now
    return last


def capacity_point(tb, bins, rx, rate, cfg, phase):
    """One point: the generator at `rate` (0: unpaced) for point_seconds. Delivered is what the
    receiver counted from just before the generator started to just after it ended; what
    arrives later (drained from queues) is recorded as `late` but not counted, so a receiver
    that only queues does not pass. The receiver is drained before and after."""
    before = settle(rx, cfg)
    napi = tb.napi_pids()
    drops0 = tb.veth_drops()
    cpu0 = cpu_seconds(napi), cpu_seconds(rx.pids())
    gen = run_generator(tb, bins, rx.flows, rx.base, cfg["point_seconds"], rate)
    at_end = rx.count()
    cpu1 = cpu_seconds(napi), cpu_seconds(rx.pids())
    drops = counter_deltas(drops0, tb.veth_drops())
    late = settle(rx, cfg) - at_end
    received = at_end - before
    frames, seconds = gen["frames"], gen["seconds"]
    fraction = received / frames if frames else 0.0
    # CPU 0's time while the generator ran: the kernel's share of receiving (the veth's NAPI
    # thread: XDP, the AF_XDP copy, or the skb and UDP path) and the receiver's own threads
    # (an app_* case: quadsockd's and the application's).
    return {"phase": phase, "requested_pps": rate, "offered_pps": gen["pps"],
            "delivered_pps": received / seconds if seconds else 0.0, "frames": frames,
            "received": received, "late": late, "fraction": fraction,
            "napi_cpu_s": round(cpu1[0] - cpu0[0], 4),
            "receiver_cpu_s": round(cpu1[1] - cpu0[1], 4),
            # Lost at the veth, before XDP (both ends' drop and error counters, during the
            # generator's run).
            "veth_drops": drops,
            "passed": frames > 0 and fraction >= CAPACITY_FRACTION}


def search_capacity(tb, bins, name, cfg, log):
    """Coarse-to-fine search for case `name`; returns the case's capacity entry."""
    started = time.monotonic()
    points = []
    rx = ServedReceiver(tb, bins, name, wait=120)
    load = os.getloadavg()[0]
    # The budget bounds the search, not the setup (100k sockets through quadsockd's gRPC take
    # seconds).
    searching = time.monotonic()

    def over_budget():
        return time.monotonic() - searching > cfg["case_budget_seconds"]

    def point(rate, phase):
        p = capacity_point(tb, bins, rx, rate, cfg, phase)
        points.append(p)
        log(f"{name}: {phase} asked {rate / 1e6:.3f} -> offered {p['offered_pps'] / 1e6:.3f}, "
            f"delivered {p['delivered_pps'] / 1e6:.3f} Mpps ({p['fraction']:.3f})"
            + "".join(f", {k} +{v}" for k, v in p.get("veth_drops", {}).items() if v))
        return p

    def at(r):
        """The runs at rate `r` that count (not those a retry superseded)."""
        return [p for p in points if p["requested_pps"] == r and not p.get("retried")]

    def all_pass(r):
        return bool(at(r)) and all(p["passed"] for p in at(r))

    def decide(rate, phase, runs):
        """Whether `runs` runs at `rate` all pass (stops at the first that fails)."""
        return all(point(rate, phase)["passed"] for _ in range(max(runs, 0)))

    final = None
    try:
        # The generator's unpaced rate bounds the search; a receiver that keeps up with it
        # is limited by the generator (capacity at least that).
        top = point(0, "unpaced")
        lo, hi = None, None  # highest passing, lowest failing requested rate
        found = None
        if top["passed"] and decide(0, "confirm", cfg["runs_at_capacity"] - 1):
            found = 0
        else:
            rate = cfg["start_pps"]
            # One failing run at the first rate (a scheduling hiccup on a shared machine) does
            # not decide the case: only halving follows from it, so the capacity would come out
            # below start_pps however fast the case is. A failed run that a retry supersedes
            # stays in `points`, marked `retried`, and no longer counts.
            first = point(rate, "coarse")
            for _ in range(cfg["first_tries"] - 1):
                if first["passed"] or over_budget():
                    break
                first["retried"] = True
                first = point(rate, "coarse retry")
            if first["passed"]:
                lo = rate
                for _ in range(cfg["coarse_points"] - 1):
                    if over_budget():
                        break
                    rate *= 2
                    if rate >= top["offered_pps"]:
                        hi = rate
                        break
                    if point(rate, "coarse")["passed"]:
                        lo = rate
                    else:
                        hi = rate
                        break
            else:
                hi = rate
                for _ in range(cfg["coarse_points"] - 1):
                    if rate / 2 < cfg["floor_pps"] or over_budget():
                        break
                    rate /= 2
                    if point(rate, "coarse")["passed"]:
                        lo = rate
                        break
                    hi = rate
            # Fine: log-space bisection; a rate passes when `repeats` runs in a row do.
            if lo is not None and hi is not None:
                for _ in range(cfg["bisections"]):
                    if over_budget():
                        break
                    mid = (lo * hi) ** 0.5
                    if decide(mid, "fine", cfg["repeats"]):
                        lo = mid
                    else:
                        hi = mid
            # Confirmation: the rate found must have passed `runs_at_capacity` times, and
            # never failed. If it fails, it becomes the upper bound: back to the highest rate
            # below it that never failed, and bisect once more from there.
            while lo is not None and cfg["runs_at_capacity"] > 1 and not over_budget():
                done = len(at(lo))
                if all_pass(lo) and decide(lo, "confirm", cfg["runs_at_capacity"] - done):
                    break
                hi = lo
                below = [p["requested_pps"] for p in points
                         if 0 < p["requested_pps"] < lo and all_pass(p["requested_pps"])]
                lo = max(below) if below else None
                if lo is not None and hi / lo > 2 ** (1 / 16) and not over_budget():
                    mid = (lo * hi) ** 0.5
                    if decide(mid, "fine", cfg["repeats"]):
                        lo = mid
            found = lo
        # The capacity is at a rate where every point passed; if the search ran out of time
        # on a failing rate, the highest all-passing rate below it.
        if found is not None and not all_pass(found):
            below = [p["requested_pps"] for p in points
                     if 0 < p["requested_pps"] < found and all_pass(p["requested_pps"])]
            found = max(below) if below else None
        if found is not None:
            final = at(found)
        else:
            # Nothing passed: the points at the lowest rate tried (a broken case gives zeros).
            paced = [p["requested_pps"] for p in points if p["requested_pps"] > 0]
            lowest = min(paced) if paced else 0
            final = at(lowest)
    finally:
        details = rx.close()
    samples = [p["delivered_pps"] for p in final]
    failing = [p for p in points if not p["passed"]]
    entry = {"name": name,
             "median_pps": statistics.median(samples) if samples else 0.0,
             "min_pps": min(samples) if samples else 0.0,
             "max_pps": max(samples) if samples else 0.0,
             "samples": samples,
             "capacity_pps": (statistics.median(p["offered_pps"] for p in final)
                              if found is not None else 0.0),
             "capacity_requested_pps": found,
             # CPU 0 per packet received at capacity (medians over its runs), microseconds.
             "napi_us_per_packet": per_packet(final, "napi_cpu_s"),
             "receiver_us_per_packet": per_packet(final, "receiver_cpu_s"),
             "cpu_pps": cpu_rate(final),
             "generator_limited": found == 0,
             "first_failing": (min(failing, key=lambda p: p["offered_pps"])
                               if failing else None),
             "points": points,
             "details": [details["details"]] if details else [],
             "loadavg": [load],
             "seconds": round(time.monotonic() - started, 1)}
    if name in APP_CASES:
        # Every datagram accounted for at the application, per receiver run (this one, and each
        # common-rate round's).
        entry["accounting_problems"] = [rx.accounting] if rx.accounting else []
        entry["accounting_runs"] = 1
    return entry


def reached(entry, rate):
    """Whether the case's search passed a point at (about) `rate` or above, or delivered
    `rate` at any point (the unpaced one included). A case whose capacity search stopped low,
    at a point that lost a few percent (the flips described in bench/README), but that
    delivered the rate under overload still runs at it: its cost there is measured, not
    assumed."""
    return any((p["passed"] and p["offered_pps"] >= rate * 0.97) or p["delivered_pps"] >= rate
               for p in entry["points"] if p["phase"] not in ("common warm-up", "common"))


def common_in_turn(tb, bins, entries, cfg, log):
    """The costs at the common rate, the cases that reached it in turn (see CAPACITY). Sets
    every entry's common_* fields (None for a case that did not reach the rate) and adds the
    points to its own."""
    rate = cfg["common_pps"]
    eligible = [e for e in entries if rate and e.get("points") and reached(e, rate)]
    measured = {e["name"]: [] for e in eligible}
    try:
        for r in range(cfg["common_runs"] if eligible else 0):
            for e in eligible:
                started = time.monotonic()
                rx = ServedReceiver(tb, bins, e["name"], wait=120)
                try:
                    for phase in ("common warm-up", "common"):
                        p = capacity_point(tb, bins, rx, rate, cfg, phase)
                        e["points"].append(p)
                        log(f"{e['name']}: {phase} {r + 1}/{cfg['common_runs']}: offered "
                            f"{p['offered_pps'] / 1e6:.3f}, delivered "
                            f"{p['delivered_pps'] / 1e6:.3f} Mpps ({p['fraction']:.3f})")
                    measured[e["name"]].append(p)
                finally:
                    rx.close()
                    if e["name"] in APP_CASES:
                        e["accounting_runs"] = e.get("accounting_runs", 0) + 1
                        if rx.accounting:
                            e.setdefault("accounting_problems", []).append(rx.accounting)
                e["seconds"] = round(e.get("seconds", 0) + time.monotonic() - started, 1)
    finally:
        # What was measured, also when a receiver failed on the way.
        for e in entries:
            common = measured.get(e["name"], [])
            e["common_pps"] = rate if common else None
            e["common_napi_us_per_packet"] = per_packet(common, "napi_cpu_s")
            e["common_receiver_us_per_packet"] = per_packet(common, "receiver_cpu_s")
            e["common_cpu_pps"] = cpu_rate(common)


def cpu_rate(points):
    """Packets per second of CPU 0 (kernel NAPI + receiver) at capacity: the rate one fully
    used CPU would receive. Unlike the capacity, it does not depend on how the scheduler
    interleaves the NAPI thread and the receiver on that CPU; it does on their costs."""
    napi, own = per_packet(points, "napi_cpu_s"), per_packet(points, "receiver_cpu_s")
    if napi is None or own is None or napi + own <= 0:
        return None
    return round(1e6 / (napi + own))


def per_packet(points, key):
    values = [p[key] / p["received"] * 1e6 for p in points if p.get(key) is not None
              and p["received"] > 0]
    return round(statistics.median(values), 3) if values else None


def summarize(name, samples, runs):
    samples = [float(s) for s in samples]
    entry = {"name": name, "median_pps": statistics.median(samples) if samples else 0.0,
             "min_pps": min(samples) if samples else 0.0,
             "max_pps": max(samples) if samples else 0.0, "samples": samples}
    entry["offered_pps"] = [r["generator"]["pps"] for r in runs]
    entry["details"] = [r["details"] for r in runs]
    entry["loadavg"] = [r["loadavg"] for r in runs]
    return entry


def wake_latency(bin_dir):
    """How long a thread asleep on the receiving CPU takes to wake (bench/wake_latency: about a
    second), or None where the tool was not built into `bin_dir`."""
    tool = os.path.join(bin_dir, "wake_latency")
    if not os.path.exists(tool):
        return None
    done = subprocess.run([tool, "--gaps_us=100,2000", "--wakeups=400", f"--cpu={RECEIVER_CPU}",
                           f"--from_cpu={GENERATOR_CPU}"], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise HarnessError(f"wake_latency failed: {done.stderr.strip()}")
    return parse_wake_latency(done.stdout)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def parse_args(argv, default_cases):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin-dir", required=True, help="where receiver and trafficgen are")
    p.add_argument("--out", help="JSON output; the .md and .png go next to it")
    p.add_argument("--cases", default=",".join(default_cases),
                   help=f"comma-separated (default: all): {', '.join(default_cases)}")
    p.add_argument("--smoke", action="store_true",
                   help="two points per case, one common-rate round at 40 kpps, no targets")
    p.add_argument("--rounds", type=int, default=3, help="--full-load: rounds of every case")
    p.add_argument("--windows", type=int, default=3, help="--full-load: windows per round")
    p.add_argument("--window", type=float, default=1.0, help="--full-load: seconds per window")
    p.add_argument("--no-sweep", action="store_true", help="--full-load: no offered-load sweep")
    p.add_argument("--full-load", action="store_true",
                   help="the unpaced medians in rounds and the sweep, instead of the capacity "
                        "search")
    p.add_argument("--command", default=None, help="the command line to record")
    p.add_argument("--no-autogroup", action="store_true",
                   help="turn the scheduler's autogroups off for the run (restored at exit), so "
                        "that nice ranks the receivers against other sessions' work too; not yet "
                        "validated on a quiet machine: it changes how CPU 0 is split between the "
                        "receiver and the veth's NAPI thread")
    return p.parse_args(argv)


def run_full_load(tb, args, cases, title, failures):
    """Full offered load: every case in rounds, then the offered-load sweep."""
    if args.smoke:
        timing = {"warmup": 0.2, "window": 1.0, "windows": 1, "wait": 5}
        rounds = 1
        rates = SMOKE_SWEEP_RATES
    else:
        timing = {"warmup": 0.5, "window": args.window, "windows": args.windows, "wait": 10}
        rounds = args.rounds
        rates = SWEEP_RATES
    sweep_cases = [] if args.no_sweep else [c for c in SWEEP_CASES if c in cases]
    runs = {c: [] for c in cases}
    sweep = []
    for r in range(rounds):
        for c in cases:
            try:
                result = run_case(tb, args.bin_dir, c, timing)
            except HarnessError as e:
                failures.append(str(e))
                print(f"[{title}] {c}: FAILED: {e}", file=sys.stderr, flush=True)
                continue
            runs[c].append(result)
            med = statistics.median(result["samples"]) if result["samples"] else 0
            print(f"[{title}] round {r + 1}/{rounds} {c}: {med / 1e6:.3f} Mpps "
                  f"(offered {result['generator']['pps'] / 1e6:.3f})", file=sys.stderr,
                  flush=True)
    sweep_timing = dict(timing, windows=1 if args.smoke else 2)
    for c in sweep_cases:
        for rate in rates:
            try:
                result = run_case(tb, args.bin_dir, c, sweep_timing, rate=rate)
            except HarnessError as e:
                failures.append(str(e))
                continue
            delivered = statistics.median(result["samples"]) if result["samples"] else 0
            sweep.append({"case": c, "target_pps": rate,
                          "offered_pps": result["generator"]["pps"],
                          "delivered_pps": delivered, "samples": result["samples"]})
            print(f"[{title}] sweep {c}: offered {result['generator']['pps'] / 1e6:.3f} "
                  f"-> delivered {delivered / 1e6:.3f} Mpps", file=sys.stderr, flush=True)
    entries = [summarize(c, [s for r in runs[c] for s in r["samples"]], runs[c])
               for c in cases]
    return entries, sweep, dict(timing, rounds=rounds)


def run_capacity(tb, args, cases, title, failures):
    """The capacity search, case after case; then the common rate, the cases in turn."""
    cfg = SMOKE_CAPACITY if args.smoke else CAPACITY
    entries = []

    def log(msg):
        print(f"[{title}] {msg}", file=sys.stderr, flush=True)

    for c in cases:
        try:
            e = search_capacity(tb, args.bin_dir, c, cfg, log)
        except HarnessError as err:
            failures.append(str(err))
            log(f"{c}: FAILED: {err}")
            e = {"name": c, "median_pps": 0.0, "min_pps": 0.0, "max_pps": 0.0, "samples": [],
                 "capacity_pps": 0.0, "points": [], "error": str(err)}
        entries.append(e)
        log(f"{c}: capacity {e['capacity_pps'] / 1e6:.3f} Mpps"
            + (" (the generator's rate: at least)" if e.get("generator_limited") else "")
            + f" in {e.get('seconds', 0)} s")
    try:
        common_in_turn(tb, args.bin_dir, entries, cfg, log)
    except HarnessError as err:
        failures.append(str(err))
        log(f"common rate: FAILED: {err}")
    for e in entries:
        for problem in e.get("accounting_problems", []):
            failures.append(problem)
            log(f"FAILED: {problem}")
    # The points of every case, as a sweep (delivered against offered).
    sweep = [{"case": e["name"], "target_pps": p["requested_pps"],
              "offered_pps": p["offered_pps"], "delivered_pps": p["delivered_pps"]}
             for e in entries for p in e["points"]]
    return entries, sweep, dict(cfg, fraction=CAPACITY_FRACTION)


def main(argv, default_cases=ALL_CASES, title="hash4 comparison"):
    args = parse_args(argv, default_cases)
    if os.geteuid() != 0:
        print("needs root (namespaces, veth, BPF, AF_XDP)", file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) < 2:
        print("needs two CPUs (receiver on 0, generator on 1)", file=sys.stderr)
        return 2
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"unknown cases: {unknown}; known: {ALL_CASES}", file=sys.stderr)
        return 2

    # SIGTERM unwinds like Ctrl-C, so the namespaces go.
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    failures = []
    method = "full_load" if args.full_load else "capacity"
    wake = {"before": wake_latency(args.bin_dir)}
    with (autogroup_off() if args.no_autogroup else contextlib.nullcontext()), Testbed() as tb:
        if args.full_load:
            entries, sweep, timing = run_full_load(tb, args, cases, title, failures)
        else:
            entries, sweep, timing = run_capacity(tb, args, cases, title, failures)
    wake["after"] = wake_latency(args.bin_dir)

    report = {
        "title": title,
        "method": method,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(RECEIVER_CPU, GENERATOR_CPU),
        "command": args.command or " ".join([sys.argv[0]] + argv),
        "smoke": args.smoke,
        "timing": timing,
        "seconds": round(time.monotonic() - started, 1),
        "cases": entries,
        "sweep": sweep,
        "failures": failures,
        "wake_latency": wake if wake["before"] is not None else None,
    }
    results = {c["name"]: c for c in report["cases"]}
    key = "median_pps" if args.full_load else "capacity_pps"
    report["ratios"], targets = evaluate(results, key)
    report["targets"] = [] if args.smoke else targets
    if not args.full_load:
        report["cpu_ratios"], cpu_targets = evaluate(results, "cpu_pps")
        report["cpu_targets"] = [] if args.smoke else cpu_targets
        report["common_ratios"], common_targets = evaluate(results, "common_cpu_pps")
        report["common_round_ratios"] = round_ratios(results)
        report["common_targets"] = [] if args.smoke else common_targets
    md = markdown(report) if args.full_load else capacity_markdown(report)
    print(md)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        stem = os.path.splitext(args.out)[0]
        with open(stem + ".md", "w") as f:
            f.write(md)
        why = plot(report, stem + ".png", key)
        if why:
            print(f"[{title}] no plot: {why}", file=sys.stderr)
        print(f"[{title}] wrote {args.out}, {stem}.md" + ("" if why else f", {stem}.png"),
              file=sys.stderr)
    # A case that received nothing fails the run (at full load: no packets; capacity: none at
    # the lowest rate tried, or no points at all).
    empty = [c["name"] for c in report["cases"] if c["median_pps"] <= 0]
    if failures or empty:
        print(f"[{title}] FAILED: {len(failures)} failed runs; cases without packets: {empty}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
