"""A live flow's rate during a flood of neighbour solicitations: quadsockd on a veth
pair, tests/wire_flood on the peer's side sending a numbered UDP flow to a socket of the stack
at a fixed rate, alone and then beside 200,000 solicitations a second from random sources of the
/64 (each a new neighbour with a MAC of its own), in one run. For each round: the flow's
datagrams that reached the socket (received or dropped on its full queue: the stack demuxed
them) against those sent, the frames that reached the stack, and the flood's rate as sent. The
figure of merit is the flow's share delivered with the flood against without it.

    sudo bazel run -c opt //bench:ns_flood_bench -- [--flow=100000] [--flood=200000] \\
        [--seconds=3] [--quadsockd=PATH] [--out=bench/results/ns_flood_DATE_COMMIT.json]

(--quadsockd: another build's binary, e.g. an older commit's, to compare.)
"""

import argparse
import json
import os
import subprocess
import sys
import time

import netns
import quadsock

STACK6, PEER6 = "fd00:9::2", "fd00:9::1"
PORT = 7000


def runfile(path):
    """`path` (under the workspace's root) in this binary's runfiles."""
    here = os.path.dirname(os.path.abspath(__file__))  # <runfiles>/quadsock/bench
    return os.path.join(os.path.dirname(here), path)


def mac_of(dev):
    with open("/sys/class/net/%s/address" % dev) as f:
        return f.read().strip()


class Daemon:
    def __init__(self, binary):
        pid = os.getpid()
        self.target = "unix:/tmp/qs-nsflood-%d.sock" % pid
        self.admin_target = "unix:/tmp/qs-nsflood-%d-admin.sock" % pid
        self.log = open("/tmp/qs-nsflood-%d.log" % pid, "w+")
        self.proc = subprocess.Popen(
            [binary, "--interface=qb0", "--address=%s/64" % STACK6, "--listen=" + self.target,
             "--admin_listen=" + self.admin_target, "--metrics_listen=",
             "--receive_queue_depth=65536"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("quadsockd exited:\n" + self.output())
            try:
                with quadsock.Client(self.target, hold=False) as c:
                    if c.health() == "SERVING":
                        return
            except quadsock.QuadsockError:
                pass
            time.sleep(0.1)
        raise SystemExit("quadsockd did not serve:\n" + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def frames_in(admin):
    return sum(q.counters.rx_frames for q in admin.counters().queues)


def ring_drops(admin):
    return sum(q.counters.rx_dropped for q in admin.counters().queues)


def round_(net, flood_bin, admin, sock, flow, flood, seconds):
    frames0, drops0 = frames_in(admin), ring_drops(admin)
    c0 = sock.get().counters
    run = subprocess.run(
        ["ip", "netns", "exec", net.ns, flood_bin, "--interface=qb1", "--to_mac=" + mac_of("qb0"),
         "--target=" + STACK6, "--sources=fd00:9::/64", "--solicitations_per_second=%d" % flood,
         "--udp_from=" + PEER6, "--udp_port=%d" % PORT, "--datagrams_per_second=%d" % flow,
         "--seconds=%g" % seconds], capture_output=True, text=True, timeout=seconds + 60)
    if run.returncode != 0:
        raise SystemExit("wire_flood: " + run.stderr)
    sent = json.loads(run.stdout)
    last = -1
    while frames_in(admin) != last:  # until what was sent has arrived or been lost
        last = frames_in(admin)
        time.sleep(0.5)
    c1 = sock.get().counters
    reached = (c1.rx_datagrams - c0.rx_datagrams) + (c1.rx_dropped - c0.rx_dropped)
    return {
        "flood_per_second": round(sent["solicitations"] / sent["seconds"]),
        "flow_sent": sent["datagrams"],
        "flow_reached_socket": reached,
        "flow_share": round(reached / sent["datagrams"], 4) if sent["datagrams"] else None,
        "flow_per_second": round(reached / sent["seconds"]),
        "frames_sent": sent["datagrams"] + sent["solicitations"],
        "frames_reached_stack": last - frames0,
        "ring_drops": ring_drops(admin) - drops0,
        "neighbors": len(admin.neighbors()),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flow", type=int, default=100000, help="live datagrams a second")
    p.add_argument("--flood", type=int, default=200000, help="solicitations a second")
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument("--rounds", type=int, default=3, help="quiet and flooded rounds, in turn")
    p.add_argument("--quadsockd", default=runfile("service/quadsockd"))
    p.add_argument("--wire_flood", default=runfile("tests/wire_flood"))
    p.add_argument("--out", help="also write the figures here (JSON)")
    a = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (a network namespace, a veth pair, AF_XDP)")
    net = netns.PeerNetwork("qb0", "qb1")
    daemon = None
    try:
        net.peer_shell("ip addr add %s/64 dev qb1 nodad" % PEER6)
        daemon = Daemon(a.quadsockd)
        client = quadsock.Client(daemon.target, name="ns_flood_bench")
        admin = quadsock.Client(daemon.admin_target, session=False)
        sock = client.open("ipv6", receive_queue_depth=65536)
        sock.bind("[%s]:%d" % (STACK6, PORT))
        rounds = []
        for i in range(a.rounds):
            for flood in (0, a.flood):
                r = round_(net, a.wire_flood, admin, sock, a.flow, flood, a.seconds)
                r["round"] = i
                rounds.append(r)
                print(json.dumps(r), flush=True)
        quiet = [r["flow_share"] for r in rounds if r["flood_per_second"] == 0]
        flooded = [r["flow_share"] for r in rounds if r["flood_per_second"] > 0]
        summary = {"flow": a.flow, "flood": a.flood, "seconds": a.seconds,
                   "quiet_share_min": min(quiet), "flooded_share_min": min(flooded),
                   "flooded_over_quiet": round(min(flooded) / max(min(quiet), 1e-9), 4),
                   "learn_rate_limited": admin.counters().stack.neighbor_learn_rate_limited,
                   "rounds": rounds}
        print("flow %d/s: share delivered quiet %.4f, flooded (%d/s asked) %.4f: ratio %.3f"
              % (a.flow, summary["quiet_share_min"], a.flood, summary["flooded_share_min"],
                 summary["flooded_over_quiet"]))
        if a.out:
            with open(a.out, "w") as f:
                json.dump(summary, f, indent=1)
        client.close()
        admin.close()
    finally:
        if daemon is not None:
            daemon.close()
        net.close()


if __name__ == "__main__":
    main()
