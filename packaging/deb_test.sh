#!/bin/bash
# packaging/deb_test.sh: the .deb on a fresh Debian 12 (root, from the repository root; part of
# scripts/test.sh). Builds it (build_deb.sh) and checks its contents and control fields here.
# Then, in a new container from the local Debian 12 base (docker/build.sh --base),
# deb_test_install.sh installs it with apt and checks what a user does next: the programs,
# `import quadsock`, the unit (systemd-analyze verify), pip install into a venv, and the C++
# example built with make against the installed library. That container, committed and booted
# with systemd, runs deb_test_run.sh: `systemctl start quadsock@qsd0` on a veth pair inside it,
# used by quadctl, the example and Python; then deb_test_readme.sh runs README.md's install
# block, extracted from the README, as written. Nothing is installed on this machine; the containers
# and the image are removed. Needs the Debian archive from the container (apt). Each container
# step fails after 15 minutes.
#
#   sudo packaging/deb_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) echo "deb_test.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
export CONTAINERS_CONF="$PWD/docker/containers.conf"
BASE=localhost/quadsock-base:bookworm
NAME=quadsock-deb-test-$$ BOOTED=quadsock-deb-test-systemd-$$
IMAGE=localhost/quadsock-deb-test:$$
log() { echo "[deb_test] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
trap 'log "FAILED: line $LINENO: $BASH_COMMAND"' ERR

work=$(mktemp -d /tmp/quadsock-deb-test.XXXXXX)
cleanup() {
  podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true
  podman rm -f -t 0 "$BOOTED" >/dev/null 2>&1 || true
  podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

deb=$(packaging/build_deb.sh -o "$work") || fail "build_deb.sh"
version=$(head -n 1 VERSION | tr -d '[:space:]')
[[ "$(basename "$deb")" == "quadsock_${version}_$(dpkg --print-architecture).deb" ]] ||
  fail "unexpected file name $deb"

# Contents: every file a user is told about, and nothing from a build tree.
contents=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for f in /usr/sbin/quadsockd /usr/bin/quadctl /lib/systemd/system/quadsock@.service \
  /etc/quadsock/example.flags "/usr/lib/$multiarch/libquadsock.a" \
  "/usr/lib/$multiarch/pkgconfig/quadsock.pc" /usr/include/quadsock/clients/cpp/client.h \
  /usr/include/quadsock/quadsock/v1/socket.grpc.pb.h /usr/include/quadsock/stack/channel/reader.h \
  /usr/lib/python3/dist-packages/quadsock/__init__.py \
  /usr/lib/python3/dist-packages/quadsock/v1/socket_pb2_grpc.py \
  /usr/lib/python3/dist-packages/quadsock/std/health_pb2.py \
  /usr/share/doc/quadsock/examples/udp_hello.cc /usr/share/doc/quadsock/examples/Makefile; do
  grep -qxF "$f" <<<"$contents" || fail "$f is not in the package"
done
if grep -E 'bazel-|_test|\.pyc$|/build/' <<<"$contents"; then fail "build leftovers in the package"; fi
[[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)" == /etc/quadsock/example.flags ]] ||
  fail "conffiles is not /etc/quadsock/example.flags"
depends=$(dpkg-deb -f "$deb" Depends)
depends_names=$(sed -e 's/ *([^)]*)//g' -e 's/, */\n/g' <<<"$depends")
# Each shared library the programs link (NEEDED) must come from a package named in Depends.
extract="$work/extract"
dpkg-deb -x "$deb" "$extract"
ldcache=$(ldconfig -p)
for lib in $(objdump -p "$extract/usr/sbin/quadsockd" "$extract/usr/bin/quadctl" |
  awk '/NEEDED/ {print $2}' | sort -u); do
  path=$(awk -v l="$lib" '$1 == l && /x86-64/ {print $NF}' <<<"$ldcache" | sed -n 1p)
  [[ -n "$path" ]] || fail "$lib (NEEDED) is not on this machine"
  pkg=$({ dpkg -S "$path" || dpkg -S "$(readlink -f "$path")"; } 2>/dev/null | sed -n '1s/:.*//p') ||
    fail "no package holds $path"
  grep -qxF "$pkg" <<<"$depends_names" || fail "$lib is in $pkg, which Depends lacks: $depends"
done
log "contents and Depends checked: $depends"

docker/build.sh --base
libs=$(sed -n 's/^LIBS=//p' docker/build.sh)
[[ -n "$libs" ]] || fail "no LIBS= line in docker/build.sh"
log "installing it in a new container from $BASE"
podman run -d --name "$NAME" --privileged --entrypoint sleep \
  -v "$work:/deb:ro" -v "$PWD:/src:ro" "$BASE" 1000 >/dev/null
timeout 900 podman exec -e BASE_LIBS="$libs" -e DEB="/deb/$(basename "$deb")" "$NAME" \
  /bin/bash /src/packaging/deb_test_install.sh || fail "installing (its output is above)"

# README.md's install block, extracted as tests/readme_examples.py reads the README (the one
# block whose marker names this script), for deb_test_readme.sh to run as written.
/usr/bin/python3 - "$work/readme_install.sh" <<'PY' || fail "no install block in README.md"
import sys
sys.path.insert(0, "tests")
import readme_examples
blocks = [b for b in readme_examples.parse(open("README.md").read())
          if b.not_run and "packaging/deb_test.sh" in b.not_run]
if len(blocks) != 1:
    sys.exit("README.md: %d blocks are marked as run by packaging/deb_test.sh, not one" % len(blocks))
open(sys.argv[1], "w").write(readme_examples.shell_script(blocks[0]))
PY

log "booting that container with systemd"
podman commit -q "$NAME" "$IMAGE" >/dev/null
podman rm -f -t 0 "$NAME" >/dev/null
podman run -d --name "$BOOTED" --privileged --systemd=always --entrypoint /lib/systemd/systemd \
  -v "$work:/deb:ro" -v "$PWD:/src:ro" "$IMAGE" >/dev/null
state=
for _ in $(seq 300); do
  state=$(podman exec "$BOOTED" systemctl is-system-running 2>/dev/null) || true
  [[ "$state" == running || "$state" == degraded ]] && break
  sleep 0.2
done
[[ "$state" == running || "$state" == degraded ]] || fail "systemd did not come up: '$state'"
timeout 900 podman exec "$BOOTED" /bin/bash /src/packaging/deb_test_run.sh ||
  fail "running quadsock@qsd0 (its output is above)"
timeout 900 podman exec "$BOOTED" /bin/bash /src/packaging/deb_test_readme.sh ||
  fail "README.md's install block (its output is above)"
log "passed"
