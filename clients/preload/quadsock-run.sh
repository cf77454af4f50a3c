#!/bin/sh
# quadsock-run: runs a program unchanged with its UDP sockets on quadsock.
#
#   quadsock-run [--] COMMAND [ARGS...]
#
# Preloads libquadsock_preload.so into COMMAND (and the programs it runs). A UDP socket that
# binds to one of quadsockd's addresses (or to the wildcard address, if quadsockd serves that
# family), or that connects or sends to a peer in quadsockd's networks, moves onto quadsock: its
# datagrams go through the session's data channel on shared memory instead of the kernel. TCP,
# Unix sockets, loopback and every other socket stay the kernel's. The program's poll, select
# and epoll work on quadsock sockets as on the kernel's, mixed in one set.
#
# Settings (environment):
#   QUADSOCK_TARGET     quadsockd's listener (default unix:/run/quadsock/quadsock.sock; the
#                       user needs to be in group quadsock, as for quadctl)
#   QUADSOCK_WILDCARD   quadsock | kernel: where a socket bound to 0.0.0.0 or :: goes
#                       (default quadsock, when quadsockd serves that family)
#   QUADSOCK_PORTS      the local ports to take, e.g. 53,5000-5100 (default: every port)
#   QUADSOCK_REQUIRE    1: exit when quadsockd cannot be reached; 0 (default): say so once on
#                       stderr and run on the kernel
#   QUADSOCK_BUSY_POLL  microseconds a wait for a quadsock socket (recv, poll, select,
#                       epoll_wait) spins, taking datagrams from quadsockd itself, before it
#                       sleeps (default 0: a blocked call sleeps and costs no CPU)
#   QUADSOCK_LOG        error | warn (default) | info | debug: what it says on stderr
#   QUADSOCK_PRELOAD_LIBRARY  the library (default: found beside this script, ../lib/quadsock)
#
# Example: a DNS server on quadsock, answering on quadsockd's address:
#   quadsock-run knotd -c /etc/knot/knot.conf
set -eu

usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; }

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
  --) shift ;;
  -*) echo "quadsock-run: unknown option $1 (see quadsock-run --help)" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "quadsock-run: no command to run (see quadsock-run --help)" >&2; exit 2; }

lib=${QUADSOCK_PRELOAD_LIBRARY:-}
if [ -z "$lib" ]; then
  here=$(dirname "$(readlink -f "$0")")
  for candidate in "$here/../lib/quadsock/libquadsock_preload.so" \
                   "$(dirname "$0")/libquadsock_preload.so"; do
    if [ -r "$candidate" ]; then lib=$candidate; break; fi
  done
fi
if [ -z "$lib" ] || [ ! -r "$lib" ]; then
  echo "quadsock-run: cannot find libquadsock_preload.so${lib:+ at $lib} (set QUADSOCK_PRELOAD_LIBRARY)" >&2
  exit 127
fi
# After any library already preloaded: those that must come first (a sanitizer's runtime, an
# allocator) stay first; ours still comes before the C library.
export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$lib"
exec "$@"
