"""README.md's examples, run as written (root): every ```sh and ```python block, taken from the
README itself, against a real quadsockd on a veth pair, in the README's order; a block it cannot
run must say so with a marker (tests/readme_examples.py), or this test fails.

The world the README assumes, made private to this test:
- a network namespace of its own whose veth end is named eth0 (names are per namespace), with
  no kernel address; the veth's other end in a peer namespace holds 10.1.0.1/24 and
  fd00:1::1/64, with transmit checksum offload off (as the README says to do on veth);
- a mount namespace of its own with an empty /run (/run/quadsock, /run/quadsock-admin) and an
  empty /usr/local/bin, so that what the blocks make and install there stays here;
- the repository root as the working directory, where `bazel build` is a stand-in that gives
  the binaries this test was built with, under bazel-bin as Bazel would: per configuration, so
  that building with other flags moves bazel-bin away from what was built before;
- `sudo`, if it is not installed, a stand-in that resets the environment as Debian's sudo does
  (only -E keeps it; PATH is the secure path), since the blocks run as root;
- a fresh HOME and environment: nothing of this test's Python path reaches the blocks.

The peer, a kernel UDP socket at 10.1.0.1:5000, sends "hello" to 10.1.0.2:4000 ten times a
second throughout; a block marked `the peer gets "..."` passes only if those payloads reached it
while (or just after) the block ran. Every block runs within a bounded time.

Usage (Bazel passes these): readme_examples_test.py README --built=LABEL=PATH... --tree PATH...
"""

import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import netns
import readme_examples
import sanitizer_report

PEER4, PEER6, PEER_PORT = "10.1.0.1", "fd00:1::1", 5000
STACK4, STACK_PORT = "10.1.0.2", 4000
BLOCK_SECONDS = 120   # a block's time (the Python package's install builds it)
READY_SECONDS = 60    # for a background block's path to appear
STOP_SECONDS = 30     # for a background block to end after SIGTERM
PEER_GRACE_SECONDS = 20  # for what a block sent to reach the peer after the block ended
CLONE_NEWNS = 0x00020000

ARGS = None


def sh(command):
    subprocess.run(["sh", "-c", command], check=True)


def enter_private_mounts():
    """A mount namespace of this process's own, with empty /run and /usr/local/bin."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "unshare(CLONE_NEWNS): %s (this test needs root)" % os.strerror(err))
    sh("mount --make-rprivate / && mount -t tmpfs tmpfs /run && mkdir /run/netns"
       " && mount -t tmpfs tmpfs /usr/local/bin")


class Peer:
    """The kernel's UDP socket at 10.1.0.1:5000: sends "hello" to 10.1.0.2:4000 ten times a
    second, and keeps what it receives (payload, source, when)."""

    def __init__(self, net):
        self.sock = net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((PEER4, PEER_PORT))
        self.sock.settimeout(0.1)
        self.received = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._send, self._read)]
        for t in self.threads:
            t.start()

    def _send(self):
        while not self.stopping.wait(0.1):
            try:
                self.sock.sendto(b"hello", (STACK4, STACK_PORT))
            except OSError:
                pass  # no neighbour yet (quadsockd not started): the next one

    def _read(self):
        while not self.stopping.is_set():
            try:
                payload, source = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            with self.lock:
                self.received.append((payload, source, time.monotonic()))

    def got_since(self, since):
        with self.lock:
            return {p for p, source, t in self.received if t >= since and source[0] == STACK4}

    def close(self):
        self.stopping.set()
        for t in self.threads:
            t.join()
        self.sock.close()


class ReadmeExamplesTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="readme-", dir=os.environ.get("TEST_TMPDIR"))
        self.root = os.path.join(self.tmp, "repository")
        self.home = os.path.join(self.tmp, "home")
        shims = os.path.join(self.tmp, "shims")
        for d in (self.root, self.home, os.path.join(self.tmp, "root-home"), shims):
            os.makedirs(d)
        # The repository's files the blocks read, copied so that nothing they write (a Python
        # package's build) lands in the source tree.
        for path in ARGS.tree:
            dest = os.path.join(self.root, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(path, dest)
        built = os.path.join(self.tmp, "built")
        with open(built, "w") as f:
            for entry in ARGS.built:
                label, path = entry.split("=", 1)
                f.write("%s %s\n" % (label, os.path.abspath(path)))
        readme_examples.write_shims(shims, built, os.path.join(self.tmp, "root-home"))
        self.env = {"PATH": shims + ":" + readme_examples.SECURE_PATH, "HOME": self.home, "LANG": "C.UTF-8",
                    "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash", "TERM": "dumb",
                    "TMPDIR": self.tmp}
        self.background = []  # (block, process, log path)
        self.net = netns.PeerNetwork("eth0", "peer0")
        self.net.peer_shell("ip addr add %s/24 dev peer0 && ip addr add %s/64 dev peer0 nodad"
                            % (PEER4, PEER6))
        self.peer = Peer(self.net)

    def tearDown(self):
        failures = [self.stop(b, p, log) for b, p, log in self.background]
        self.peer.close()
        self.net.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        failures = [f for f in failures if f]
        if failures:
            raise AssertionError("\n".join(failures))

    def log_of(self, path, lines=60):
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def daemons_output(self):
        return "".join("\n--- %r, in the background:\n%s" % (b, self.log_of(log))
                       for b, _, log in self.background)

    def sanitizer_runtime(self):
        """AddressSanitizer's runtime when this test was built with it into the preload library
        (a sanitizer configuration): the programs quadsock-run loads it into were not, and need
        the runtime preloaded first (quadsock-run keeps what is preloaded already first)."""
        for entry in ARGS.built:
            label, path = entry.split("=", 1)
            if label.endswith(":libquadsock_preload.so"):
                for line in subprocess.run(["ldd", path], capture_output=True,
                                           text=True).stdout.splitlines():
                    if "libasan" in line and "=>" in line:
                        return line.split("=>")[1].split()[0]
        return None

    def start(self, command, log, env=None):
        """Runs the block in a process group of its own; returns the process."""
        with open(log, "w") as out:
            return subprocess.Popen(command, cwd=self.root, env=env or self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    def command(self, block, path):
        if block.language in readme_examples.SHELL:
            with open(path, "w") as f:
                f.write(readme_examples.shell_script(block))
            return ["bash", path]
        with open(path, "w") as f:
            f.write(block.text)
        interpreter = block.interpreter or "python3"
        if interpreter.startswith("~/"):
            interpreter = os.path.join(self.home, interpreter[2:])
        elif "/" not in interpreter:
            interpreter = shutil.which(interpreter, path=self.env["PATH"]) or interpreter
        return [interpreter, path]

    def run_block(self, n, block):
        script = os.path.join(self.tmp, "block%d" % n)
        log = script + ".log"
        print("%r:\n%s" % (block, block.text))
        since = time.monotonic()
        env = self.env
        runtime = self.sanitizer_runtime() if "quadsock-run" in block.text else None
        if runtime:
            env = dict(self.env, LD_PRELOAD=runtime, ASAN_OPTIONS="detect_leaks=0")
        proc = self.start(self.command(block, script), log, env)
        if block.ready_path:
            deadline = time.monotonic() + READY_SECONDS
            while not os.path.exists(block.ready_path):
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.stop(block, proc, log)
                    self.fail("%r: %s did not appear (%s):\n%s" % (
                        block, block.ready_path, "in %d s" % READY_SECONDS
                        if proc.returncode is None else "status %d" % proc.returncode,
                        self.log_of(log)))
                time.sleep(0.05)
            self.background.append((block, proc, log))
            print("%r: running in the background, %s exists" % (block, block.ready_path))
        else:
            try:
                proc.wait(timeout=BLOCK_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self.fail("%r did not end in %d s:\n%s%s" % (block, BLOCK_SECONDS,
                                                            self.log_of(log),
                                                            self.daemons_output()))
            output = self.log_of(log, lines=200)
            print("%r: exit %d\n%s" % (block, proc.returncode, output))
            self.assertEqual(proc.returncode, 0, "%r failed:\n%s%s"
                             % (block, output, self.daemons_output()))
        if block.peer_gets:
            wanted = set(block.peer_gets)
            deadline = time.monotonic() + PEER_GRACE_SECONDS
            while not wanted <= self.peer.got_since(since):
                if time.monotonic() > deadline:
                    self.fail("%r: the peer did not get %s (it got %s)%s"
                              % (block, sorted(wanted - self.peer.got_since(since)),
                                 sorted(self.peer.got_since(since))[:10],
                                 self.daemons_output()))
                time.sleep(0.05)
            print("%r: the peer got %s" % (block, sorted(wanted)))

    def built(self, label):
        for entry in ARGS.built:
            name, _, path = entry.partition("=")
            if name == label:
                return path
        raise AssertionError("no --built=%s=PATH" % label)

    def stop(self, block, proc, log):
        """Ends a background block, checked as every end-to-end test checks its quadsockd: it
        still runs; a daemon with a clients' socket (its ready path) has every UMEM frame
        accounted for (`quadctl check`); SIGTERM to its programs ends them all within
        STOP_SECONDS and the block with 0; its log holds no sanitizer report. A message of what
        failed, or None."""
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return "%r had ended before the last block:\n%s" % (block, self.log_of(log))
        problems = []
        if block.ready_path and block.ready_path.endswith(".sock"):
            check = subprocess.run([self.built("//clients/quadctl:quadctl"),
                                    "--target=unix:" + block.ready_path, "check"],
                                   capture_output=True, text=True, timeout=60)
            if check.returncode != 0 or check.stdout.strip() != "frame accounting ok":
                problems.append("quadctl check said (exit %d): %s%s" % (
                    check.returncode, check.stdout.strip(), check.stderr.strip()))
        # SIGTERM to the block's programs, not to the shell that runs them: the shell then ends
        # with its last program's status, which is the daemon's exit to judge.
        members = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True,
                                 text=True).stdout.split()
        programs = [int(pid) for pid in members if int(pid) != proc.pid] or [proc.pid]
        for pid in programs:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_SECONDS
        while True:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                problems.append("it did not stop in %d s after SIGTERM" % STOP_SECONDS)
                break
            proc.poll()  # reaps the group's leader, so that the group can empty
            time.sleep(0.05)
        if proc.wait() != 0 and not problems:
            problems.append("SIGTERM ended it with %d, not 0" % proc.returncode)
        with open(log, errors="replace") as f:
            report = sanitizer_report.first_line(f.read())
        if report:
            problems.append("a sanitizer reported: " + report)
        if not problems:
            return None
        return "%r: %s:\n%s" % (block, "; ".join(problems), self.log_of(log))

    def test_readme_examples(self):
        with open(ARGS.readme) as f:
            blocks = readme_examples.parse(f.read())
        problems = readme_examples.unmarked(blocks)
        self.assertEqual(problems, [], "\n".join(problems))
        ran = 0
        for n, block in enumerate(blocks):
            if block.not_run is not None:
                print("%r: not run: %s" % (block, block.not_run))
                continue
            self.run_block(n, block)
            ran += 1
        self.assertGreater(ran, 0, "README.md has no block to run")
        print("%d of README.md's %d blocks ran" % (ran, len(blocks)))


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("readme")
    parser.add_argument("--built", action="append", default=[], help="LABEL=PATH")
    parser.add_argument("--tree", nargs="*", default=[],
                        help="the repository's files the blocks read")
    ARGS, rest = parser.parse_known_args()
    # First, while this process has one thread: its own mounts and network.
    enter_private_mounts()
    netns.enter_private_namespace()
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
