"""Unmodified programs on quadsock through the preload library (root, private network
namespaces): quadsockd on a veth, the programs under quadsock-run beside it, kernel peers in the
peer namespace. Every program's answers are checked, not only its exit status.

A second veth pair (qk0/qk1) gives the kernel its own way to the peer: the socket-semantics
program runs once over it on the kernel and once under the preload on quadsockd's addresses, and
the two runs must print the same lines; programs with a TCP side (iperf3's control connection)
reach the peer's quadsock-side address over it, while their UDP goes through quadsock.

Usage (Bazel passes these): preload_test.py QUADSOCKD QUADSOCK_RUN LIBRARY SEMANTICS
"""

import asyncio  # noqa: F401  (the asyncio program below runs in a child python)
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import netns
import e2e
from e2e import PEER4, PEER6, STACK4, STACK6

QUADSOCK_RUN = LIBRARY = SEMANTICS = None
SANITIZED = None  # the AddressSanitizer runtime the library needs, if it was built with it
KERNEL4, KERNEL_PEER4 = "10.9.0.2", "10.9.0.1"
KERNEL6, KERNEL_PEER6 = "fd00:9::2", "fd00:9::1"
PYTHON = "/usr/bin/python3"


class PreloadTest(e2e.E2eTestCase):

    def setUp(self):
        self.net = e2e.peer_network()
        # The kernel's own way to the peer, on a second veth pair.
        netns.sh("ip link add qk0 type veth peer name qk1 netns %s" % self.net.ns)
        netns.sh("ip link set qk0 up && ip addr add %s/24 dev qk0 && ip addr add %s/64 dev qk0 nodad"
                 % (KERNEL4, KERNEL6))
        self.net.peer_shell("ip link set qk1 up && ip addr add %s/24 dev qk1 && "
                            "ip addr add %s/64 dev qk1 nodad" % (KERNEL_PEER4, KERNEL_PEER6))
        self.daemon = e2e.Daemon()
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix="quadsock-preload-")

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        try:
            self.daemon.finish()
        finally:
            subprocess.run(["ip", "link", "del", "qk0"], stderr=subprocess.DEVNULL)
            self.net.close()

    def env(self, **extra):
        env = dict(os.environ, QUADSOCK_TARGET=self.daemon.target, QUADSOCK_REQUIRE="1",
                   QUADSOCK_PRELOAD_LIBRARY=LIBRARY)
        if SANITIZED:
            # A library built with AddressSanitizer in programs that were not: its runtime
            # comes first (quadsock-run keeps it so), and the programs' own leaks at exit are
            # not ours to report.
            env["LD_PRELOAD"] = SANITIZED
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        env.update(extra)
        return env

    def preload(self, argv, **kw):
        """`argv` under quadsock-run, started (stdout and stderr kept)."""
        p = subprocess.Popen([QUADSOCK_RUN] + argv, env=self.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        return p

    def run_preload(self, argv, timeout=60, **kw):
        return subprocess.run([QUADSOCK_RUN] + argv, env=self.env(), capture_output=True,
                              timeout=timeout, **kw)

    def peer(self, command, timeout=60, **kw):
        return subprocess.run(["ip", "netns", "exec", self.net.ns] + command,
                              capture_output=True, timeout=timeout, **kw)

    def peer_background(self, command):
        p = subprocess.Popen(["ip", "netns", "exec", self.net.ns] + command,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def peer_udp(self, family=socket.AF_INET, address=PEER4):
        s = self.net.peer_socket(family, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.bind((address, 0))
        return s

    def ask(self, sock, payload, to, tries=50, answer=None):
        """Sends `payload` until an answer comes (the server may still be starting). With
        `answer`, only that answer counts: a late one to an earlier ask (sent again while its
        answer was on its way) is passed over."""
        for _ in range(tries):
            sock.sendto(payload, to)
            deadline = time.monotonic() + 0.2
            try:
                while True:
                    sock.settimeout(max(deadline - time.monotonic(), 0.001))
                    data, source = sock.recvfrom(65536)
                    if answer is None or data == answer:
                        return data, source
            except socket.timeout:
                continue
        raise AssertionError("no answer from %s to %r" % (to, payload))

    # --- The semantics program, on the kernel and under the preload.

    def semantics_on_the_kernel(self, *flags):
        out = subprocess.run([SEMANTICS, "--local4=" + KERNEL4, "--peer4=" + KERNEL_PEER4,
                              "--local6=" + KERNEL6, "--peer6=" + KERNEL_PEER6,
                              "--peer-netns=/run/netns/" + self.net.ns, *flags],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, "on the kernel:\n" + out.stdout + out.stderr)
        return out

    def assert_semantics_agree(self, *flags, **env):
        """The semantics program (with `flags`) says the same on the kernel and under the
        preload (with `env` added to its environment)."""
        kernel = self.semantics_on_the_kernel(*flags)
        ours = subprocess.run([QUADSOCK_RUN, SEMANTICS, "--local4=" + STACK4, "--peer4=" + PEER4,
                               "--local6=" + STACK6, "--peer6=" + PEER6,
                               "--peer-netns=/run/netns/" + self.net.ns, *flags],
                              env=self.env(**env), capture_output=True, timeout=180, text=True)
        self.assertEqual(ours.returncode, 0, "under the preload:\n" + ours.stdout + ours.stderr)

        def lines(text, *addresses):
            for a in addresses:
                text = text.replace(a, "LOCAL")
            return text.splitlines()
        self.assertGreater(len(lines(kernel.stdout)), 100)
        self.assertEqual(lines(kernel.stdout, KERNEL4, KERNEL6),
                         lines(ours.stdout, STACK4, STACK6),
                         "the two runs differ; under the preload it said:\n" + ours.stderr)

    def test_socket_semantics_agree_with_the_kernel(self):
        self.assert_semantics_agree()

    def test_socket_semantics_agree_with_the_kernel_when_busy_polling(self):
        # Waits spin for 300 ms, so that the semantics program's signals (150 ms into a wait)
        # come while it spins, where a receive restarts after a handler with SA_RESTART, as
        # Linux's does; every other wait ends on its datagram or its timeout.
        self.assert_semantics_agree(QUADSOCK_BUSY_POLL="300000")

    def test_a_blocked_receive_costs_no_cpu(self):
        """A program blocked in recvfrom on a quadsock socket sleeps: over 2 s its whole process
        (the library's threads and gRPC's included) uses almost no CPU time, however busy the
        machine is."""
        program = textwrap.dedent("""
            import socket, sys, time
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((sys.argv[1], 4300))
            s.settimeout(2)
            before = time.process_time()
            try:
                s.recvfrom(2048)
                print("received")
            except socket.timeout:
                print("cpu", time.process_time() - before)
        """)
        out = self.run_preload([PYTHON, "-c", program, STACK4], timeout=60, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        words = out.stdout.split()
        self.assertEqual(words[0], "cpu", out.stdout)
        self.assertLess(float(words[1]), 0.1, "CPU seconds while blocked for 2 s")

    def test_without_quadsockd_one_line_and_the_kernel(self):
        """quadsockd out of reach: one line on stderr and the program runs on the kernel (its
        socket binds the kernel's address); with QUADSOCK_REQUIRE=1 the program exits."""
        program = textwrap.dedent("""
            import socket, sys
            for _ in range(3):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((sys.argv[1], 0))
            print("bound")
        """)
        argv = [QUADSOCK_RUN, PYTHON, "-c", program, KERNEL4]
        out = subprocess.run(argv, env=self.env(QUADSOCK_TARGET="unix:/nonexistent",
                                                 QUADSOCK_REQUIRE="0"),
                             capture_output=True, text=True, timeout=60)
        self.assertEqual((out.returncode, out.stdout), (0, "bound\n"), out.stderr)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
        self.assertIn("cannot use quadsockd at unix:/nonexistent", out.stderr)
        self.assertIn("stay the kernel's", out.stderr)
        out = subprocess.run(argv, env=self.env(QUADSOCK_TARGET="unix:/nonexistent"),
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertEqual(out.stdout, "")
        self.assertIn("QUADSOCK_REQUIRE=1: exiting", out.stderr)

    def test_options_quadsock_cannot_honour(self):
        """Joining a multicast group or binding to a device is refused (ENOPROTOOPT) and said
        once; an option that only tunes what the kernel would do (IP_TOS) is taken and said
        once to have no effect."""
        program = textwrap.dedent("""
            import errno, socket, struct, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((sys.argv[1], 4400))
            group = struct.pack("4s4s", socket.inet_aton("239.1.2.3"), socket.inet_aton("0.0.0.0"))
            for _ in range(2):
                try:
                    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group)
                    print("joined")
                except OSError as e:
                    print(errno.errorcode[e.errno])
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)
            print("tos", s.getsockopt(socket.IPPROTO_IP, socket.IP_TOS))
        """)
        out = self.run_preload([PYTHON, "-c", program, STACK4], timeout=60, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split("\n")[:3], ["ENOPROTOOPT", "ENOPROTOOPT", "tos 16"])
        self.assertEqual(out.stderr.count("not supported on a quadsock socket"), 1, out.stderr)
        self.assertEqual(out.stderr.count("has no effect on a quadsock socket"), 1, out.stderr)

    # --- socat, both roles.

    def test_socat_server_and_client(self):
        server = self.preload(["socat", "UDP4-LISTEN:4000,bind=%s" % STACK4, "PIPE"])
        peer = self.peer_udp()
        data, source = self.ask(peer, b"echo me", (STACK4, 4000))
        self.assertEqual((data, source), (b"echo me", (STACK4, 4000)))
        server.kill()

        echo = self.peer_udp()
        port = echo.getsockname()[1]
        replies = []

        def answer():
            data, source = echo.recvfrom(2048)
            replies.append(source[0])
            echo.sendto(b"answer to " + data, source)
        import threading
        t = threading.Thread(target=answer)
        t.start()
        out = self.run_preload(["socat", "-t", "3", "-", "UDP4:%s:%d" % (PEER4, port)],
                               input=b"question", timeout=20)
        t.join()
        self.assertEqual(out.stdout, b"answer to question", out.stderr)
        self.assertEqual(replies, [STACK4], "the question came from quadsock's address")

    def test_socat_over_ipv6(self):
        self.preload(["socat", "UDP6-LISTEN:4006,bind=[%s]" % STACK6, "PIPE"])
        peer = self.peer_udp(socket.AF_INET6, PEER6)
        data, source = self.ask(peer, b"six", (STACK6, 4006))
        self.assertEqual((data, source[:2]), (b"six", (STACK6, 4006)))

    # --- Python: the socket module and an asyncio datagram endpoint.

    def test_python_socket_and_asyncio(self):
        program = textwrap.dedent("""
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((sys.argv[1], 4100))
            s.settimeout(30)
            for _ in range(3):
                data, peer = s.recvfrom(2048)
                s.sendto(data.upper(), peer)
        """)
        self.preload([PYTHON, "-c", program, STACK4])
        peer = self.peer_udp()
        for word in (b"one", b"two", b"three"):
            data, source = self.ask(peer, word, (STACK4, 4100))
            self.assertEqual((data, source), (word.upper(), (STACK4, 4100)))

        server = textwrap.dedent("""
            import asyncio, sys
            class Echo(asyncio.DatagramProtocol):
                def connection_made(self, transport):
                    self.transport = transport
                def datagram_received(self, data, addr):
                    self.transport.sendto(b"async " + data, addr)
            async def main():
                loop = asyncio.get_running_loop()
                await loop.create_datagram_endpoint(Echo, local_addr=(sys.argv[1], 4200))
                await asyncio.sleep(60)
            asyncio.run(main())
        """)
        self.preload([PYTHON, "-c", server, STACK4])
        data, source = self.ask(peer, b"hi", (STACK4, 4200))
        self.assertEqual((data, source), (b"async hi", (STACK4, 4200)))

    # --- iperf3: its control connection is TCP on the kernel, its data UDP on quadsock.

    def kernel_route_to_peer(self):
        """The kernel reaches the peer's quadsock-side address over qk0 (TCP control)."""
        netns.sh("ip route add %s/32 dev qk0 src %s" % (PEER4, KERNEL4))

    def iperf3(self, *extra):
        self.kernel_route_to_peer()
        server = self.peer_background(["iperf3", "-s", "-1", "-B", PEER4])
        out = None
        for _ in range(20):  # the server may still be starting
            out = self.run_preload(["iperf3", "-c", PEER4, "-u", "-b", "5M", "-t", "2", "-J",
                                    "--connect-timeout", "3000"] + list(extra), timeout=60,
                                   text=True)
            if "unable to connect" not in out.stdout:
                break
            time.sleep(0.2)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        result = json.loads(out.stdout)
        server.wait(timeout=20)
        return result

    def test_iperf3_udp_on_quadsock_control_on_the_kernel(self):
        end = self.iperf3()["end"]["sum"]
        self.assertGreater(end["packets"], 100, end)
        self.assertLess(end["lost_percent"], 50, end)

    def test_iperf3_reverse(self):
        end = self.iperf3("-R")["end"]["sum"]
        self.assertGreater(end["packets"], 100, end)
        self.assertLess(end["lost_percent"], 50, end)

    # --- sockperf: the server with each multiplexer, and the ping-pong client.

    def sockperf_pp(self, run, address, port):
        """A second of ping-pong against a server that may still be starting: asked again (up
        to 20 times) while no answer came back."""
        for _ in range(20):
            out = run(["sockperf", "ping-pong", "-i", address, "-p", str(port), "-t", "1",
                       "--msg-size", "64"])
            text = out.stdout.decode() + out.stderr.decode()
            if "No messages were received" not in text:
                break
            time.sleep(0.2)
        self.assertEqual(out.returncode, 0, text)
        received = [line for line in text.splitlines() if "ReceivedMessages=" in line]
        self.assertTrue(received, text)
        count = int(received[0].split("ReceivedMessages=")[1].split()[0].rstrip(";"))
        self.assertGreater(count, 10, text)

    def test_sockperf_server_with_each_multiplexer(self):
        # recvfrom blocks on one socket; select, poll and epoll watch two (a feed file), and
        # the client talks to the second.
        for i, mux in enumerate((None, "select", "poll", "epoll")):
            port = 11110 + 2 * i
            if mux is None:
                argv = ["sockperf", "server", "-i", STACK4, "-p", str(port + 1)]
            else:
                feed = os.path.join(self.tmp, "feed-" + mux)
                with open(feed, "w") as f:
                    f.write("U:%s:%d\nU:%s:%d\n" % (STACK4, port, STACK4, port + 1))
                argv = ["sockperf", "server", "-f", feed, "-F", mux]
            server = self.preload(argv)
            self.sockperf_pp(lambda argv: self.peer(argv, timeout=60), STACK4, port + 1)
            server.kill()
            server.wait()

    def test_sockperf_client_against_a_kernel_server(self):
        self.peer_background(["sockperf", "server", "-i", PEER4, "-p", "11120"])
        self.sockperf_pp(lambda argv: self.run_preload(argv, timeout=60), PEER4, 11120)

    # --- Knot DNS: knotd on quadsock, queried by kdig and loaded by dnsperf; kdig on quadsock.

    ZONE = textwrap.dedent("""\
        $ORIGIN example.test.
        $TTL 3600
        @    SOA ns.example.test. admin.example.test. 1 3600 900 604800 300
        @    NS  ns
        ns   A   192.0.2.53
        www  A   192.0.2.80
        """)

    def knot_config(self, listen):
        d = tempfile.mkdtemp(prefix="knot-", dir=self.tmp)
        with open(os.path.join(d, "example.test.zone"), "w") as f:
            f.write(self.ZONE)
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(textwrap.dedent("""\
                server:
                    listen: %s
                    rundir: %s
                database:
                    storage: %s
                log:
                  - target: stderr
                    any: info
                zone:
                  - domain: example.test
                    file: %s/example.test.zone
                """ % (listen, d, d, d)))
        return conf

    def kdig(self, prefix, server):
        """kdig's answer (its output), `prefix` the command it runs under. With AddressSanitizer's
        runtime preloaded (the sanitizer builds), kdig hangs at exit in p11-kit's destructor, with
        or without this library: what counts is the answer, so a kdig still running 5 s after it
        started is stopped and its output read."""
        for _ in range(50):
            p = subprocess.Popen(prefix + ["kdig", "@" + server, "-p", "5353", "www.example.test",
                                           "A", "+short", "+timeout=1", "+retry=0"],
                                 env=self.env() if prefix == [QUADSOCK_RUN] else None,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                out, err = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            if out.decode().strip():
                return out.decode().strip()
            time.sleep(0.1)
        self.fail("no answer from %s: %s" % (server, out.decode() + err.decode()))

    def test_knotd_answers_kdig_and_dnsperf(self):
        knotd = self.preload(["knotd", "-c", self.knot_config("%s@5353" % STACK4)])
        self.assertEqual(self.kdig(["ip", "netns", "exec", self.net.ns], STACK4), "192.0.2.80")
        queries = os.path.join(self.tmp, "queries")
        with open(queries, "w") as f:
            f.write("www.example.test A\nns.example.test A\nexample.test SOA\n")
        out = self.peer(["dnsperf", "-s", STACK4, "-p", "5353", "-d", queries, "-l", "2",
                         "-Q", "2000"], timeout=60)
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text + out.stderr.decode())
        completed = [l for l in text.splitlines() if "Queries completed:" in l]
        self.assertTrue(completed, text)
        self.assertGreater(int(completed[0].split()[2]), 1000, text)
        self.assertIn("NOERROR", text)
        knotd.send_signal(signal.SIGTERM)
        knotd.wait(timeout=20)

    def test_kdig_on_quadsock_against_a_kernel_server(self):
        self.peer_background(["knotd", "-c", self.knot_config("%s@5353" % PEER4)])
        self.assertEqual(self.kdig([QUADSOCK_RUN], PEER4), "192.0.2.80")

    # --- memcached's UDP port (its worker threads share the socket by dup).

    def test_memcached_udp(self):
        self.preload(["memcached", "-U", "11211", "-p", "0", "-l", STACK4, "-u", "root",
                      "-t", "2"])
        peer = self.peer_udp()

        def frame(request_id, text):
            return bytes([request_id >> 8, request_id & 255, 0, 0, 0, 1, 0, 0]) + text
        data, _ = self.ask(peer, frame(1, b"set k 0 0 5\r\nhello\r\n"), (STACK4, 11211))
        self.assertEqual(data[8:], b"STORED\r\n")
        data, _ = self.ask(peer, frame(2, b"get k\r\n"), (STACK4, 11211))
        self.assertEqual(data[:2], b"\x00\x02")
        self.assertEqual(data[8:], b"VALUE k 0 5\r\nhello\r\nEND\r\n")

    # --- Programs that fork: socat's fork option, nsd's server processes.

    def test_socat_forks_a_child_per_datagram(self):
        self.preload(["socat", "UDP4-RECVFROM:4001,bind=%s,fork" % STACK4, "EXEC:/bin/cat"])
        peer = self.peer_udp()
        for word in (b"first", b"second", b"third"):
            data, source = self.ask(peer, word, (STACK4, 4001), answer=word)
            self.assertEqual((data, source), (word, (STACK4, 4001)))

    def test_a_forked_childs_new_sockets_are_the_kernels(self):
        """A child made by fork uses the sockets it inherited on quadsock, and opens new ones on
        the kernel, saying so once: here a bind to quadsock's address fails as the kernel's
        (EADDRNOTAVAIL) and one to the kernel's address works."""
        program = textwrap.dedent("""
            import errno, os, socket, sys
            a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            a.bind((sys.argv[1], 4500))
            pid = os.fork()
            if pid == 0:
                b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    b.bind((sys.argv[1], 4501))
                    print("bound on quadsock")
                except OSError as e:
                    print(errno.errorcode[e.errno])
                c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                c.bind((sys.argv[2], 4502))
                print("kernel", c.getsockname()[0])
                sys.stdout.flush()
                os._exit(0)
            os.waitpid(pid, 0)
        """)
        out = self.run_preload([PYTHON, "-c", program, STACK4, KERNEL4], timeout=60, text=True)
        self.assertEqual(out.stdout.split("\n")[:2], ["EADDRNOTAVAIL", "kernel " + KERNEL4],
                         out.stderr)
        self.assertEqual(out.stderr.count("opens sockets on the kernel only"), 1, out.stderr)

    def test_nsd_forks_its_servers_after_binding(self):
        d = tempfile.mkdtemp(prefix="nsd-", dir=self.tmp)
        os.chmod(self.tmp, 0o755)
        os.chmod(d, 0o755)
        with open(os.path.join(d, "example.test.zone"), "w") as f:
            f.write(self.ZONE)
        conf = os.path.join(d, "nsd.conf")
        with open(conf, "w") as f:
            f.write(textwrap.dedent("""\
                server:
                    ip-address: %s
                    port: 5354
                    server-count: 2
                    ip-freebind: yes  # its TCP socket, on the kernel, binds to quadsock's address
                    do-ip6: no
                    chroot: ""
                    zonesdir: "%s"
                    pidfile: "%s/nsd.pid"
                    database: ""
                    xfrdfile: "%s/xfrd.state"
                    zonelistfile: "%s/zone.list"
                    logfile: "%s/nsd.log"
                    verbosity: 2
                remote-control:
                    control-enable: no
                zone:
                    name: example.test
                    zonefile: example.test.zone
                """ % (STACK4, d, d, d, d, d)))
        nsd = self.preload(["nsd", "-d", "-c", conf])
        answers = set()
        for _ in range(50):
            out = self.peer(["kdig", "@" + STACK4, "-p", "5354", "www.example.test", "A",
                             "+short", "+timeout=1", "+retry=0"])
            answers.add(out.stdout.decode().strip())
            if "192.0.2.80" in answers and len(answers) == 1:
                break
            time.sleep(0.1)
        log = open(os.path.join(d, "nsd.log")).read() if os.path.exists(
            os.path.join(d, "nsd.log")) else ""
        self.assertEqual(answers - {""}, {"192.0.2.80"}, log)
        # Several queries: the forked servers answer them all.
        for i in range(10):
            out = self.peer(["kdig", "@" + STACK4, "-p", "5354", "ns.example.test", "A",
                             "+short", "+timeout=2", "+retry=1"])
            self.assertEqual(out.stdout.decode().strip(), "192.0.2.53", log)
        self.assertIsNone(nsd.poll(), nsd.stderr.read().decode() if nsd.poll() else "")


if __name__ == "__main__":
    e2e.QUADSOCKD = os.path.abspath(sys.argv.pop(1))
    QUADSOCK_RUN = os.path.abspath(sys.argv.pop(1))
    LIBRARY = os.path.abspath(sys.argv.pop(1))
    SEMANTICS = os.path.abspath(sys.argv.pop(1))
    for line in subprocess.run(["ldd", LIBRARY], capture_output=True, text=True).stdout.split("\n"):
        if "libasan" in line:
            SANITIZED = line.split("=>")[1].split()[0]
    unittest.main(verbosity=2)
