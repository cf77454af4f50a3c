#!/bin/bash
# Runs service_benchmark (its first argument, with the rest) briefly and fails with it: it exits
# non-zero when a call fails to set up or a stream case carries no datagram.
set -euo pipefail
"$@"
