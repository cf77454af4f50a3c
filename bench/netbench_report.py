"""The report of the Linux 6.13 hash4 comparison (bench/seed_table): the ratios and targets computed from the cases' results, the
Markdown tables (full load and capacity), the PNG plot, and the machine's description.

    ratios, targets = evaluate(results, key="capacity_pps")
    text = capacity_markdown(report)     # or markdown(report) for the full-load figures
    plot(report, "seed_table.png", key="capacity_pps")

bench/netbench.py measures; this module only reads what it measured.
"""

import os
import platform
import re
import statistics

CAPACITY_FRACTION = 0.95  # a capacity point passes when at least this much is delivered


def ratio(results, a, b, key="median_pps"):
    """a / b on `key`; None when either has no figure (a case without the common rate)."""
    if a not in results or b not in results:
        return None
    top, bottom = results[a].get(key), results[b].get(key)
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


RATIOS = [
    # (label, numerator, denominator)
    ("quadsock/kernel, unconnected", "quadsock_unconnected", "kernel_unconnected"),
    ("quadsock/kernel, 500 connected", "quadsock_conn500", "kernel_conn500"),
    ("quadsock/kernel, 500 connected, traffic missing hash4 (quadsock: new flows, 100k)",
     "quadsock_newflow_conn100k", "kernel_conn500_miss"),
    ("quadsock unconnected / AF_XDP ceiling", "quadsock_unconnected", "ceiling_afxdp"),
    ("quadsock 500 connected / AF_XDP ceiling", "quadsock_conn500", "ceiling_afxdp"),
    ("quadsock 100k connected / AF_XDP ceiling", "quadsock_conn100k", "ceiling_afxdp"),
    ("AF_XDP ceiling / XDP_DROP ceiling", "ceiling_afxdp", "ceiling_xdp_drop"),
    ("kernel 500 connected / unconnected", "kernel_conn500", "kernel_unconnected"),
    ("kernel 500 connected, misses / unconnected", "kernel_conn500_miss", "kernel_unconnected"),
    ("quadsock 500 connected, hash4 off / unconnected", "quadsock_conn500_hash4off",
     "quadsock_unconnected"),
    ("quadsock 500 connected / unconnected", "quadsock_conn500", "quadsock_unconnected"),
    ("quadsock 10k connected / unconnected", "quadsock_conn10k", "quadsock_unconnected"),
    ("quadsock 100k connected / unconnected", "quadsock_conn100k", "quadsock_unconnected"),
    ("quadsock new flows, 100k connected / unconnected", "quadsock_newflow_conn100k",
     "quadsock_unconnected"),
    # An application through quadsockd's data channel (shared memory), against the kernel's own
    # application and against the in-process stack.
    ("application over shm / kernel, unconnected", "app_quadsock_unconnected_shm",
     "kernel_unconnected"),
    ("application over shm / kernel, 500 connected", "app_quadsock_conn500_shm",
     "kernel_conn500"),
    ("application over shm / in-process quadsock, 100k connected", "app_quadsock_conn100k_shm",
     "quadsock_conn100k"),
    ("application over shm / in-process quadsock, unconnected", "app_quadsock_unconnected_shm",
     "quadsock_unconnected"),
    ("application over shm / in-process quadsock, 500 connected", "app_quadsock_conn500_shm",
     "quadsock_conn500"),
    ("application over the gRPC stream / kernel, unconnected", "app_quadsock_unconnected_grpc",
     "kernel_unconnected"),
    ("application over the gRPC stream / kernel, 500 connected", "app_quadsock_conn500_grpc",
     "kernel_conn500"),
]

TARGETS = [
    # (label, numerator, denominator, minimum)
    ("quadsock unconnected >= 80% of the AF_XDP ceiling", "quadsock_unconnected",
     "ceiling_afxdp", 0.8),
    ("quadsock 500 connected >= 80% of the AF_XDP ceiling", "quadsock_conn500",
     "ceiling_afxdp", 0.8),
    ("quadsock 500 connected >= 3x kernel 500 connected", "quadsock_conn500",
     "kernel_conn500", 3.0),
    ("quadsock 100k connected >= 80% of the AF_XDP ceiling", "quadsock_conn100k",
     "ceiling_afxdp", 0.8),
    ("quadsock hash4 on, 500 connected >= 1.0x its unconnected rate", "quadsock_conn500",
     "quadsock_unconnected", 1.0),
    ("new flows with 100k connected >= 80% of the unconnected rate",
     "quadsock_newflow_conn100k", "quadsock_unconnected", 0.8),
    ("application over shm, 500 connected >= 3x kernel 500 connected",
     "app_quadsock_conn500_shm", "kernel_conn500", 3.0),
    ("application over shm, unconnected >= 2x kernel unconnected",
     "app_quadsock_unconnected_shm", "kernel_unconnected", 2.0),
    ("application over shm, 100k connected >= 0.7x in-process quadsock 100k connected",
     "app_quadsock_conn100k_shm", "quadsock_conn100k", 0.7),
    ("application over the gRPC stream, 500 connected >= 1.0x kernel 500 connected",
     "app_quadsock_conn500_grpc", "kernel_conn500", 1.0),
]


def round_ratios(results):
    """Every ratio at the common rate round by round: the cases took turns, so one round's
    points are seconds apart and share the kernel's state, where rounds are minutes apart.
    Per point, packets per CPU second (received / (kernel + receiver CPU seconds)); a's point
    over b's of the same round. {label: [ratio per round]}, for the ratios with points."""
    def per_cpu(case):
        points = [p for p in results.get(case, {}).get("points", [])
                  if p.get("phase") == "common"]
        return [p["received"] / (p["napi_cpu_s"] + p["receiver_cpu_s"]) for p in points
                if p["received"] > 0 and p["napi_cpu_s"] + p["receiver_cpu_s"] > 0]
    out = {}
    for label, a, b in RATIOS:
        rounds = [x / y for x, y in zip(per_cpu(a), per_cpu(b))]
        if rounds:
            out[label] = rounds
    return out


def evaluate(results, key="median_pps"):
    """Ratios and targets on `key`: median_pps (full load) or capacity_pps."""
    ratios = {label: ratio(results, a, b, key) for label, a, b in RATIOS
              if ratio(results, a, b, key) is not None}
    targets = []
    for label, a, b, minimum in TARGETS:
        r = ratio(results, a, b, key)
        if r is not None:
            targets.append({"target": label, "ratio": r, "minimum": minimum,
                            "met": r >= minimum})
    # hash4 off shows the collapse (in Linux before 6.13: 0.29 / 1.83 = 0.16 of the unconnected rate).
    r = ratio(results, "quadsock_conn500_hash4off", "quadsock_unconnected", key)
    if r is not None:
        targets.append({"target": "hash4 off, 500 connected, collapses "
                        "(< 0.5x the unconnected rate)", "ratio": r, "maximum": 0.5,
                        "met": r < 0.5})
    return ratios, targets


def fmt_pps(v):
    return f"{v / 1e6:.3f}"


def markdown(report):
    out = [f"Date {report['date']}; {report['machine']['description']}; "
           f"command `{report['command']}`.", ""]
    out += ["| case | median Mpps | min | max | samples | offered Mpps (median) |",
            "| --- | --- | --- | --- | --- | --- |"]
    for c in report["cases"]:
        offered = statistics.median(c["offered_pps"]) if c["offered_pps"] else 0
        out.append(f"| `{c['name']}` | {fmt_pps(c['median_pps'])} | {fmt_pps(c['min_pps'])} | "
                   f"{fmt_pps(c['max_pps'])} | {len(c['samples'])} | {fmt_pps(offered)} |")
    out += ["", "| ratio (medians) | value |", "| --- | --- |"]
    for label, value in report["ratios"].items():
        out.append(f"| {label} | {value:.2f}x |")
    if report["targets"]:
        out += ["", "| target | measured | |", "| --- | --- | --- |"]
        for t in report["targets"]:
            out.append(f"| {t['target']} | {t['ratio']:.2f}x | "
                       f"{'met' if t['met'] else 'NOT met'} |")
    if report.get("sweep"):
        out += ["", "Offered-load sweep (paced generator; delivered = receiver's median):", "",
                "| receiver | offered Mpps | delivered Mpps | delivered/offered |",
                "| --- | --- | --- | --- |"]
        for p in report["sweep"]:
            frac = p["delivered_pps"] / p["offered_pps"] if p["offered_pps"] else 0
            out.append(f"| `{p['case']}` | {fmt_pps(p['offered_pps'])} | "
                       f"{fmt_pps(p['delivered_pps'])} | {frac:.2f} |")
    return "\n".join(out) + "\n"


def plot(report, path, key="median_pps"):
    """Writes the PNG; returns None, or why it could not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("matplotlib is missing: apt-get install -y python3-matplotlib "
                "(Debian's, for /usr/bin/python3)")
    res = {c["name"]: c.get(key, 0) / 1e6 for c in report["cases"]}
    what = "capacity, Mpps delivered at >= 95%" if key == "capacity_pps" else \
        "received Mpps at full load"
    fig, axes = plt.subplots(1, 2 if report.get("sweep") else 1, figsize=(12, 4.8),
                             squeeze=False)
    ax = axes[0][0]
    xs = {"unconnected": 0, "500": 1, "10k": 2, "100k": 3}
    series = [
        ("quadsock, hash4 on", [("unconnected", "quadsock_unconnected"), ("500", "quadsock_conn500"),
                                ("10k", "quadsock_conn10k"), ("100k", "quadsock_conn100k")], "o-"),
        ("quadsock, hash4 off", [("unconnected", "quadsock_unconnected"),
                                 ("500", "quadsock_conn500_hash4off")], "s--"),
        ("Linux kernel (hash4)", [("unconnected", "kernel_unconnected"),
                                  ("500", "kernel_conn500")], "^-"),
        ("quadsock new flows", [("100k", "quadsock_newflow_conn100k")], "D"),
        ("application through quadsockd (shm)",
         [("unconnected", "app_quadsock_unconnected_shm"), ("500", "app_quadsock_conn500_shm"),
          ("100k", "app_quadsock_conn100k_shm")], "P-."),
        ("application through quadsockd (gRPC stream)",
         [("unconnected", "app_quadsock_unconnected_grpc"), ("500", "app_quadsock_conn500_grpc")],
         "X:"),
        ("kernel, traffic missing hash4", [("500", "kernel_conn500_miss")], "v"),
    ]
    for label, points, style in series:
        pts = [(xs[x], res[n]) for x, n in points if n in res]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    for name, label, style in (("ceiling_afxdp", "AF_XDP ceiling (rxdrop)", ":"),
                               ("ceiling_xdp_drop", "XDP_DROP ceiling", "-.")):
        if name not in res:
            continue
        if key == "capacity_pps" and name == "ceiling_xdp_drop":
            # The generator's rate (>= 10 Mpps): off the scale of the others.
            ax.plot([], [], " ", label=f"XDP_DROP ceiling: >= {res[name]:.1f} (off scale)")
            continue
        ax.axhline(res[name], linestyle=style, color="gray", label=label)
    ax.set_xticks(list(xs.values()), [f"{k}" for k in xs])
    ax.set_xlabel("connected sockets on the port")
    ax.set_ylabel(f"{what} (one CPU)")
    ax.set_ylim(bottom=0)
    ax.set_title("64-byte UDP over veth (copy mode)")
    ax.legend(fontsize=8)
    if report.get("sweep"):
        ax2 = axes[0][1]
        colors = plt.get_cmap("tab20").colors
        for i, case in enumerate(sorted({p["case"] for p in report["sweep"]})):
            pts = sorted((p for p in report["sweep"] if p["case"] == case),
                         key=lambda p: p["offered_pps"])
            ax2.plot([p["offered_pps"] / 1e6 for p in pts], [p["delivered_pps"] / 1e6 for p in pts],
                     "o-" if key == "median_pps" else "o:", label=case,
                     color=colors[(2 * i) % 20 + (2 * i) // 20], markersize=4, linewidth=0.8)
        top = max(p["offered_pps"] for p in report["sweep"]) / 1e6
        ax2.plot([0, top], [0, top], ":", color="gray", label="delivered = offered")
        ax2.set_xlabel("offered Mpps")
        ax2.set_ylabel("delivered Mpps")
        ax2.set_title("offered-load sweep" if key == "median_pps" else
                      "capacity search: every point (log-log)")
        if key == "capacity_pps":
            ax2.set_xscale("log")
            ax2.set_yscale("log")
        ax2.legend(fontsize=6 if key == "capacity_pps" else 8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def machine(receiver_cpu, generator_cpu):
    cpus = os.cpu_count()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"kernel": platform.release(), "cpus": cpus, "cpu_model": model,
            "description": f"{cpus}-core shared VM ({model}), kernel {platform.release()}, "
                           f"veth (AF_XDP copy mode), receiver on CPU {receiver_cpu}, "
                           f"generator on CPU {generator_cpu}"}


# A line of bench/wake_latency's output: one gap's wake-up delays, microseconds.
WAKE_LINE = re.compile(r"gap\s+(\d+) us: (\d+) seen, (\d+) lost; p50 ([\d.]+), p90 ([\d.]+), "
                       r"p99 ([\d.]+), max ([\d.]+)")


def parse_wake_latency(text):
    """bench/wake_latency's report, one dict per gap."""
    gaps = []
    for m in WAKE_LINE.finditer(text):
        gap, seen, lost = (int(v) for v in m.group(1, 2, 3))
        p50, p90, p99, top = (float(v) for v in m.group(4, 5, 6, 7))
        gaps.append({"gap_us": gap, "seen": seen, "lost": lost, "p50_us": p50, "p90_us": p90,
                     "p99_us": p99, "max_us": top})
    return gaps


def wake_markdown(report):
    """The machine's wake-up delays on the receiving CPU before and after the cases, if measured."""
    wake = report.get("wake_latency")
    if not wake:
        return []
    out = ["", "Wake-ups of a thread asleep on CPU 0 from CPU 1 (`bench/wake_latency`), before and "
           "after the cases: how long a ring's consumer (the NAPI thread, quadsockd, the "
           "application) may wait to run on this machine, an idle vCPU the longest.", "",
           "| when | gap between wake-ups | p50 us | p90 us | p99 us | max us | lost |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for when in ("before", "after"):
        for g in wake.get(when) or []:
            out.append(f"| {when} | {g['gap_us']} us | {g['p50_us']:.1f} | {g['p90_us']:.1f} | "
                       f"{g['p99_us']:.1f} | {g['max_us']:.1f} | {g['lost']} |")
    return out


def capacity_markdown(report):
    out = [f"Date {report['date']}; {report['machine']['description']}; "
           f"command `{report['command']}`.", "",
           f"Capacity: the highest offered rate delivered at >= "
           f"{CAPACITY_FRACTION:.0%} (paced generator; offered = what it sent).", "",
           "CPU 0 per packet at capacity: the kernel's part (the veth's NAPI thread: XDP, the "
           "AF_XDP copy, or the skb and UDP path) and the receiver's own threads.", "",
           "| case | capacity Mpps | delivered Mpps at capacity (median, min, max) | runs "
           "| first failing point: offered -> delivered Mpps | CPU 0 us/packet: kernel + receiver "
           "| the same at the common rate | points | seconds |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in report["cases"]:
        cap = fmt_pps(c["capacity_pps"])
        if c.get("generator_limited"):
            cap = f">= {cap} (generator)"
        elif not c["capacity_pps"]:
            cap = "none found"
        f = c.get("first_failing")
        fail = (f"{fmt_pps(f['offered_pps'])} -> {fmt_pps(f['delivered_pps'])} "
                f"({f['fraction']:.2f})" if f else "-")
        cpu = costs(c, "napi_us_per_packet", "receiver_us_per_packet")
        common = costs(c, "common_napi_us_per_packet", "common_receiver_us_per_packet")
        out.append(f"| `{c['name']}` | {cap} | {fmt_pps(c['median_pps'])}, "
                   f"{fmt_pps(c['min_pps'])}, {fmt_pps(c['max_pps'])} | {len(c['samples'])} | "
                   f"{fail} | {cpu} | {common} | {len(c.get('points', []))} | "
                   f"{c.get('seconds', '-')} |")
    out += accounting_markdown(report)
    out += wake_markdown(report)
    cpu_ratios = report.get("cpu_ratios", {})
    common_ratios = report.get("common_ratios", {})
    rate = next((c["common_pps"] for c in report["cases"] if c.get("common_pps")), None)
    at = f"at {rate / 1e6:g} Mpps" if rate else "at the common rate"
    out += ["", "Per CPU: packets per second of CPU 0, 1 / (kernel + receiver per packet): what "
            "one fully used CPU receives, whatever the scheduler's interleaving; at each case's "
            f"capacity, and {at} for the cases that reached it (costs per packet fall as the "
            "rate rises, so only the latter compares cases at one rate; the cases took turns "
            "there, and the range is the ratio's in each round).",
            "", f"| ratio | capacities | per CPU at capacity | per CPU {at} |",
            "| --- | --- | --- | --- |"]
    by_round = report.get("common_round_ratios", {})
    for label, value in report["ratios"].items():
        spread = by_round.get(label)
        rounds = f" ({min(spread):.2f}-{max(spread):.2f} by round)" if spread else ""
        out.append(f"| {label} | {value:.2f}x | {fmt_ratio(cpu_ratios.get(label))} | "
                   f"{fmt_ratio(common_ratios.get(label))}{rounds} |")
    if report["targets"]:
        by_cpu = {t["target"]: t for t in report.get("cpu_targets", [])}
        by_common = {t["target"]: t for t in report.get("common_targets", [])}
        out += ["", f"| target | capacities | | per CPU at capacity | | per CPU {at} | |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for t in report["targets"]:
            out.append(f"| {t['target']} | {verdict(t)} | "
                       f"{verdict(by_cpu.get(t['target']))} | "
                       f"{verdict(by_common.get(t['target']))} |")
    return "\n".join(out) + "\n"


def accounting_markdown(report):
    """The app_* cases' accounting: every datagram quadsockd delivered to a socket received by
    the application or counted as dropped, in every run of its receiver (figures: the search's)."""
    checked = [c for c in report["cases"] if "accounting_runs" in c]
    if not checked:
        return []
    out = ["", "Every datagram accounted for at the application (app_* cases; figures of the "
           "search's run, which includes the unpaced point):", "",
           "| case | runs holding / checked | received | + counted drops | + queued "
           "| = delivered to the sockets |", "| --- | --- | --- | --- | --- | --- |"]
    for c in checked:
        runs = c["accounting_runs"]
        holding = runs - len(c.get("accounting_problems", []))
        d = c["details"][0] if c.get("details") else {}
        out.append(f"| `{c['name']}` | {holding} / {runs} | {d.get('received', 0):.0f} | "
                   f"{d.get('socket_rx_dropped', 0):.0f} | {d.get('socket_queued', 0):.0f} | "
                   f"{d.get('udp_delivered', 0):.0f} |")
    return out


def costs(case, napi_key, own_key):
    napi, own = case.get(napi_key), case.get(own_key)
    return f"{napi:.3f} + {own:.3f}" if napi is not None and own is not None else "-"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def verdict(t):
    """Two table cells: the ratio and met / NOT met ("-" twice without a figure)."""
    return "- | -" if t is None else f"{t['ratio']:.2f}x | {'met' if t['met'] else 'NOT met'}"
