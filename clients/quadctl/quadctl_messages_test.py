"""quadctl's messages for a first run that goes wrong: nothing answers at the target (which one,
where it came from, what to do; sudo's dropped environment), a mistyped option or command
("did you mean"). No quadsockd: these are the answers when there is none.

Usage (Bazel passes it): quadctl_messages_test.py QUADCTL
Root: the default target's case runs in a private mount namespace with an empty /run, so that no
quadsockd of the host's answers there.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

QUADCTL = None


def quadctl(*args, env=None, wrap=()):
    """Runs quadctl with only the environment given (none of the caller's QUADSOCK_ ones)."""
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    clean.update(env or {})
    return subprocess.run(list(wrap) + [QUADCTL] + list(args), env=clean, capture_output=True,
                          text=True, timeout=60)


def in_empty_run():
    """A command prefix: a private mount namespace where /run is an empty tmpfs."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs none /run && exec "$@"', "sh"]


class UnreachableTargetTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.missing = "unix:" + os.path.join(self.dir.name, "no-quadsockd.sock")

    def tearDown(self):
        self.dir.cleanup()

    def test_from_the_flag(self):
        r = quadctl("--target=" + self.missing, "stats")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("quadctl: UNAVAILABLE: ", r.stderr)
        self.assertIn("quadctl: nothing answers at %s (from --target). Is quadsockd running, "
                      "with --listen there? Point quadctl at it with --target=unix:PATH or "
                      "QUADSOCK_TARGET." % self.missing, r.stderr)
        self.assertNotIn("sudo", r.stderr)

    def test_from_the_environment(self):
        r = quadctl("health", env={"QUADSOCK_TARGET": self.missing})
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("nothing answers at %s (from QUADSOCK_TARGET)" % self.missing, r.stderr)

    def test_the_admin_listener_names_its_own_variable(self):
        r = quadctl("--admin", "neigh", env={"QUADSOCK_ADMIN_TARGET": self.missing})
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("nothing answers at %s (from QUADSOCK_ADMIN_TARGET). Is quadsockd "
                      "running, with --admin_listen there? Point quadctl at it with "
                      "--target=unix:PATH or QUADSOCK_ADMIN_TARGET." % self.missing, r.stderr)

    def test_the_default_under_sudo_says_what_sudo_dropped(self):
        r = quadctl("stats", wrap=in_empty_run())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("nothing answers at unix:/run/quadsock/quadsock.sock (the default: "
                      "neither --target nor QUADSOCK_TARGET is set)", r.stderr)
        self.assertNotIn("sudo", r.stderr)
        r = quadctl("stats", env={"SUDO_USER": "alice"}, wrap=in_empty_run())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("quadctl: sudo drops QUADSOCK_TARGET and QUADSOCK_SESSION from the "
                      "environment: `sudo -E quadctl ...` keeps them, or pass --target and "
                      "--session.", r.stderr)

    def test_a_socket_this_user_may_not_open(self):
        # A listener of root's, mode 0600 (as quadsockd's administration listener), and quadctl
        # run as nobody from where nobody may run it (Bazel's runfiles are under root's home).
        os.chmod(self.dir.name, 0o755)
        path = os.path.join(self.dir.name, "root-only.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen()
        os.chmod(path, 0o600)
        binary = os.path.join(self.dir.name, "quadctl")
        shutil.copy(QUADCTL, binary)
        os.chmod(binary, 0o755)
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        try:
            r = subprocess.run(nobody + [binary, "--admin", "neigh"], capture_output=True,
                               text=True, timeout=60,
                               env={"QUADSOCK_ADMIN_TARGET": "unix:" + path})
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("quadctl: this user may not open unix:%s (from QUADSOCK_ADMIN_TARGET). "
                          "The administration listener is for quadsockd's own user only: "
                          "`sudo quadctl --admin ...`." % path, r.stderr)
            self.assertNotIn("nothing answers", r.stderr)
            r = subprocess.run(nobody + [binary, "--target=unix:" + path, "stats"],
                               capture_output=True, text=True, timeout=60, env={})
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("this user may not open unix:%s (from --target). quadsockd's listener "
                          "is for its user and group (mode 0660)" % path, r.stderr)
        finally:
            listener.close()

    def test_other_errors_get_no_such_hint(self):
        r = quadctl("--target=unix:", "stats")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertNotIn("nothing answers", r.stderr)


class DidYouMeanTest(unittest.TestCase):

    def test_a_mistyped_option(self):
        r = quadctl("--targte=unix:/x", "stats")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("quadctl: unknown option --targte (did you mean --target?)", r.stderr)
        # A command's own options count as well as the global ones.
        r = quadctl("recv", "1", "--cont=3")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unknown option --cont (did you mean --count?)", r.stderr)

    def test_a_mistyped_command(self):
        r = quadctl("stat")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('quadctl: unknown command "stat" (did you mean stats?)', r.stderr)
        r = quadctl("neig", "list")
        self.assertIn('unknown command "neig" (did you mean neigh?)', r.stderr)

    def test_nothing_near_gets_no_guess(self):
        r = quadctl("--zzzzzz", "stats")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("quadctl: unknown option --zzzzzz\n", r.stderr)
        r = quadctl("qqqqqq")
        self.assertIn('quadctl: unknown command "qqqqqq"\n', r.stderr)


if __name__ == "__main__":
    QUADCTL = os.path.abspath(sys.argv.pop(1))
    unittest.main()
