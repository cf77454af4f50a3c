"""Unit tests of the harness (no root, no network): a receiver that finds its AF_XDP queue still
busy is started again, any other failure is reported at once; which cases run at the common
rate."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbench  # noqa: E402


class FakeTestbed:
    rx_dev = "fake0"

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


if __name__ == "__main__":
    unittest.main()
