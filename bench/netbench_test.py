"""Unit tests of the harness (no root, no network): a receiver that finds its AF_XDP queue still
busy is started again, any other failure is reported at once; which cases run at the common
rate."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbench  # noqa: E402
import netbench_report  # noqa: E402
import testbed  # noqa: E402


class FakeTestbed:
    rx_dev = "fake0"
    rx_ns = "fake-rx"

    def __init__(self):
        self.pinned = 0

    def pin_napi(self):
        self.pinned += 1
        return 1


def fake_receiver(tries_file, busy_times, other_error=False):
    """A receiver command that fails `busy_times` times as a busy queue does, then is READY."""
    fail = ("echo 'receiver: ALREADY_EXISTS: binding an AF_XDP socket: Device or resource busy'"
            " >&2; exit 1")
    if other_error:
        fail = "echo 'receiver: no such interface' >&2; exit 1"
    script = (f"n=$(cat {tries_file} 2>/dev/null || echo 0); echo $((n + 1)) > {tries_file}; "
              f"if [ $n -lt {busy_times} ]; then {fail}; fi; echo READY; sleep 30")
    return ["sh", "-c", script]


class StartReceiverTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tries = os.path.join(self.dir.name, "tries")
        netbench.BUSY_RETRIES = 3

    def tearDown(self):
        self.dir.cleanup()

    def tries_made(self):
        with open(self.tries) as f:
            return int(f.read())

    def test_busy_queue_is_retried_until_ready(self):
        tb = FakeTestbed()
        proc = netbench.start_receiver(tb, fake_receiver(self.tries, 2), "case", None, 10)
        try:
            self.assertIsNone(proc.poll())
            self.assertEqual(self.tries_made(), 3)
            self.assertEqual(tb.pinned, 1)
        finally:
            netbench.stop(proc)

    def test_busy_queue_gives_up_after_the_retries(self):
        with self.assertRaisesRegex(netbench.HarnessError, "case: receiver failed: .*busy"):
            netbench.start_receiver(FakeTestbed(), fake_receiver(self.tries, 10), "case", None,
                                    10)
        self.assertEqual(self.tries_made(), 4)

    def test_other_failures_are_not_retried(self):
        with self.assertRaisesRegex(netbench.HarnessError, "no such interface"):
            netbench.start_receiver(FakeTestbed(), fake_receiver(self.tries, 1, True), "case",
                                    None, 10)
        self.assertEqual(self.tries_made(), 1)


def point(phase, offered, delivered, passed):
    return {"phase": phase, "offered_pps": offered, "delivered_pps": delivered, "passed": passed}


class ReachedTest(unittest.TestCase):
    RATE = 1.5e6

    def test_a_passing_point_at_the_rate(self):
        e = {"points": [point("coarse", 1.46e6, 1.45e6, True)]}
        self.assertTrue(netbench.reached(e, self.RATE))

    def test_the_rate_delivered_under_overload(self):
        e = {"points": [point("unpaced", 9.3e6, 1.88e6, False),
                        point("coarse", 0.4e6, 0.37e6, False)]}
        self.assertTrue(netbench.reached(e, self.RATE))

    def test_below_the_rate(self):
        e = {"points": [point("unpaced", 9.3e6, 1.2e6, False),
                        point("fine", 1.2e6, 1.19e6, True)]}
        self.assertFalse(netbench.reached(e, self.RATE))

    def test_common_points_do_not_count(self):
        e = {"points": [point("common", 1.5e6, 1.5e6, True)]}
        self.assertFalse(netbench.reached(e, self.RATE))


class AccountingTest(unittest.TestCase):
    HOLDS = {"accounting_ok": 1, "received": 90, "socket_rx_dropped": 10, "socket_queued": 0,
             "udp_delivered": 100, "socket_rx_datagrams": 90}

    def test_an_application_whose_accounting_holds(self):
        self.assertIsNone(netbench.accounting_problem("app_quadsock_conn500_shm", self.HOLDS))

    def test_an_application_whose_accounting_fails_says_its_figures(self):
        d = dict(self.HOLDS, accounting_ok=0, udp_delivered=101)
        problem = netbench.accounting_problem("app_quadsock_conn500_shm", d)
        self.assertIn("received 90 + dropped 10 + queued 0 against 101 delivered", problem)

    def test_no_details_is_a_failure_for_an_application_only(self):
        self.assertIn("no details", netbench.accounting_problem("app_quadsock_conn500_shm", None))
        self.assertIsNone(netbench.accounting_problem("quadsock_conn500", None))


class FakeServed:
    """Stands in for ServedReceiver: the search only passes it to capacity_point."""
    flows, base, accounting = 500, "10.9.1.1", None

    def __init__(self, tb, bins, name, wait):
        pass

    def close(self):
        return None


class SearchCapacityTest(unittest.TestCase):
    """The search over faked points: a case that delivers everything offered up to
    `capacity`, and whose runs listed in `hiccups` (by their order) fail whatever the rate."""

    CFG = dict(netbench.CAPACITY, case_budget_seconds=1e9)

    def setUp(self):
        self.saved = netbench.ServedReceiver, netbench.capacity_point
        netbench.ServedReceiver = FakeServed
        netbench.capacity_point = self.fake_point
        self.runs = 0

    def tearDown(self):
        netbench.ServedReceiver, netbench.capacity_point = self.saved

    def fake_point(self, tb, bins, rx, rate, cfg, phase):
        self.runs += 1
        offered = rate if rate else 1e6  # the generator's unpaced rate
        passed = offered <= self.capacity and self.runs not in self.hiccups
        return point(phase, offered, offered if passed else offered * 0.5, passed) | {
            "requested_pps": rate, "fraction": 1.0 if passed else 0.5, "napi_cpu_s": 0.0,
            "receiver_cpu_s": 0.0, "received": 1000}

    def search(self, capacity, hiccups=()):
        self.capacity, self.hiccups = capacity, set(hiccups)
        return netbench.search_capacity(FakeTestbed(), "bins", "kernel_conn500", self.CFG,
                                        lambda msg: None)

    def test_a_steady_case(self):
        e = self.search(300e3)
        self.assertGreater(e["capacity_pps"], 280e3)
        self.assertLessEqual(e["capacity_pps"], 300e3)

    def test_one_failing_first_point_does_not_cap_the_capacity(self):
        # Run 1 is the unpaced point, run 2 the first paced one (start_pps).
        e = self.search(300e3, hiccups=[2])
        self.assertGreater(e["capacity_pps"], 280e3)
        self.assertLessEqual(e["capacity_pps"], 300e3)
        first = [p for p in e["points"] if p["requested_pps"] == self.CFG["start_pps"]]
        self.assertEqual([p["passed"] for p in first], [False, True])
        self.assertTrue(first[0]["retried"])

    def test_a_first_point_that_fails_twice_halves_the_rate(self):
        e = self.search(30e3, hiccups=[])
        self.assertGreater(e["capacity_pps"], 0)
        self.assertLess(e["capacity_pps"], self.CFG["start_pps"])
        first = [p for p in e["points"] if p["requested_pps"] == self.CFG["start_pps"]]
        self.assertEqual([p["passed"] for p in first], [False, False])


class KernelAddressTest(unittest.TestCase):
    """quadsockd refuses an address the kernel holds: a kernel_* case leaves it on the veth,
    and the app_* case after it takes it away before quadsockd starts."""

    def setUp(self):
        self.saved = netbench.Quadsockd, netbench.start_receiver
        seen = self.seen = []

        class FakeQuadsockd:
            listen = "unix:/fake"

            def __init__(self, tb, *args, **kwargs):
                seen.append(tb.kernel_address)

            def close(self):
                pass

        netbench.Quadsockd = FakeQuadsockd
        netbench.start_receiver = lambda *args, **kwargs: None

    def tearDown(self):
        netbench.Quadsockd, netbench.start_receiver = self.saved

    def test_app_case_after_a_kernel_case(self):
        tb = FakeTestbed()
        tb.kernel_address = False
        tb.set_kernel_address = lambda present: setattr(tb, "kernel_address", present)
        netbench.Receiving(tb, "bins", "kernel_conn500", [], None, 10)
        self.assertTrue(tb.kernel_address)
        netbench.Receiving(tb, "bins", "app_quadsock_conn500_grpc", [], None, 10)
        self.assertEqual(self.seen, [False])


class VethDropsTest(unittest.TestCase):
    ETHTOOL_S = """NIC statistics:
     peer_ifindex: 3
     rx_queue_0_xdp_packets: 120
     rx_queue_0_drops: 7
     rx_queue_0_xdp_drops: 0
     tx_queue_0_xdp_xmit: 900
     tx_queue_0_xdp_xmit_errors: 41
"""

    def test_only_drop_and_error_counters(self):
        self.assertEqual(testbed.drop_counters(self.ETHTOOL_S),
                         {"rx_queue_0_drops": 7, "rx_queue_0_xdp_drops": 0,
                          "tx_queue_0_xdp_xmit_errors": 41})

    def test_deltas(self):
        self.assertEqual(testbed.counter_deltas({"a": 5, "b": 1}, {"a": 9, "b": 1, "c": 3}),
                         {"a": 4, "b": 0})


class WakeLatencyTest(unittest.TestCase):
    OUTPUT = ("wake-ups of a thread asleep on CPU 0 from CPU 1, microseconds:\n"
              "gap     100 us: 399 seen, 1 lost; p50 6.0, p90 8.3, p99 18.0, max 147.9\n"
              "gap    2000 us: 400 seen, 0 lost; p50 39.1, p90 56.3, p99 85.5, max 3963.7\n")

    def test_each_gap_is_read(self):
        gaps = netbench_report.parse_wake_latency(self.OUTPUT)
        self.assertEqual(gaps, [
            {"gap_us": 100, "seen": 399, "lost": 1, "p50_us": 6.0, "p90_us": 8.3,
             "p99_us": 18.0, "max_us": 147.9},
            {"gap_us": 2000, "seen": 400, "lost": 0, "p50_us": 39.1, "p90_us": 56.3,
             "p99_us": 85.5, "max_us": 3963.7}])

    def test_the_report_shows_them_before_and_after_or_nothing(self):
        gaps = netbench_report.parse_wake_latency(self.OUTPUT)
        lines = netbench_report.wake_markdown({"wake_latency": {"before": gaps, "after": gaps}})
        self.assertIn("| before | 2000 us | 39.1 | 56.3 | 85.5 | 3963.7 | 0 |", lines)
        self.assertIn("| after | 100 us | 6.0 | 8.3 | 18.0 | 147.9 | 1 |", lines)
        self.assertEqual(netbench_report.wake_markdown({"wake_latency": None}), [])

    def test_no_tool_no_figures(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(netbench.wake_latency(d))


class AutogroupTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "sched_autogroup_enabled")
        with open(self.path, "w") as f:
            f.write("1\n")

    def tearDown(self):
        self.dir.cleanup()

    def setting(self):
        with open(self.path) as f:
            return f.read().strip()

    def test_off_inside_restored_after(self):
        with testbed.autogroup_off(self.path) as saved:
            self.assertEqual(saved, "1")
            self.assertEqual(self.setting(), "0")
        self.assertEqual(self.setting(), "1")

    def test_restored_on_interrupt(self):
        with self.assertRaises(KeyboardInterrupt):
            with testbed.autogroup_off(self.path):
                raise KeyboardInterrupt("signal 15")
        self.assertEqual(self.setting(), "1")

    def test_no_autogroups_in_the_kernel(self):
        with testbed.autogroup_off(os.path.join(self.dir.name, "absent")) as saved:
            self.assertIsNone(saved)


if __name__ == "__main__":
    unittest.main()
