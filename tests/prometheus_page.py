"""Checks of quadsockd's metrics page against Prometheus' conventions (prometheus.io: "Metric and
label naming", "Exposition formats", "Histograms"), read by Prometheus' own Python parser rather
than by eye, and of the Grafana dashboard (docker/grafana/quadsock.json) that queries it.

    families = check_page(self, text, interface="qs0")    # a unittest.TestCase's assertions
    names = dashboard_metric_names(load_dashboard())        # every quadsock_* a query names
"""

import json
import os
import re

from prometheus_client.parser import text_string_to_metric_families

UNITS = ("bytes", "seconds")


def runfile(path):
    """A file of this workspace in the test's runfiles (Bazel's TEST_SRCDIR)."""
    return os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "quadsock"),
                        path)


def parse_error_reasons():
    """Every reason a frame is dropped as malformed, from the one list (parse_error.h)."""
    with open(runfile("stack/net/parse_error.h")) as f:
        reasons = re.findall(r'X\(k\w+,\s*"(\w+)"\)', f.read())
    return [r for r in reasons if r != "ok"]


def version():
    with open(runfile("VERSION")) as f:
        return f.read().strip()


def check_page(test, text, interface):
    """Asserts the conventions on a whole page; returns its families by name."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    test.assertTrue(families, "an empty page")
    # The parser adds _total to a counter's samples that lack it: read the page's own names.
    for name in re.findall(r"^# TYPE (\S+) counter$", text, re.M):
        test.assertTrue(name.endswith("_total"), "the counter %s does not end in _total" % name)
    for name, f in families.items():
        with test.subTest(family=name):
            # A sample without its family's TYPE comes out "untyped", without HELP.
            test.assertIn(f.type, ("counter", "gauge", "histogram"))
            test.assertTrue(f.documentation, "no HELP")
            test.assertTrue(name.startswith("quadsock_"))
            test.assertTrue(f.samples, "a family without a series")
            for unit in UNITS:
                if unit in name:
                    test.assertTrue(name.endswith("_" + unit), "the unit %s is not last" % unit)
            if f.type == "counter":
                # The parser takes _total off a counter's family and keeps it on its samples.
                for s in f.samples:
                    test.assertEqual(s.name, name + "_total")
            else:
                test.assertFalse(name.endswith("_total"), "a %s named like a counter" % f.type)
            if f.type == "histogram":
                check_histogram(test, f)
            for s in f.samples:
                if name != "quadsock_build_info":
                    test.assertEqual(s.labels.get("interface"), interface, s)
    errors = families.get("quadsock_parse_errors")
    test.assertIsNotNone(errors, "no quadsock_parse_errors_total")
    reasons = {s.labels["reason"] for s in errors.samples}
    test.assertEqual(set(parse_error_reasons()) - reasons, set(), "parse-error reasons missing")
    info = families.get("quadsock_build_info")
    test.assertIsNotNone(info, "no quadsock_build_info")
    test.assertEqual(len(info.samples), 1)
    test.assertEqual(info.samples[0].value, 1)
    test.assertEqual(info.samples[0].labels["version"], version())
    test.assertIn("commit", info.samples[0].labels)
    return families


def check_histogram(test, f):
    """Cumulative buckets that end at +Inf with _count's value, and a _sum, per series."""
    series = {}
    for s in f.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, []).append(s)
    for samples in series.values():
        buckets = [(float(s.labels["le"]), s.value) for s in samples
                   if s.name == f.name + "_bucket"]
        test.assertTrue(buckets, "no _bucket")
        test.assertEqual(buckets, sorted(buckets), "buckets not cumulative or not in order")
        test.assertEqual(buckets[-1][0], float("inf"))
        counts = [s.value for s in samples if s.name == f.name + "_count"]
        test.assertEqual(counts, [buckets[-1][1]], "_count is not the +Inf bucket")
        test.assertEqual(len([s for s in samples if s.name == f.name + "_sum"]), 1, "no _sum")


def sample_names(families):
    return {s.name for f in families.values() for s in f.samples}


def load_dashboard():
    with open(runfile("docker/grafana/quadsock.json")) as f:
        return json.load(f)


def dashboard_exprs(dashboard):
    """(panel title, expr) for every query of every panel, and of the template variables."""
    out = []
    for p in dashboard["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in dashboard.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            out.append(("variable " + v["name"], q["query"]))
    return out


def dashboard_metric_names(dashboard):
    """Every quadsock_* metric name a query of the dashboard reads: {name: [panel titles]}."""
    names = {}
    for title, expr in dashboard_exprs(dashboard):
        for name in re.findall(r"\bquadsock_[A-Za-z0-9_]+", expr):
            names.setdefault(name, []).append(title)
    return names
