"""The Grafana dashboard (docker/grafana/quadsock.json) is a dashboard Grafana imports and
provisions: a uid and title, panels with a type, a place and queries, every panel and query on
the Prometheus data source the ${DS_PROMETHEUS} variable names. Whether its queries name metrics
quadsockd exports is checked against a real quadsockd's page in quadsockd_e2e_test.
"""

import re
import unittest

import prometheus_page


class GrafanaDashboardTest(unittest.TestCase):

    def setUp(self):
        self.d = prometheus_page.load_dashboard()

    def test_dashboard_fields(self):
        self.assertEqual(self.d["uid"], "quadsock")
        self.assertTrue(re.fullmatch(r"[A-Za-z0-9_-]{1,40}", self.d["uid"]))
        self.assertTrue(self.d["title"])
        self.assertIsInstance(self.d["schemaVersion"], int)
        self.assertNotIn("id", self.d, "an id pins the dashboard to one Grafana's database")
        variables = {v["name"]: v for v in self.d["templating"]["list"]}
        ds = variables["DS_PROMETHEUS"]
        self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"))
        for name in ("instance", "interface"):
            self.assertEqual(variables[name]["datasource"]["uid"], "${DS_PROMETHEUS}")

    def test_panels_have_a_place_and_queries_on_the_data_source(self):
        panels = self.d["panels"]
        self.assertGreaterEqual(len(panels), 8)
        self.assertEqual(len({p["id"] for p in panels}), len(panels), "panel ids repeat")
        for p in panels:
            with self.subTest(panel=p.get("title")):
                self.assertTrue(p["title"])
                self.assertIn(p["type"], ("timeseries", "stat", "table", "gauge"))
                self.assertEqual(set(p["gridPos"]), {"x", "y", "w", "h"})
                self.assertLessEqual(p["gridPos"]["x"] + p["gridPos"]["w"], 24)
                self.assertEqual(p["datasource"], {"type": "prometheus",
                                                   "uid": "${DS_PROMETHEUS}"})
                self.assertTrue(p["targets"])
                refs = [t["refId"] for t in p["targets"]]
                self.assertEqual(len(set(refs)), len(refs), "refIds repeat")
                for t in p["targets"]:
                    self.assertEqual(t["datasource"], p["datasource"])
                    self.assertTrue(t["expr"].strip())

    def test_queries_are_well_formed(self):
        for title, expr in prometheus_page.dashboard_exprs(self.d):
            with self.subTest(panel=title, expr=expr):
                depth = 0
                for c in re.sub(r'"[^"]*"', '""', expr):  # brackets inside strings do not count
                    depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(c, 0)
                    self.assertGreaterEqual(depth, 0)
                self.assertEqual(depth, 0, "unbalanced brackets")
                self.assertEqual(expr.count('"') % 2, 0, "an open string")
                for window in re.findall(r"rate\([^\[]*\[([^\]]*)\]", expr):
                    self.assertEqual(window, "$__rate_interval")
                # A counter is read through rate(); a histogram through its buckets' rate().
                for name in re.findall(r"\bquadsock_\w+", expr):
                    if name.endswith(("_total", "_bucket")):
                        self.assertRegex(expr, r"rate\(" + name, "a counter read without rate()")

    def test_the_panels_the_readme_promises(self):
        titles = " | ".join(p["title"] for p in self.d["panels"])
        for want in ("Datagrams in, by socket state", "Datagrams out, by socket state",
                     "Drops by reason", "hash4 hit ratio", "XDP verdicts", "Ring pressure",
                     "Ring fill", "Sessions and sockets", "ICMP"):
            self.assertIn(want, titles)


if __name__ == "__main__":
    unittest.main(verbosity=2)
