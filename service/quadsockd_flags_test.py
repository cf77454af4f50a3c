"""quadsockd refuses flags that contradict each other at startup, before it touches the network:
exit status 1 and a message naming the flag. Needs no root: the checks come first."""

import subprocess
import sys
import unittest

QUADSOCKD = sys.argv.pop(1) if len(sys.argv) > 1 else "service/quadsockd"
# The interface does not exist: a run that got past the flag checks fails on it instead.
BASE = ["--interface=qs-no-such-if", "--address=10.99.0.2/24",
        "--listen=unix:/tmp/quadsockd-flags-test.sock"]


def run(*flags):
    p = subprocess.run([QUADSOCKD] + BASE + list(flags), capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stderr


class FlagCheckTest(unittest.TestCase):

    def assert_refused(self, flags, words):
        code, err = run(*flags)
        self.assertEqual(code, 1, err)
        self.assertIn("bad flags", err)
        for w in words:
            self.assertIn(w, err)
        self.assertNotIn("qs-no-such-if", err, "the flags were checked after the data plane")

    def test_a_descriptor_limit_below_what_the_flags_allow_is_refused(self):
        # 1,024 sessions with a channel each and 1,024 streams need some 6,200 descriptors.
        p = subprocess.run(["prlimit", "--nofile=2000:2000", QUADSOCKD] + BASE,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1, p.stderr)
        for w in ("RLIMIT_NOFILE allows 2000", "--max_clients", "--max_grpc_threads"):
            self.assertIn(w, p.stderr)
        # Lower limits fit, and a soft limit under the hard one is raised: the run goes on to
        # the (missing) interface.
        p = subprocess.run(["prlimit", "--nofile=256:2000", QUADSOCKD] + BASE +
                           ["--max_clients=100", "--max_grpc_threads=256"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("raised the soft RLIMIT_NOFILE from 256 to", p.stderr)
        self.assertIn("qs-no-such-if", p.stderr)

    def test_lease_over_the_maximum(self):
        self.assert_refused(["--lease_seconds=7200"], ["--lease_seconds", "3600"])

    def test_poll_spin_over_a_second(self):
        self.assert_refused(["--poll_spin_us=1000001"], ["--poll_spin_us=1000001", "one second"])

    def test_lease_of_zero(self):
        self.assert_refused(["--lease_seconds=0"], ["--lease_seconds"])

    def test_no_clients(self):
        self.assert_refused(["--max_clients=0"], ["--max_clients"])

    def test_no_sockets(self):
        self.assert_refused(["--max_sockets=0"], ["--max_sockets "])

    def test_no_sockets_per_client(self):
        self.assert_refused(["--max_sockets_per_client=0"], ["--max_sockets_per_client"])

    def test_more_sockets_per_client_than_in_all(self):
        self.assert_refused(["--max_sockets=100", "--max_sockets_per_client=101"],
                            ["--max_sockets_per_client=101", "--max_sockets=100"])

    def test_no_receive_memory(self):
        self.assert_refused(["--max_receive_mib=0"], ["--max_receive_mib"])

    def test_channel_ring_slots_that_are_no_power_of_two(self):
        self.assert_refused(["--channel_ring_slots=1000"], ["--channel_ring_slots", "power of two"])
        self.assert_refused(["--channel_ring_slots=0"], ["--channel_ring_slots"])

    def test_no_channel_memory(self):
        self.assert_refused(["--max_channel_mib=0"], ["--max_channel_mib"])
        self.assert_refused(["--max_all_channels_mib=0"], ["--max_all_channels_mib"])

    def test_help_says_what_one_peer_may_hold(self):
        p = subprocess.run([QUADSOCKD, "--help"], capture_output=True, text=True, timeout=30)
        text = " ".join(p.stdout.split())  # the help wraps its lines
        for words in ("--max_sessions_per_peer (", "0: half of --max_clients",
                      "--max_streams_per_peer (", "0: half of --max_grpc_threads",
                      "--max_sockets_per_peer (", "0: half of --max_sockets",
                      "a client's user (uid) on a Unix socket",
                      "another user's calls with its token are PERMISSION_DENIED"):
            self.assertIn(words, text)

    def test_asking_for_help_succeeds(self):
        for flag in ("--help", "--helpfull", "--helpshort"):
            p = subprocess.run([QUADSOCKD, flag], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, (flag, p.stderr))
            self.assertIn("--interface", p.stdout, flag)

    def test_help_names_real_commands_and_capabilities(self):
        p = subprocess.run([QUADSOCKD, "--help"], capture_output=True, text=True, timeout=30)
        self.assertIn("`quadctl --json iface`", p.stdout)
        self.assertNotIn("quadctl interfaces", p.stdout)
        self.assertIn("CAP_IPC_LOCK", p.stdout)

    def test_no_unresolved_neighbors_or_probes(self):
        # Each 0 would resolve no neighbour, so send nothing: refused, naming the flag.
        self.assert_refused(["--max_unresolved_neighbors=0"],
                            ["--max_unresolved_neighbors must be at least 1"])
        self.assert_refused(["--max_unresolved_neighbors_per_client=0"],
                            ["--max_unresolved_neighbors_per_client must be at least 1"])
        self.assert_refused(["--neighbor_probes_per_second=0"],
                            ["--neighbor_probes_per_second must be at least 1"])

    def test_more_unresolved_neighbors_per_client_than_in_all(self):
        self.assert_refused(["--max_unresolved_neighbors=10",
                             "--max_unresolved_neighbors_per_client=11"],
                            ["--max_unresolved_neighbors_per_client=11",
                             "--max_unresolved_neighbors=10"])
        # Not given, the per-client cap (64) follows a lower total instead of being refused.
        code, err = run("--max_unresolved_neighbors=4", "--neighbor_probes_per_second=10")
        self.assertEqual(code, 1, err)
        self.assertIn("qs-no-such-if", err)

    def test_help_says_what_bounds_neighbour_resolution(self):
        p = subprocess.run([QUADSOCKD, "--help"], capture_output=True, text=True, timeout=30)
        text = " ".join(p.stdout.split())
        for words in ("--max_unresolved_neighbors (", "default: 256",
                      "--max_unresolved_neighbors_per_client (", "default: 64",
                      "--max_unresolved_neighbors where that is lower",
                      "--neighbor_probes_per_second (", "neighbor_probes_rate_limited"):
            self.assertIn(words, text)

    def test_default_queue_depth_over_its_maximum(self):
        self.assert_refused(["--receive_queue_depth=1024", "--max_receive_queue_depth=512"],
                            ["--receive_queue_depth", "--max_receive_queue_depth"])

    def test_message_size_that_does_not_fit_an_int(self):
        self.assert_refused(["--max_message_bytes=2147483648"], ["--max_message_bytes"])

    def test_vlan_id_past_the_range(self):
        self.assert_refused(["--vlan=4095"], ["--vlan=4095", "1..4094"])

    def test_admin_listener_on_tcp(self):
        # Only a Unix socket's file mode can keep the administration to quadsockd's own user.
        self.assert_refused(["--admin_listen=127.0.0.1:7000"],
                            ["--admin_listen", "\"127.0.0.1:7000\" is not unix:PATH", "0600"])

    def test_admin_listener_without_a_path(self):
        self.assert_refused(["--admin_listen=unix:"], ["--admin_listen", "bad Unix socket path"])

    def test_admin_listener_on_the_client_socket(self):
        self.assert_refused(["--admin_listen=unix:/tmp/quadsockd-flags-test.sock"],
                            ["--admin_listen", "--listen's socket"])

    def test_admin_identities_without_mtls(self):
        self.assert_refused(["--admin_identities=CN=ops"],
                            ["--admin_identities", "--tls_client_ca"])

    def test_tcp_without_client_certificates(self):
        tls = ["--listen=127.0.0.1:7443", "--tls_cert=/nonexistent/cert.pem",
               "--tls_key=/nonexistent/key.pem"]
        # Anyone who reaches the port could send UDP from the node: both fixes are named.
        self.assert_refused(tls, ["--listen=127.0.0.1:7443", "--tls_client_ca", "unix:PATH",
                                  "--allow_unauthenticated_tcp"])
        # Said so explicitly, it gets past the checks (to the interface, which is missing).
        code, err = run(*tls, "--allow_unauthenticated_tcp")
        self.assertEqual(code, 1, err)
        self.assertIn("qs-no-such-if", err)

    def test_tcp_without_tls(self):
        # Even with --allow_unauthenticated_tcp: plain TCP is never served.
        self.assert_refused(["--listen=127.0.0.1:7443", "--allow_unauthenticated_tcp"],
                            ["--listen=127.0.0.1:7443", "needs TLS", "--tls_cert", "--tls_key"])

    def test_help_says_how_administration_works(self):
        p = subprocess.run([QUADSOCKD, "--help"], capture_output=True, text=True, timeout=30)
        for words in ("--admin_listen", "unix:/run/quadsock-admin/admin.sock", "0600",
                      "quadctl --admin neigh set", "PERMISSION_DENIED", "--admin_identities"):
            self.assertIn(words, p.stdout)

    def test_good_flags_get_as_far_as_the_interface(self):
        code, err = run("--lease_seconds=60", "--vlan=100")
        self.assertEqual(code, 1, err)
        self.assertIn("qs-no-such-if", err)
        code, err = run("--admin_listen=")  # none
        self.assertEqual(code, 1, err)
        self.assertIn("qs-no-such-if", err)

    def test_a_mistyped_flag_gets_the_one_meant(self):
        code, err = run("--lease_secnods=60")
        self.assertEqual(code, 1, err)
        self.assertIn("bad flags: INVALID_ARGUMENT: unknown flag --lease_secnods (did you mean "
                      "--lease_seconds?); --help lists them", err)
        code, err = run("--zzzzzz")
        self.assertEqual(code, 1, err)
        self.assertIn("unknown flag --zzzzzz; --help lists them", err)
        self.assertNotIn("did you mean", err)
        # A boolean's "no" form is no typo.
        code, err = run("--nohash4")
        self.assertEqual(code, 1, err)
        self.assertIn("qs-no-such-if", err)


if __name__ == "__main__":
    unittest.main()
