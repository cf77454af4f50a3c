"""The echo latency benchmark: round trips of 64-byte UDP datagrams from a kernel client in one
namespace to an echo server on the other end of a veth, at a low and a moderate rate, with the
server one of:
  kernel         the kernel's own UDP socket (recvmmsg/sendmmsg) on the receiving veth
  shm            quadsockd on the veth, the application on its data channel in shared memory,
                 sleeping on the channel's eventfd
  shm_busy       the same, the application busy polling
  grpc           the same, the data channel on its gRPC stream (StreamChannel)
quadsockd and the application (or the kernel's echo server) run on CPU 0, the client on CPU 1
(bench/testbed.py's layout). Reports p50/p99/p99.9 in microseconds and each case's ratio to the
kernel's, measured in one run: absolute figures on a shared machine are noise.

    sudo bench/echo_latency.py --bin-dir=bazel-bin/bench [--rates=1000,20000] [--seconds=5]
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from quadsockd_run import Quadsockd  # noqa: E402
from testbed import (GENERATOR_CPU, LOCAL, NICE, RECEIVER_CPU, Testbed, read_line, sh,  # noqa: E402
                     stop)

CLIENT = "10.9.255.1"
PORT = 7
CASES = ["kernel", "shm", "shm_busy", "grpc"]


def server_counters(app):
    """Stops echo_app and returns what quadsockd counted for its socket (its COUNTERS line):
    received, dropped on the way to the application, sent, dropped on the way out."""
    stop(app)
    for line in app.stdout.read().splitlines():
        if line.startswith("COUNTERS "):
            return json.loads(line[len("COUNTERS "):])
    raise RuntimeError(f"echo_app printed no counters: {app.stderr.read()}")


def losses_outside(tb):
    """Counters of losses outside the echo servers: both veth ends' drops and errors, and the
    client's kernel's UDP receive errors (its socket buffer full)."""
    counters = tb.veth_drops()
    for line in sh("nstat", "-az", "UdpInErrors", "UdpRcvbufErrors", ns=tb.gen_ns,
                   check=False).splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].startswith("Udp") and fields[1].isdigit():
            counters[f"client.{fields[0]}"] = int(fields[1])
    return counters


def where_lost(r):
    """For a run that missed answers, where they were lost: outside the servers (the veth, the
    client's socket buffer), and for quadsockd from its counts for the socket."""
    if r["received"] >= r["sent"]:
        return ""
    outside = ", ".join(f"{k} {v}" for k, v in sorted(r["outside"].items())) or "none"
    c = r.get("server")
    if c is None:
        return f" (counted outside: {outside})"
    return (f" (counted outside: {outside}; "
            f"quadsockd: {c['rx_datagrams']} received, {c['rx_dropped']} of them dropped "
            f"before the application, {c['tx_datagrams']} sent, {c['tx_dropped']} dropped on "
            f"the way out (TX ring full {c['tx_ring_full']}, no TX buffer {c['tx_no_buffer']}, "
            f"waiting for the client's MAC {c.get('neighbor_dropped', 0)})"
            f"{', sends refused' if c['send_refused'] else ''})")


def run(tb, bins, case, rate, seconds):
    tb.set_kernel_address(case == "kernel")
    daemon = None
    app = None
    try:
        cmd = ["ip", "netns", "exec", tb.rx_ns, *NICE, "taskset", "-c", str(RECEIVER_CPU),
               os.path.join(bins, "echo_app"), f"--mode={case}", f"--local={LOCAL}",
               f"--port={PORT}", f"--cpu={RECEIVER_CPU}"]
        if case != "kernel":
            daemon = Quadsockd(tb, bins, f"echo_{case}", wait=60)
            cmd.append(f"--listen={daemon.listen}")
        app = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        if read_line(app, "READY", timeout=60) is None:
            raise RuntimeError(f"{case}: echo_app failed: {app.stderr.read()}")
        # The client's kernel resolves the server first (its queue for that is short).
        sh("ping", "-c", "2", "-i", "0.2", "-W", "2", LOCAL, ns=tb.gen_ns, check=False)
        before = losses_outside(tb)
        out = sh(*NICE, os.path.join(bins, "echo_client"), f"--local={CLIENT}",
                 f"--server={LOCAL}:{PORT}", f"--rate={rate}", f"--seconds={seconds}",
                 f"--cpu={GENERATOR_CPU}", ns=tb.gen_ns)
        result = json.loads(out.strip().splitlines()[-1])
        after = losses_outside(tb)
        result["outside"] = {k: v - before.get(k, 0) for k, v in after.items()
                             if v > before.get(k, 0)}
        if case != "kernel":
            result["server"] = server_counters(app)
        return result
    finally:
        stop(app)
        if daemon is not None:
            daemon.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True, help="where echo_app, echo_client, quadsockd are")
    ap.add_argument("--rates", default="1000,20000", help="datagrams per second, comma-separated")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--out", default="", help="also write the results here (JSON)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("echo_latency: needs root (namespaces, veth, AF_XDP)")
    rates = [float(r) for r in a.rates.split(",")]
    cases = a.cases.split(",")
    results = {}
    with Testbed() as tb:
        sh("ip", "addr", "add", f"{CLIENT}/16", "dev", tb.gen_dev, ns=tb.gen_ns)
        # A veth leaves checksums to a NIC that is not there: compute them.
        sh("ethtool", "-K", tb.gen_dev, "tx", "off", ns=tb.gen_ns)
        for rate in rates:
            for case in cases:
                r = run(tb, a.bin_dir, case, rate, a.seconds)
                results.setdefault(str(int(rate)), {})[case] = r
                print(f"[echo] {case} at {int(rate)}/s: p50 {r['p50_us']} us, p99 {r['p99_us']} "
                      f"us, p99.9 {r['p999_us']} us, {r['received']}/{r['sent']} answered"
                      f"{where_lost(r)}", flush=True)
    print("\n| rate | server | p50 us | p99 us | p99.9 us | answered | p50 / kernel | "
          "p99 / kernel |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rate, by_case in results.items():
        k = by_case.get("kernel")
        for case, r in by_case.items():
            ratio50 = f"{r['p50_us'] / k['p50_us']:.2f}" if k and k["p50_us"] else "-"
            ratio99 = f"{r['p99_us'] / k['p99_us']:.2f}" if k and k["p99_us"] else "-"
            print(f"| {rate}/s | {case} | {r['p50_us']} | {r['p99_us']} | {r['p999_us']} | "
                  f"{r['received']}/{r['sent']} | {ratio50} | {ratio99} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
