"""README.md's examples as tests: finds every fenced block and says how each is run.

A ```sh block runs in bash with `set -euo pipefail`; a ```python block runs in Python. Any
other block, and one that cannot run as written, carries a marker on the line just above it,
an HTML comment that Markdown does not show:

    <!-- example: not run: REASON -->               never run; REASON says why (required)
    <!-- example: in the background until PATH exists -->   a daemon: started, and the next
                                                     blocks wait until PATH exists
    <!-- example: the peer gets "echo hello" -->     the peer must receive these payloads
    <!-- example: run with ~/venv/bin/python3 -->   the interpreter for a ```python block

A block that is neither runnable nor marked is an error, so a new example cannot go untested.

In a shell block, a line's trailing comment may state what the line does, as a reader expects:
each "double-quoted text" in it must appear in the line's output ("..." inside it stands for
anything), and `exit N` is the exit status it must have (else 0):

    quadctl health                    # "SERVING", exit 0
    quadctl neigh set 10.1.0.1 ...    # exit 1, "PERMISSION_DENIED"

Such a line runs in a command substitution (its output is captured and printed), so it should
not be an assignment that later lines need.

    blocks = readme_examples.parse(open("README.md").read())
    problems = readme_examples.unmarked(blocks)
    script = readme_examples.shell_script(blocks[0])

It also holds the stand-ins for the programs the blocks call that a test cannot run as such
(write_shims): `bazel build`, and `sudo` where it is not installed.
"""

import os
import re
import shutil

SHELL = ("sh", "bash", "shell")
PYTHON = ("python", "python3")

_FENCE = re.compile(r"^(`{3,})\s*([^`\s]*)")
_MARKER = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")
_MARKER_START = re.compile(r"^<!--\s*example\b")


class ReadmeError(Exception):
    pass


class Block:
    """A fenced block: its language, text, the line of its opening fence, and its markers."""

    def __init__(self, line, language, text):
        self.line, self.language, self.text = line, language, text
        self.not_run = None      # the reason, when marked not run
        self.ready_path = None   # runs in the background until this path exists
        self.peer_gets = []      # payloads (bytes) the peer must receive
        self.interpreter = None  # for a Python block

    def runnable(self):
        return self.language in SHELL + PYTHON

    def __repr__(self):
        return "README.md:%d (%s)" % (self.line, self.language or "no language")


def _apply_marker(block, line_number, directive):
    m = re.fullmatch(r"not run:\s*(.+)", directive)
    if m:
        block.not_run = m.group(1)
        return
    m = re.fullmatch(r"in the background until (/\S+) exists", directive)
    if m:
        block.ready_path = m.group(1)
        return
    m = re.fullmatch(r"the peer gets ((?:\"[^\"]+\"(?:,\s*)?)+)", directive)
    if m:
        block.peer_gets += [p.encode() for p in re.findall(r'"([^"]+)"', m.group(1))]
        return
    m = re.fullmatch(r"run with (\S+)", directive)
    if m:
        block.interpreter = m.group(1)
        return
    raise ReadmeError("README.md:%d: unknown example marker %r (see tests/readme_examples.py)"
                      % (line_number, directive))


def parse(markdown):
    """Every fenced block of `markdown`, in order, with the markers just above it."""
    blocks, pending = [], []  # pending: (line number, directive) of markers not yet attached
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line, number = lines[i], i + 1
        marker = _MARKER.match(line)
        if marker:
            pending.append((number, marker.group(1)))
            i += 1
            continue
        if _MARKER_START.match(line):
            raise ReadmeError("README.md:%d: an example marker is one line: "
                              "<!-- example: ... -->" % number)
        fence = _FENCE.match(line)
        if not fence:
            if pending:
                raise ReadmeError("README.md:%d: an example marker with no block right below it"
                                  % pending[0][0])
            i += 1
            continue
        ticks, language = fence.group(1), fence.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(ticks):
            end += 1
        if end == len(lines):
            raise ReadmeError("README.md:%d: the block is never closed" % number)
        block = Block(number, language, "\n".join(lines[i + 1:end]) + "\n")
        for marker_line, directive in pending:
            _apply_marker(block, marker_line, directive)
        pending = []
        if block.ready_path and block.language not in SHELL:
            raise ReadmeError("%r: only a shell block runs in the background" % block)
        if block.interpreter and block.language not in PYTHON:
            raise ReadmeError("%r: 'run with' is for a Python block" % block)
        blocks.append(block)
        i = end + 1
    if pending:
        raise ReadmeError("README.md:%d: an example marker with no block right below it"
                          % pending[0][0])
    return blocks


def unmarked(blocks):
    """The blocks that can be neither run nor skipped: a message for each."""
    return ["%r: a block in a language this test cannot run needs a marker above it: "
            "<!-- example: not run: REASON -->" % b
            for b in blocks if b.not_run is None and not b.runnable()]


def _comment_start(line):
    """Where the shell comment of `line` starts (an unquoted # after a blank), or -1."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return i
        i += 1
    return -1


def _ere(text):
    """An extended regular expression (bash's =~) that matches `text`, "..." matching anything."""
    def escape(piece):
        return re.sub(r"([\\.\[\](){}*+?|^$])", r"\\\1", piece)
    return ".*".join(escape(piece) for piece in text.split("..."))


def _quote(word):
    return "'" + word.replace("'", "'\\''") + "'"


PRELUDE = r"""set -euo pipefail
shopt -s inherit_errexit
trap 'echo "README.md: the block stopped at a command that failed (status $?): $BASH_COMMAND" >&2' ERR
__readme_expect() {  # LINE WANTED-STATUS STATUS OUTPUT ERE...: what the README's comment says
  local line=$1 want=$2 got=$3 out=$4 re
  shift 4
  if [ "$got" != "$want" ]; then
    echo "README.md:$line: exit status $got, where the README says $want" >&2
    exit 1
  fi
  for re in "$@"; do
    if ! [[ $out =~ $re ]]; then
      echo "README.md:$line: the output does not have what the README quotes (/$re/)" >&2
      exit 1
    fi
  done
}
"""


def shell_script(block):
    """The block as a bash script, with the checks its lines' comments state."""
    out = [PRELUDE]
    lines = block.text.split("\n")
    i = 0
    while i < len(lines):
        first = i
        logical = lines[i]
        while logical.endswith("\\") and i + 1 < len(lines):
            i += 1
            logical += "\n" + lines[i]
        i += 1
        start = _comment_start(logical)
        comment = logical[start:] if start >= 0 else ""
        quoted = re.findall(r'"([^"]+)"', comment)
        status = re.search(r"\bexit (\d+)\b", comment)
        if not quoted and not status:
            out.append(logical)
            continue
        number = block.line + 1 + first
        out.append("__readme_status=0; __readme_out=$( { %s\n} 2>&1 ) || __readme_status=$?"
                   % logical[:start].rstrip())
        out.append('printf "%%s\\n" "$__readme_out"; __readme_expect %d %s "$__readme_status" '
                   '"$__readme_out" %s' % (number, status.group(1) if status else "0",
                                            " ".join(_quote(_ere(q)) for q in quoted)))
    return "\n".join(out) + "\n"


# The programs README.md's blocks call that this test stands in for (shims: see write_shims).
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BAZEL_SHIM = r"""#!/bin/bash
# bazel, as README.md's blocks see it in tests/readme_examples_test.py: `bazel build` gives the
# binaries the test was built with, under bazel-out/<configuration>/bin, and points bazel-bin at
# the configuration of the last build, as Bazel does. Anything else is not run in the test.
set -euo pipefail
built=%(built)s
if [ "${1:-}" != build ]; then
  echo "bazel ${1:-}: not run in the README's test (mark the block: <!-- example: not run: ... -->)" >&2
  exit 2
fi
shift
mode=fastbuild config=""
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    -c) mode=$2; shift 2 ;;
    --compilation_mode=*) mode=${1#*=}; shift ;;
    --config=*) config=$config-${1#*=}; shift ;;
    -*) echo "bazel build: the README's test does not know the flag $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || { echo "bazel build: no targets" >&2; exit 2; }
out="bazel-out/k8-$mode$config/bin"
for target in "${targets[@]}"; do
  package=${target#//}; package=${package%%:*}
  name=${target##*:}; [ "$name" != "$target" ] || name=${package##*/}
  path=$(awk -v t="//$package:$name" '$1 == t { print $2 }' "$built")
  if [ -z "$path" ]; then
    echo "bazel build: the README's test was not built with $target (add it to its data)" >&2
    exit 1
  fi
  mkdir -p "$out/$package"
  ln -sfn "$path" "$out/$package/$name"
done
ln -sfn "$out" bazel-bin
echo "INFO: Build completed successfully (the README's test: ${targets[*]} in k8-$mode$config)"
"""

SUDO_SHIM = r"""#!/bin/bash
# sudo, as README.md's blocks see it in tests/readme_examples_test.py (they run as root): the
# environment reset as Debian's sudo resets it (env_reset; -E keeps it), and PATH the secure path.
set -euo pipefail
keep=0
while [ $# -gt 0 ]; do
  case $1 in
    -E | --preserve-env) keep=1; shift ;;
    --) shift; break ;;
    -*) echo "sudo: the README's test does not know the option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: sudo [-E] COMMAND..." >&2; exit 2; }
if [ $keep = 1 ]; then
  exec env PATH=%(secure_path)s SUDO_USER=root "$@"
fi
exec env -i PATH=%(secure_path)s HOME=%(root_home)s TERM="${TERM:-dumb}" LANG=C.UTF-8 \
  USER=root LOGNAME=root SHELL=/bin/bash SUDO_USER=root "$@"
"""


def write_shims(folder, built, root_home):
    """Writes `bazel` into `folder` (`built`: a file of "LABEL PATH" lines, the binaries it
    gives), and `sudo` unless sudo is installed (root_home: HOME for what it runs)."""
    shims = {"bazel": BAZEL_SHIM % {"built": built}}
    if not shutil.which("sudo", path=SECURE_PATH):
        shims["sudo"] = SUDO_SHIM % {"secure_path": SECURE_PATH, "root_home": root_home}
    for name, text in shims.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
