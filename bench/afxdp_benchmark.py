"""The AF_XDP benchmark: quadsock's in-process discard consumer (a counting receive
callback, polled with Stack::PollOnce on CPU 0) with 1 unconnected socket and with 500
connected sockets, next to the AF_XDP rxdrop ceiling (a bare AF_XDP socket behind the same
steering program that only recycles frames), all on one veth in copy mode in the same run,
with the project's XDP generator on CPU 1. Target: quadsock >= 80% of the ceiling. Measured as
capacities (the highest offered rate delivered at >= 95%; `--full-load` for the unpaced
medians).

    bazel run -c opt //bench:afxdp_benchmark                 # as root
    bazel run -c opt //bench:afxdp_benchmark -- --smoke --out=/tmp/afxdp.json

It is bench/netbench.py with three of bench/seed_table's cases; see there for the setup.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbench  # noqa: E402

CASES = ["ceiling_afxdp", "quadsock_unconnected", "quadsock_conn500"]


def main(argv):
    # Under `bazel run` the tools are runfiles next to this script.
    here = os.path.dirname(os.path.abspath(__file__))
    if not any(a.startswith("--bin-dir") for a in argv):
        argv = [f"--bin-dir={here}"] + argv
    if not any(a.startswith("--command") for a in argv):
        argv = argv + ["--command=bazel run -c opt //bench:afxdp_benchmark"]
    return netbench.main(argv + ["--no-sweep"], default_cases=CASES,
                         title="afxdp benchmark")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
