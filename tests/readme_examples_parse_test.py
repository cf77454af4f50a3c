"""readme_examples: which README blocks run, which are marked, and the checks a line's comment
states (run in bash here, no root needed)."""

import subprocess
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


if __name__ == "__main__":
    unittest.main()
