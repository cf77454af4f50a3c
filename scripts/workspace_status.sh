#!/bin/sh
# Bazel's --workspace_status_command (.bazelrc): the commit quadsockd reports in its
# quadsock_build_info metric. STABLE_ keys rebuild what reads them when they change, so the
# label is never stale. Never fails: outside a git checkout (a source tarball) it prints nothing,
# and the metric's commit label is empty.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || exit 0
echo "STABLE_QUADSOCK_COMMIT ${commit}"
