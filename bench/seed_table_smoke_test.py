"""The seed table's smoke run, so that the harness cannot rot: every case of bench/seed_table
for about a second (no targets), then checks that each produced packets and that the JSON has
the shape issue 7 asks for. Root, no sandbox (namespaces, veth, BPF, AF_XDP), exclusive (it
pins to CPUs 0 and 1 and wants them).

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

EXPECTED = [
    "kernel_unconnected", "kernel_conn500", "kernel_conn500_miss", "quadsock_unconnected",
    "quadsock_conn500_hash4off", "quadsock_conn500", "quadsock_conn10k", "quadsock_conn100k",
    "quadsock_newflow_conn100k", "ceiling_xdp_drop", "ceiling_afxdp",
]


class SeedTableSmokeTest(unittest.TestCase):

    def test_every_case_receives_and_the_report_is_well_formed(self):
        self.assertEqual(os.geteuid(), 0, "needs root: namespaces, veth, BPF, AF_XDP")
        out_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.mkdtemp()
        out = os.path.join(out_dir, "seed_table_smoke.json")
        p = subprocess.run([sys.executable, os.path.join(HERE, "netbench.py"), "--smoke",
                            f"--bin-dir={HERE}", f"--out={out}"], capture_output=True,
                           text=True, timeout=280)
        sys.stderr.write(p.stderr)
        self.assertEqual(p.returncode, 0, "the smoke run failed:\n" + p.stderr[-3000:])

        with open(out) as f:
            report = json.load(f)
        self.assertEqual([c["name"] for c in report["cases"]], EXPECTED)
        for c in report["cases"]:
            with self.subTest(case=c["name"]):
                self.assertEqual(set(c) >= {"name", "median_pps", "min_pps", "max_pps",
                                            "samples"}, True)
                self.assertTrue(c["samples"], "no samples")
                for s in c["samples"]:
                    self.assertIsInstance(s, (int, float))
                    self.assertTrue(math.isfinite(s))
                self.assertGreater(c["median_pps"], 0, "no packets")
                self.assertLessEqual(c["min_pps"], c["median_pps"])
                self.assertLessEqual(c["median_pps"], c["max_pps"])
        self.assertTrue(report["smoke"])
        self.assertEqual(report["targets"], [])
        self.assertEqual(report["failures"], [])
        sweep_cases = {s["case"] for s in report["sweep"]}
        self.assertEqual(sweep_cases, set(netbench.SWEEP_CASES))
        for s in report["sweep"]:
            self.assertGreater(s["offered_pps"], 0)
            self.assertGreater(s["delivered_pps"], 0)
        # The Markdown table names every case.
        with open(os.path.splitext(out)[0] + ".md") as f:
            md = f.read()
        for name in EXPECTED:
            self.assertIn(f"`{name}`", md)


if __name__ == "__main__":
    unittest.main()
