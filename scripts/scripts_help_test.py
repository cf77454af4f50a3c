"""The README's commands and the container scripts answer --help at once (their header comment)
and refuse an unknown argument with exit status 2 before doing anything: none of them may
start a build, a test run or a network namespace on a typo."""

import os
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {
    "scripts/test.sh": "N passed, N failed",
    "scripts/demo.sh": "--sockets N",
    "scripts/setup.sh": "Debian 12",
    "docker/build.sh": "--rebase",
    "docker/smoke.sh": "kernel peer",
    "packaging/build_deb.sh": "quadsock_VERSION_ARCH.deb",
    "packaging/deb_test.sh": "fresh Debian 12",
}


def run(script, *args):
    return subprocess.run([os.path.join(ROOT, script), *args], capture_output=True, text=True,
                          timeout=20)


class ScriptsHelpTest(unittest.TestCase):

    def test_help_prints_the_header_and_succeeds(self):
        for script, phrase in SCRIPTS.items():
            with self.subTest(script=script):
                p = run(script, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(phrase, p.stdout)
                self.assertNotIn("#", p.stdout.splitlines()[0])  # the comment, unprefixed

    def test_an_unknown_argument_is_refused(self):
        for script in SCRIPTS:
            with self.subTest(script=script):
                p = run(script, "--no-such-option")
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn("--help", p.stderr)
                self.assertEqual(p.stdout, "")

    def test_demo_wants_a_number_of_sockets(self):
        p = run("scripts/demo.sh", "--sockets", "many")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("positive number", p.stderr)


if __name__ == "__main__":
    unittest.main()
