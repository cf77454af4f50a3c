"""readme_examples: which README blocks run, which are marked, the checks a line's comment
states (run in bash here), and the stand-ins for bazel and sudo. No root needed."""

import os
import subprocess
import tempfile
import unittest

import readme_examples
from readme_examples import ReadmeError, parse


def run(script):
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


class ParseTest(unittest.TestCase):

    def test_blocks_and_markers(self):
        blocks = parse("text\n\n```sh\necho a\n```\n\n<!-- example: not run: it recurses -->\n"
                       "```sh\n./scripts/test.sh\n```\n"
                       "<!-- example: in the background until /run/x.sock exists -->\n"
                       "```sh\nd --listen=unix:/run/x.sock\n```\n"
                       "<!-- example: run with ~/v/bin/python3 -->\n"
                       "<!-- example: the peer gets \"echo hello\", \"two\" -->\n"
                       "```python\nimport quadsock\n```\n")
        self.assertEqual([(b.line, b.language) for b in blocks],
                         [(3, "sh"), (8, "sh"), (12, "sh"), (17, "python")])
        self.assertEqual(blocks[0].text, "echo a\n")
        self.assertIsNone(blocks[0].not_run)
        self.assertEqual(blocks[1].not_run, "it recurses")
        self.assertEqual(blocks[2].ready_path, "/run/x.sock")
        self.assertEqual(blocks[3].interpreter, "~/v/bin/python3")
        self.assertEqual(blocks[3].peer_gets, [b"echo hello", b"two"])
        self.assertEqual(readme_examples.unmarked(blocks), [])

    def test_a_block_it_cannot_run_must_be_marked(self):
        blocks = parse("```cpp\nint x;\n```\n\n```\nplain\n```\n"
                       "<!-- example: not run: a fragment -->\n```cpp\nint y;\n```\n")
        problems = readme_examples.unmarked(blocks)
        self.assertEqual(len(problems), 2)
        self.assertIn("README.md:1 (cpp)", problems[0])
        self.assertIn("README.md:5 (no language)", problems[1])

    def test_bad_markers_are_errors(self):
        for text, what in [
                ("<!-- example: not run -->\n```sh\nx\n```\n", "unknown example marker"),
                ("<!-- example: sometimes -->\n```sh\nx\n```\n", "unknown example marker"),
                ("<!-- example: not run: why -->\n\n```sh\nx\n```\n", "no block right below"),
                ("<!-- example: not run: why -->\n", "no block right below"),
                ("<!-- example:\nnot run -->\n```sh\nx\n```\n", "is one line"),
                ("```sh\nx\n", "never closed"),
                ("<!-- example: in the background until /x exists -->\n```python\nx\n```\n",
                 "only a shell block"),
                ("<!-- example: run with python3 -->\n```sh\nx\n```\n", "for a Python block")]:
            with self.assertRaisesRegex(ReadmeError, what, msg=text):
                parse(text)


class ShellScriptTest(unittest.TestCase):

    def script(self, body):
        return readme_examples.shell_script(parse("# t\n```sh\n" + body + "```\n")[0])

    def test_plain_lines_run_with_errexit(self):
        self.assertEqual(run(self.script("echo one\n")).returncode, 0)
        result = run(self.script("test -e /nonexistent\necho not reached\n"))
        self.assertNotEqual(result.returncode, 0)
        self.assertNotIn("not reached", result.stdout)
        self.assertIn("(status 1): test -e /nonexistent", result.stderr)  # which line
        self.assertNotEqual(run(self.script("echo $UNSET_VARIABLE\n")).returncode, 0)
        self.assertNotEqual(run(self.script("false | cat\n")).returncode, 0)

    def test_quoted_output_is_checked(self):
        ok = run(self.script('echo "10.1.0.1:5000 -> 10.1.0.2:4000 #1 5 bytes: hello"'
                             '   # "10.1.0.1:5000 -> ... bytes: hello"\n'))
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("#1 5 bytes: hello", ok.stdout)  # the output is still shown
        bad = run(self.script('echo SERVING   # "NOT_SERVING"\necho after\n'))
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("README.md:3: the output does not have", bad.stderr)
        self.assertNotIn("after", bad.stdout)
        # Regular expression characters in the quoted text are plain text.
        self.assertNotEqual(run(self.script('echo ab   # "a.*"\n')).returncode, 0)

    def test_exit_status_is_checked(self):
        ok = run(self.script("echo 'x: PERMISSION_DENIED' >&2; exit 1   # exit 1, "
                             "\"PERMISSION_DENIED\"\necho after\n"))
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("after", ok.stdout)
        self.assertIn("PERMISSION_DENIED", ok.stdout)
        succeeded = run(self.script("true   # exit 1\n"))
        self.assertNotEqual(succeeded.returncode, 0)
        self.assertIn("exit status 0, where the README says 1", succeeded.stderr)
        self.assertNotEqual(run(self.script("false   # exit 0\n")).returncode, 0)

    def test_comments_inside_quotes_and_continuations(self):
        ok = run(self.script("echo 'a # \"b\"' \\\n  c   # \"a # \"\n"))
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertNotEqual(run(self.script("echo 'a # \"b\"' \\\n  c   # \"d\"\n")).returncode,
                            0)
        # A comment with no quoted text and no exit status checks nothing.
        self.assertEqual(run(self.script("echo x   # counters that move\n")).returncode, 0)


class ShimsTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
        self.dir = self.tmp.name
        built = os.path.join(self.dir, "built")
        with open(built, "w") as f:
            f.write("//service:quadsockd /bin/true\n//clients/quadctl:quadctl /bin/echo\n")
        os.mkdir(os.path.join(self.dir, "shims"))
        readme_examples.write_shims(os.path.join(self.dir, "shims"), built, "/root-home")

    def tearDown(self):
        self.tmp.cleanup()

    def bazel(self, *args):
        return subprocess.run([os.path.join(self.dir, "shims", "bazel")] + list(args),
                              cwd=self.dir, capture_output=True, text=True).returncode

    def built(self, path):
        return os.path.exists(os.path.join(self.dir, "bazel-bin", path))

    def test_bazel_bin_follows_the_last_builds_configuration(self):
        self.assertEqual(self.bazel("build", "-c", "opt", "//service:quadsockd",
                                    "//clients/quadctl:quadctl"), 0)
        self.assertTrue(self.built("service/quadsockd"))
        self.assertTrue(self.built("clients/quadctl/quadctl"))
        self.assertEqual(self.bazel("build", "//clients/quadctl"), 0)  # fastbuild
        self.assertTrue(self.built("clients/quadctl/quadctl"))
        self.assertFalse(self.built("service/quadsockd"))  # in k8-opt, no longer bazel-bin
        self.assertEqual(self.bazel("build", "//clients/quadctl:quadctl", "-c", "opt"), 0)
        self.assertTrue(self.built("service/quadsockd"))

    def test_bazel_refuses_what_it_cannot_give(self):
        self.assertEqual(self.bazel("build", "//service:other"), 1)
        self.assertEqual(self.bazel("build", "--keep_going", "//service:quadsockd"), 2)
        self.assertEqual(self.bazel("build"), 2)
        self.assertEqual(self.bazel("test", "//..."), 2)
        self.assertEqual(self.bazel("run", "//stack/net:frame_tool"), 2)

    def test_sudo_resets_the_environment_unless_told(self):
        sudo = os.path.join(self.dir, "sudo")
        with open(sudo, "w") as f:
            f.write(readme_examples.SUDO_SHIM % {"secure_path": readme_examples.SECURE_PATH,
                                                 "root_home": "/root-home"})
        os.chmod(sudo, 0o755)
        env = {"PATH": "/elsewhere:" + os.environ["PATH"], "QUADSOCK_SESSION": "s1"}
        show = ["sh", "-c", 'echo "${QUADSOCK_SESSION:-none} $PATH ${HOME:-}"']

        def run_sudo(*args):
            return subprocess.run([sudo] + list(args) + show, env=env, capture_output=True,
                                  text=True, check=True).stdout.split()

        self.assertEqual(run_sudo(), ["none", readme_examples.SECURE_PATH, "/root-home"])
        self.assertEqual(run_sudo("-E")[:2], ["s1", readme_examples.SECURE_PATH])
        self.assertEqual(subprocess.run([sudo, "-u", "nobody", "true"],
                                        capture_output=True).returncode, 2)


if __name__ == "__main__":
    unittest.main()
