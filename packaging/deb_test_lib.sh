# packaging/deb_test_lib.sh: what deb_test_install.sh and deb_test_run.sh share (sourced).
set -euo pipefail
log() { echo "[deb_test inside] $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
trap 'log "FAILED: line $LINENO: $BASH_COMMAND"' ERR
export DEBIAN_FRONTEND=noninteractive
[[ -f /.dockerenv || -f /run/.containerenv ]] || fail "run this inside deb_test.sh's container"
test=/opt/deb-test  # the example and the venv; not /tmp: the systemd container mounts a new one
