"""What datagrams bigger than a frame cost to receive: 8,000-byte UDP datagrams (six IPv4
fragments over a 1,500-byte MTU), sent by sockperf's throughput client through the kernel's
own fragmentation, received by the kernel (bench/receiver --mode=kernel: one socket,
recvmmsg) and by quadsock (--mode=quadsock: AfXdpStack, reassembly in the poll thread), in one
run on bench/testbed.py's veth pair. For bench/README.md ("Fragments").

For each receiver and each offered rate: datagrams received per second over a window, and the
receiving CPU per datagram (the receiver's threads and the veth's NAPI kthread, both on CPU 0).
The figure of merit is CPU per datagram (how many 8,000-byte datagrams one CPU takes in), as
ratio kernel / quadsock; the sender (kernel fragmentation on CPU 1) caps the offered rate.

    sudo /usr/bin/python3 bench/fragments_bench.py --bins=bazel-bin/bench [--size=8000]
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from testbed import (LOCAL, NICE, RECEIVER_ENV, HarnessError, Testbed, cpu_seconds,  # noqa: E402
                     read_line, sh, stop)

SENDER = "10.9.255.1"
RATES = [10_000, 20_000, 40_000, 0]  # 0: as fast as the sender goes


def measure(tb, bins, mode, size, rate, window):
    """One receiver, one offered rate: (datagrams/s received, receiving CPU us per datagram,
    datagrams/s sent)."""
    cmd = ["ip", "netns", "exec", tb.rx_ns, *NICE, *RECEIVER_ENV,
           os.path.join(bins, "receiver"), f"--mode={mode}", "--listener", "--serve",
           f"--interface={tb.rx_dev}", f"--local={LOCAL}", "--cpu=0"]
    rx = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    gen = None
    try:
        if read_line(rx, "READY", timeout=30) is None:
            raise HarnessError(f"{mode}: receiver did not start: {rx.stderr.read().strip()}")
        if tb.pin_napi() == 0:
            raise HarnessError(f"no NAPI kthread for {tb.rx_dev}")
        napi = tb.napi_pids()
        mps = str(rate) if rate else "max"
        gen = subprocess.Popen(
            ["ip", "netns", "exec", tb.gen_ns, *NICE, "taskset", "-c", "1", "sockperf", "tp",
             "-i", LOCAL, "-p", "4000", "-m", str(size), f"--mps={mps}",
             "-t", str(int(window + 4))],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def count():
            rx.stdin.write("COUNT\n")
            rx.stdin.flush()
            return int(read_line(rx, "COUNT", timeout=10).split()[1])

        time.sleep(1.5)  # sockperf's warm-up, and the rate settling
        c0, t0, rx0, napi0 = count(), time.monotonic(), cpu_seconds([rx.pid]), cpu_seconds(napi)
        time.sleep(window)
        c1, t1, rx1, napi1 = count(), time.monotonic(), cpu_seconds([rx.pid]), cpu_seconds(napi)
        out, _ = gen.communicate(timeout=window + 30)
        sent = re.search(r"Message Rate is (\d+)", out)
        received = (c1 - c0) / (t1 - t0)
        n = max(c1 - c0, 1)
        per = ((rx1 - rx0) / n * 1e6, (napi1 - napi0) / n * 1e6)
        rx.stdin.close()
        final = read_line(rx, "{", timeout=30)
        details = json.loads(final).get("details", {}) if final else {}
        return received, per, int(sent.group(1)) if sent else None, details
    finally:
        stop(gen)
        stop(rx)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bins", required=True, help="where receiver is (bazel-bin/bench, -c opt)")
    p.add_argument("--size", type=int, default=8000, help="UDP payload bytes (default 8000)")
    p.add_argument("--window", type=float, default=3, help="seconds counted per point")
    p.add_argument("--out", default="", help="write the results as JSON here too")
    args = p.parse_args()
    results = {"size": args.size, "date": datetime.date.today().isoformat(), "points": []}
    with Testbed() as tb:
        sh("ip", "addr", "add", f"{SENDER}/16", "dev", tb.gen_dev, ns=tb.gen_ns)
        # The sender's kernel computes checksums itself (a veth would leave them to the peer).
        sh("ethtool", "-K", tb.gen_dev, "tx", "off", ns=tb.gen_ns, quiet=True)
        for rate in RATES:
            for mode in ("kernel", "quadsock"):
                tb.set_kernel_address(mode == "kernel")
                received, per, sent, details = measure(tb, args.bins, mode, args.size, rate,
                                                       args.window)
                point = {"mode": mode, "offered": rate or "max", "sent_per_s": sent,
                         "received_per_s": round(received),
                         "cpu_us_per_datagram": round(per[0] + per[1], 2),
                         "receiver_us": round(per[0], 2), "napi_us": round(per[1], 2),
                         "details": details}
                results["points"].append(point)
                print(json.dumps(point), flush=True)
    by = {}
    for pt in results["points"]:
        by.setdefault(pt["mode"], []).append(pt)
    # Per point, CPU per datagram: kernel / quadsock (above 1: quadsock takes less).
    ratios = [k["cpu_us_per_datagram"] / q["cpu_us_per_datagram"]
              for k, q in zip(by["kernel"], by["quadsock"]) if q["cpu_us_per_datagram"] > 0]
    results["cpu_ratio_median"] = round(statistics.median(ratios), 2) if ratios else None
    print(json.dumps({"cpu_ratio_kernel_over_quadsock": results["cpu_ratio_median"]}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
