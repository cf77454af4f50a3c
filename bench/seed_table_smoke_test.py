"""bench/seed_table's smoke runs, so that the harness cannot rot: every case of bench/seed_table
briefly, both ways (the capacity search reduced to two points per case, and the full-load
rounds and sweep at about a second per case; no targets), then checks that each case produced
packets and that the JSON has the shape the report needs; and a deliberately broken case (a
receiver that gets nothing) must fail the run. Root, no sandbox (namespaces, veth, BPF,
AF_XDP), exclusive (it pins to CPUs 0 and 1 and wants them).

    bazel test -c opt //bench:seed_table_smoke_test
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netbench  # noqa: E402
import netbench_report  # noqa: E402

EXPECTED = [
    "kernel_unconnected", "kernel_conn500", "kernel_conn500_miss", "quadsock_unconnected",
    "quadsock_conn500_hash4off", "quadsock_conn500", "quadsock_conn10k", "quadsock_conn100k",
    "quadsock_newflow_conn100k", "ceiling_xdp_drop", "ceiling_afxdp",
    "app_quadsock_unconnected_shm", "app_quadsock_conn500_shm", "app_quadsock_conn100k_shm",
    "app_quadsock_unconnected_grpc", "app_quadsock_conn500_grpc",
]


# The runs take as long as the machine's load makes them (a loaded machine took more than twice
# as long): each is bounded only by the test's own time limit, which Bazel enforces anyway.
RUN_TIMEOUT = int(os.environ.get("TEST_TIMEOUT", "3600"))


def run(name, *args):
    """Runs netbench.py --smoke; returns (exit code, stderr, report or None)."""
    out_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.mkdtemp()
    out = os.path.join(out_dir, f"{name}.json")
    if os.path.exists(out):
        os.remove(out)
    p = subprocess.run([sys.executable, os.path.join(HERE, "netbench.py"), "--smoke",
                        f"--bin-dir={HERE}", f"--out={out}", *args], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT)
    sys.stderr.write(p.stderr)
    report = None
    if os.path.exists(out):
        with open(out) as f:
            report = json.load(f)
    return p.returncode, p.stderr, report, os.path.splitext(out)[0] + ".md"


class SeedTableSmokeTest(unittest.TestCase):

    def setUp(self):
        self.assertEqual(os.geteuid(), 0, "needs root: namespaces, veth, BPF, AF_XDP")

    def check_cases(self, report, md_path, extra_fields=()):
        self.assertEqual([c["name"] for c in report["cases"]], EXPECTED)
        for c in report["cases"]:
            with self.subTest(case=c["name"]):
                self.assertTrue(set(c) >= {"name", "median_pps", "min_pps", "max_pps",
                                           "samples", *extra_fields}, sorted(c))
                self.assertTrue(c["samples"], "no samples")
                for s in c["samples"]:
                    self.assertIsInstance(s, (int, float))
                    self.assertTrue(math.isfinite(s))
                self.assertGreater(c["median_pps"], 0, "no packets")
                self.assertLessEqual(c["min_pps"], c["median_pps"])
                self.assertLessEqual(c["median_pps"], c["max_pps"])
        self.assertTrue(report["smoke"])
        self.assertEqual(report["failures"], [])
        # The ratios are the cases' own figures divided (smoke mode reports no targets, but
        # computes the ratios as a full run does): each one that both cases have a figure for.
        key = "median_pps" if report["method"] == "full_load" else "capacity_pps"
        cases = {c["name"]: c for c in report["cases"]}
        expected = {label: cases[a][key] / cases[b][key] for label, a, b in netbench_report.RATIOS
                    if cases[a].get(key) is not None and (cases[b].get(key) or 0) > 0}
        if report["method"] == "full_load":  # every case has packets, so every ratio
            self.assertEqual(len(expected), len(netbench_report.RATIOS))
        self.assertEqual(sorted(report["ratios"]), sorted(expected))
        for label, r in expected.items():
            self.assertAlmostEqual(report["ratios"][label], r, places=6, msg=label)
        # The Markdown table names every case.
        with open(md_path) as f:
            md = f.read()
        for name in EXPECTED:
            self.assertIn(f"`{name}`", md)
        self.check_applications(report)

    def check_applications(self, report):
        """The app_* cases (quadsockd and an application over the data channel): the
        application received datagrams, each on the socket of its flow, and every datagram
        quadsockd delivered to a socket was received there or counted as dropped."""
        for c in report["cases"]:
            if c["name"] not in netbench.APP_CASES:
                continue
            with self.subTest(case=c["name"]):
                self.assertTrue(c["details"], "no details from the application")
                for d in c["details"]:
                    self.assertGreater(d["received"], 0)
                    self.assertEqual(d["received"] + d["socket_rx_dropped"] + d["socket_queued"],
                                     d["udp_delivered"], d)
                    self.assertEqual(d["received"], d["socket_rx_datagrams"], d)
                    self.assertEqual(d["accounting_ok"], 1, d)
                    self.assertEqual(d["misdirected"], 0, d)
                    self.assertEqual(d["sockets"], d["sockets_on_channel"], d)
                    self.assertEqual(d["sockets"], {"app_quadsock_unconnected_shm": 1,
                                                    "app_quadsock_conn500_shm": 500,
                                                    "app_quadsock_conn100k_shm": 100000,
                                                    "app_quadsock_unconnected_grpc": 1,
                                                    "app_quadsock_conn500_grpc": 500}[
                                                        c["name"]], d)
                if report["method"] == "capacity":
                    # The search's receiver and each common-rate round's were checked.
                    self.assertEqual(c.get("accounting_problems"), [])
                    self.assertGreaterEqual(c["accounting_runs"], 1)

    def test_capacity_every_case_receives_and_the_report_is_well_formed(self):
        code, err, report, md = run("seed_table_smoke_capacity")
        self.assertEqual(code, 0, "the smoke run failed:\n" + err[-3000:])
        self.assertEqual(report["method"], "capacity")
        self.check_cases(report, md, extra_fields=("capacity_pps", "points", "cpu_pps",
                                                   "common_cpu_pps"))
        for c in report["cases"]:
            with self.subTest(case=c["name"]):
                self.assertTrue(c["points"], "no points")
                for p in c["points"]:
                    self.assertGreater(p["offered_pps"], 0)
                    self.assertTrue(set(p) >= {"requested_pps", "offered_pps",
                                               "delivered_pps", "fraction", "passed"})
                self.assertGreaterEqual(c["capacity_pps"], 0)
                # The common rate's costs, for a case that passed a point at or above it (in
                # an unoptimized build hash4 off may not).
                rate = report["timing"]["common_pps"]
                if netbench.reached(c, rate):
                    self.assertGreater(c["common_cpu_pps"] or 0, 0)
                else:
                    self.assertIsNone(c["common_cpu_pps"])
        with_common = {c["name"] for c in report["cases"] if c["common_cpu_pps"]}
        self.assertTrue({"ceiling_afxdp", "quadsock_unconnected"} <= with_common, with_common)
        # The ratios at the common rate round by round: one per round, from the points.
        rounds = report["common_round_ratios"]["quadsock unconnected / AF_XDP ceiling"]
        self.assertEqual(len(rounds), report["timing"]["common_runs"])
        for r in rounds:
            self.assertTrue(math.isfinite(r) and r > 0, rounds)
        with open(md) as f:
            text = f.read()
        self.assertIn("by round)", text)
        # The machine's wake-up delays on CPU 0, before and after the cases.
        self.assertIn("`bench/wake_latency`", text)
        for when in ("before", "after"):
            gaps = report["wake_latency"][when]
            self.assertEqual([g["gap_us"] for g in gaps], [100, 2000], when)
            # Measured, and read from the tool's lines: each gap saw wake-ups, and they took
            # time. (Not seen + lost = 400, nor the quantiles' order: the tool makes those so
            # whatever it measures.)
            for g in gaps:
                self.assertGreater(g["seen"], 0, g)
                self.assertGreater(g["p50_us"], 0, g)
        # Measured in turn after the searches: each such case's last points are its common
        # rate's warm-up and measured points, one pair per round.
        for c in report["cases"]:
            if c["name"] in with_common:
                runs = report["timing"]["common_runs"]
                tail = [p["phase"] for p in c["points"][-2 * runs:]]
                self.assertEqual(tail, ["common warm-up", "common"] * runs, c["name"])

    def test_full_load_every_case_receives_and_the_report_is_well_formed(self):
        code, err, report, md = run("seed_table_smoke_full_load", "--full-load")
        self.assertEqual(code, 0, "the smoke run failed:\n" + err[-3000:])
        self.assertEqual(report["method"], "full_load")
        self.check_cases(report, md)
        sweep_cases = {s["case"] for s in report["sweep"]}
        self.assertEqual(sweep_cases, set(netbench.SWEEP_CASES))
        for s in report["sweep"]:
            self.assertGreater(s["offered_pps"], 0)
            self.assertGreater(s["delivered_pps"], 0)

    def test_cost_ab_reports_each_builds_cost_per_packet(self):
        p = subprocess.run([sys.executable, os.path.join(HERE, "cost_ab"),
                            "--case=quadsock_unconnected", "--rate=200000", "--rounds=1",
                            "--seconds=1", HERE], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT)
        sys.stderr.write(p.stderr)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        last = p.stdout.strip().splitlines()[-1]
        self.assertRegex(last, r"quadsock_unconnected: median kernel [0-9.]+ \+ receiver "
                               r"[0-9.]+ us/packet \([0-9.]+ Mpps per CPU\)$")
        words = last.split()
        kernel, own = float(words[4]), float(words[7])
        self.assertGreater(kernel, 0)
        self.assertGreater(own, 0)

    def test_seed_table_help_comes_at_once_and_names_the_cases(self):
        # No build, no root needed, no namespaces: only the text.
        p = subprocess.run([sys.executable, os.path.join(HERE, "seed_table"), "--help"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--smoke", p.stdout)
        for name in EXPECTED:
            self.assertIn(name, p.stdout)

    def test_a_case_that_receives_nothing_fails_the_run(self):
        for method in ([], ["--full-load", "--no-sweep"]):
            with self.subTest(method=method or "capacity"):
                code, err, report, _ = run("seed_table_smoke_broken", "--cases=broken_selftest",
                                           *method)
                self.assertEqual(code, 1, err[-3000:])
                self.assertIn("cases without packets: ['broken_selftest']", err)
                self.assertEqual(report["cases"][0]["median_pps"], 0)


if __name__ == "__main__":
    unittest.main()
