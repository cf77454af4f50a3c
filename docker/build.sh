#!/bin/bash
# docker/build.sh: builds quadsockd's container image, localhost/quadsockd:latest, with podman
# (root, from the repository root). Makes the base image localhost/quadsock-base:bookworm first
# if it is missing: debootstrap of Debian 12 (minbase) with quadsockd's runtime libraries, from
# the host's Debian mirror, imported with `podman import`. Then the binaries, built with
# `bazel build -c opt`, go on top (docker/Containerfile).
#
#   sudo docker/build.sh            # the image
#   sudo docker/build.sh --rebase   # also remake the base
#   sudo docker/build.sh --base     # only the base, if it is missing (packaging/deb_test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "" | --rebase | --base) ;;
  -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) echo "docker/build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
export CONTAINERS_CONF="$PWD/docker/containers.conf"

BASE=localhost/quadsock-base:bookworm
IMAGE=localhost/quadsockd:latest
# Runtime libraries of quadsockd and quadctl (`ldd` of both, mapped to Debian packages).
LIBS=libabsl20220623,libbpf1,libc-ares2,libelf1,libgrpc++1.51,libgrpc29,libprotobuf32,libre2-9,libssl3,libstdc++6,liburcu8,libxdp1,zlib1g
MIRROR=${QUADSOCK_DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { echo "[docker/build] $*" >&2; }

for tool in podman debootstrap bazel; do
  command -v "$tool" >/dev/null || { log "needs $tool (scripts/setup.sh installs it)"; exit 1; }
done

if [[ "${1:-}" == "--rebase" ]] || ! podman image exists "$BASE"; then
  root=$(mktemp -d /var/tmp/quadsock-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  log "debootstrap bookworm (minbase + runtime libraries) from $MIRROR"
  debootstrap --variant=minbase --include="$LIBS" bookworm "$root" "$MIRROR" >/dev/null
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  mkdir -p "$root/run/quadsock"  # the control socket's directory
  log "importing it as $BASE"
  tar -C "$root" -c . | podman import - "$BASE" >/dev/null
  rm -rf "$root"
  trap - EXIT
fi
[[ "${1:-}" != --base ]] || exit 0

log "building quadsockd, quadctl and the preload library"
bazel build -c opt //service:quadsockd //clients/quadctl:quadctl \
  //clients/preload:libquadsock_preload.so
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$bin/service/quadsockd" "$bin/clients/quadctl/quadctl" docker/Containerfile "$context/"
cp "$bin/clients/preload/libquadsock_preload.so" "$context/"
cp clients/preload/quadsock-run.sh "$context/quadsock-run"
podman build --quiet --network=none -f "$context/Containerfile" -t "$IMAGE" "$context" >/dev/null
log "built $IMAGE"
