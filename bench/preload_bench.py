"""Unmodified programs on quadsock against the same programs on the kernel, in one run (the
preload library, clients/preload): ratios side by side, for bench/README.md ("Preload").

  latency     sockperf ping-pong, 64 bytes: p50 and p99 of sockperf's server on the kernel, and
              of the same server under quadsock-run, without and with busy polling; then again
              with quadsockd on the client's CPU, its poll thread spinning (--poll_spin_us)
  throughput  sockperf throughput into one server socket: the highest offered rate received
              with at most 1% loss, and the CPU per datagram (the server, the veth's NAPI
              kthread and, for quadsock, quadsockd)
  dns         knotd (one UDP worker) answering dnsperf: the highest query rate answered with at
              most 1% lost, on the kernel, under quadsock-run, and in knotd's own XDP mode on
              the same veth (the ceiling)
  overhead    a TCP transfer on loopback (iperf3), with and without the preload library: what a
              program that uses only kernel sockets pays for it

Servers (and quadsockd) on CPU 0, clients on CPU 1: bench/testbed.py's two namespaces and veth.
The spinning quadsockd of the last latency rows is on CPU 1: beside the server, its spin would
take the CPU the program answers on. For latency the receiving veth's NAPI kthread (the
kernel's receive path; XDP for quadsock) is on CPU 1 in every case, where a veth without
threaded NAPI receives (the sender's CPU): left to the scheduler, it lands on either CPU from
run to run, and beside a spinning program on CPU 0 it doubled quadsock's round trip. For
throughput and DNS it is on CPU 0, with the server (as in netbench.py): there it costs the
server's CPU, not the clients' (on CPU 1 it held both clients to the same rate; left to the
scheduler, the kernel's capacity moved by 50% from run to run).

    sudo /usr/bin/python3 bench/preload_bench.py --quadsockd=Q --library=L --run=R [--seconds=3]
        [--parts=latency,throughput,dns,overhead]
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from quadsockd_run import Quadsockd  # noqa: E402
from testbed import LOCAL, HarnessError, Testbed, cpu_seconds, sh  # noqa: E402

CLIENT = "10.9.255.1"
SERVER_CPU, CLIENT_CPU = "0", "1"
RATES = [25_000, 50_000, 100_000, 200_000, 400_000]
PARTS = ("latency", "throughput", "dns", "overhead")
DNS_RATES = [10_000, 20_000, 40_000, 80_000, 160_000, 320_000]
# The spinning quadsockd's --poll_spin_us: longer than the program takes to answer (a ping-pong
# round trip is 10-30 us here), so that the answer is sent with no wake-up.
SPIN_US = 50
ZONE = """$ORIGIN example.test.
$TTL 3600
@    SOA ns.example.test. admin.example.test. 1 3600 900 604800 300
@    NS  ns
ns   A   192.0.2.53
www  A   192.0.2.80
"""


class Bench:
    def __init__(self, args, tb):
        self.args, self.tb = args, tb
        self.tmp = tempfile.mkdtemp(prefix="qsb-preload-")
        self.quadsockd = None
        self.quadsockd_case = None

    def on(self, case):
        """Sets the receiving side up for `case`: "kernel" (the address the kernel's),
        "quadsock" (quadsockd serving it, on the server's CPU) or "spin" (quadsockd serving it
        on the client's CPU, its poll thread spinning SPIN_US after each frame)."""
        if self.quadsockd and self.quadsockd_case != case:
            self.quadsockd.close()
            self.quadsockd = None
        if case == "kernel":
            self.tb.set_kernel_address(True)
        elif self.quadsockd is None:
            self.tb.set_kernel_address(False)
            cpu, flags = ((SERVER_CPU, []) if case == "quadsock" else
                          (CLIENT_CPU, [f"--poll_spin_us={SPIN_US}"]))
            self.quadsockd = Quadsockd(self.tb, os.path.dirname(self.args.quadsockd), "preload",
                                       wait=20, cpu=cpu, flags=flags)
        self.quadsockd_case = case

    def napi_on(self, cpu):
        """Puts the receiving veth's NAPI kthreads on `cpu`."""
        if self.tb.pin_napi([int(cpu)]) == 0:
            raise HarnessError("the receiving veth has no NAPI kthread")

    def server(self, argv, case, busy_poll=0):
        env = dict(os.environ)
        prefix = []
        if case != "kernel":
            env.update(QUADSOCK_TARGET=self.quadsockd.listen, QUADSOCK_REQUIRE="1",
                       QUADSOCK_PRELOAD_LIBRARY=self.args.library,
                       QUADSOCK_BUSY_POLL=str(busy_poll))
            prefix = [self.args.run]
        return subprocess.Popen(["ip", "netns", "exec", self.tb.rx_ns, "taskset", "-c",
                                 SERVER_CPU] + prefix + argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def client(self, argv, timeout=120):
        return sh("taskset", "-c", CLIENT_CPU, *argv, ns=self.tb.gen_ns, check=False)

    def server_pids(self, proc):
        """The server's own pid (under ip netns exec, taskset and the wrapper: the exec'd
        program keeps the first pid), quadsockd's, and the NAPI kthreads."""
        pids = [proc.pid] + self.tb.napi_pids()
        if self.quadsockd:
            pids.append(self.quadsockd.proc.pid)
        return pids

    def stop(self, proc):
        proc.send_signal(2)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        return out

    # --- sockperf.

    def latency(self, case, busy_poll=0):
        self.on(case)
        self.napi_on(CLIENT_CPU)
        srv = self.server(["sockperf", "server", "-i", LOCAL, "-p", "11111"], case, busy_poll)
        time.sleep(1)
        out = self.client(["sockperf", "ping-pong", "-i", LOCAL, "-p", "11111", "-t",
                           str(self.args.seconds), "--msg-size", "64"])
        self.stop(srv)
        p = {}
        for q in ("50.000", "99.000"):
            m = re.search(r"percentile %s =\s+([\d.]+)" % re.escape(q), out)
            p[q] = float(m.group(1)) if m else None
        return {"p50_us": p["50.000"], "p99_us": p["99.000"]}

    def throughput_at(self, case, rate):
        srv = self.server(["sockperf", "server", "-i", LOCAL, "-p", "11112"], case)
        time.sleep(1)
        before = cpu_seconds(self.server_pids(srv))
        out = self.client(["sockperf", "throughput", "-i", LOCAL, "-p", "11112", "-t",
                           str(self.args.seconds), "--mps", str(rate), "--msg-size", "64"])
        cpu = cpu_seconds(self.server_pids(srv)) - before
        text = self.stop(srv)
        sent = re.search(r"Total of (\d+) messages sent", out)
        got = re.search(r"Total (\d+) messages received", text)
        if not sent or not got:
            return None
        sent, got = int(sent.group(1)), int(got.group(1))
        return {"rate": rate, "sent": sent, "received": got,
                "loss": max(0.0, 1 - got / sent), "cpu_us_per_datagram": 1e6 * cpu / max(got, 1)}

    def throughput(self, case):
        self.on(case)
        self.napi_on(SERVER_CPU)
        points = [self.throughput_at(case, r) for r in RATES]
        good = [p for p in points if p and p["loss"] <= 0.01]
        best = max(good, key=lambda p: p["rate"]) if good else None
        return {"points": points, "capacity": best["received"] / self.args.seconds if best else 0,
                "cpu_us_per_datagram": best["cpu_us_per_datagram"] if best else None}

    # --- knotd and dnsperf.

    def dns(self, case):
        """`case`: "kernel", "quadsock", or "xdp" (knotd's own AF_XDP mode on the veth, the
        kernel holding the address: the ceiling anchor)."""
        self.on("quadsock" if case == "quadsock" else "kernel")
        self.napi_on(SERVER_CPU)
        d = tempfile.mkdtemp(prefix="knot-", dir=self.tmp)
        with open(os.path.join(d, "example.test.zone"), "w") as f:
            f.write(ZONE)
        conf = os.path.join(d, "knot.conf")
        xdp = f"xdp:\n    listen: {self.tb.rx_dev}@53\n    udp: on\n" if case == "xdp" else ""
        with open(conf, "w") as f:
            f.write(f"server:\n    listen: {LOCAL}@53\n    rundir: {d}\n    udp-workers: 1\n"
                    f"    tcp-workers: 1\n    background-workers: 1\n{xdp}database:\n"
                    f"    storage: {d}\nzone:\n  - domain: example.test\n"
                    f"    file: {d}/example.test.zone\n")
        queries = os.path.join(d, "queries")
        with open(queries, "w") as f:
            f.write("www.example.test A\nns.example.test A\nexample.test SOA\n")
        knotd = self.server(["knotd", "-c", conf], "quadsock" if case == "quadsock" else "kernel")
        time.sleep(1.5)
        points = []
        for rate in DNS_RATES:
            out = self.client(["dnsperf", "-s", LOCAL, "-d", queries, "-l",
                               str(self.args.seconds), "-Q", str(rate), "-c", "1", "-q", "1000"])
            sent = re.search(r"Queries sent:\s+(\d+)", out)
            done = re.search(r"Queries completed:\s+(\d+)", out)
            if sent and done:
                s, c = int(sent.group(1)), int(done.group(1))
                points.append({"rate": rate, "sent": s, "completed": c,
                               "loss": max(0.0, 1 - c / max(s, 1))})
        self.stop(knotd)
        if case == "xdp":  # knotd leaves its XDP program on the veth
            sh("ip", "link", "set", "dev", self.tb.rx_dev, "xdp", "off", ns=self.tb.rx_ns,
               check=False)
        good = [p for p in points if p["loss"] <= 0.01]
        best = max(good, key=lambda p: p["rate"]) if good else None
        return {"points": points,
                "capacity": best["completed"] / self.args.seconds if best else 0}

    # --- what the library costs a program that uses only kernel sockets.

    def overhead(self):
        results = {"kernel": [], "preload": []}
        for _ in range(self.args.rounds):
            for which in ("kernel", "preload"):
                srv = subprocess.Popen(["taskset", "-c", SERVER_CPU, "iperf3", "-s", "-1", "-p",
                                        "5299"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                time.sleep(0.5)
                prefix = [self.args.run] if which == "preload" else []
                env = dict(os.environ, QUADSOCK_PRELOAD_LIBRARY=self.args.library,
                           QUADSOCK_TARGET="unix:/nonexistent")
                out = subprocess.run(["taskset", "-c", CLIENT_CPU] + prefix +
                                     ["iperf3", "-c", "127.0.0.1", "-p", "5299", "-t",
                                      str(self.args.seconds), "-J"], env=env,
                                     capture_output=True, text=True).stdout
                srv.wait(timeout=30)
                results[which].append(json.loads(out)["end"]["sum_received"]["bits_per_second"])
        return {k: statistics.median(v) for k, v in results.items()} | {"rounds": results}


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quadsockd", required=True)
    parser.add_argument("--library", required=True)
    parser.add_argument("--run", required=True, help="quadsock-run")
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="overhead: alternating rounds")
    parser.add_argument("--out", default="bench/results/preload.json")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="which to measure, of " + ",".join(PARTS) + " (default: all)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if not parts <= set(PARTS):
        parser.error("--parts: unknown %s" % ",".join(sorted(parts - set(PARTS))))
    args.quadsockd, args.library, args.run = (os.path.abspath(p) for p in
                                              (args.quadsockd, args.library, args.run))
    r = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
         "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()}
    with Testbed() as tb:
        sh("ip", "addr", "add", f"{CLIENT}/16", "dev", tb.gen_dev, ns=tb.gen_ns)
        # The kernel's clients leave UDP checksums to an offload that a veth never runs.
        sh("ethtool", "-K", tb.gen_dev, "tx", "off", ns=tb.gen_ns)
        b = Bench(args, tb)
        try:
            # The kernel's runs first, then quadsock's: quadsockd starts once.
            if "latency" in parts:
                r["latency"] = {"kernel": b.latency("kernel")}
            if "throughput" in parts:
                r["throughput"] = {"kernel": b.throughput("kernel")}
            if "dns" in parts:
                r["dns"] = {"kernel": b.dns("kernel"), "knot_xdp": b.dns("xdp")}
            if "latency" in parts:
                r["latency"]["preload"] = b.latency("quadsock")
                r["latency"]["preload_busy"] = b.latency("quadsock", busy_poll=200)
            if "throughput" in parts:
                r["throughput"]["preload"] = b.throughput("quadsock")
            if "dns" in parts:
                r["dns"]["preload"] = b.dns("quadsock")
            if "latency" in parts:
                r["latency"]["spin"] = b.latency("spin")
                r["latency"]["spin_busy"] = b.latency("spin", busy_poll=200)
        finally:
            if b.quadsockd:
                b.quadsockd.close()
    if "overhead" in parts:
        r["overhead"] = Bench(args, None).overhead()
    r["ratios"] = {}
    if "latency" in parts:
        lat = r["latency"]
        r["ratios"].update({
            "latency_p50_preload": ratio(lat["preload"]["p50_us"], lat["kernel"]["p50_us"]),
            "latency_p99_preload": ratio(lat["preload"]["p99_us"], lat["kernel"]["p99_us"]),
            "latency_p50_busy": ratio(lat["preload_busy"]["p50_us"], lat["kernel"]["p50_us"]),
            "latency_p99_busy": ratio(lat["preload_busy"]["p99_us"], lat["kernel"]["p99_us"]),
            "latency_p50_spin": ratio(lat["spin"]["p50_us"], lat["kernel"]["p50_us"]),
            "latency_p99_spin": ratio(lat["spin"]["p99_us"], lat["kernel"]["p99_us"]),
            "latency_p50_spin_busy": ratio(lat["spin_busy"]["p50_us"], lat["kernel"]["p50_us"]),
            "latency_p99_spin_busy": ratio(lat["spin_busy"]["p99_us"], lat["kernel"]["p99_us"]),
        })
    if "throughput" in parts:
        tp = r["throughput"]
        r["ratios"].update({
            "throughput_capacity": ratio(tp["preload"]["capacity"], tp["kernel"]["capacity"]),
            "throughput_per_cpu": ratio(tp["kernel"]["cpu_us_per_datagram"],
                                        tp["preload"]["cpu_us_per_datagram"]),
        })
        print("throughput capacity kernel %.0f preload %.0f"
              % (tp["kernel"]["capacity"], tp["preload"]["capacity"]))
    if "dns" in parts:
        dns = r["dns"]
        r["ratios"].update({
            "dns_capacity": ratio(dns["preload"]["capacity"], dns["kernel"]["capacity"]),
            "dns_of_knot_xdp": ratio(dns["preload"]["capacity"], dns["knot_xdp"]["capacity"]),
        })
        print("dns capacity kernel %.0f preload %.0f xdp %.0f"
              % (dns["kernel"]["capacity"], dns["preload"]["capacity"],
                 dns["knot_xdp"]["capacity"]))
    if "overhead" in parts:
        r["ratios"]["tcp_loopback"] = ratio(r["overhead"]["preload"], r["overhead"]["kernel"])
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r["ratios"], indent=1))
    print(json.dumps({k: r[k] for k in ("latency", "overhead") if k in r}, indent=1))


if __name__ == "__main__":
    main()
