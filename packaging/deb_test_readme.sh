#!/bin/bash
# packaging/deb_test_readme.sh: deb_test.sh's last step, in the booted container after
# deb_test_run.sh purged the package: README.md's install block ("Installing"), extracted from
# the README by deb_test.sh into /deb/readme_install.sh, run as written, so that it cannot
# drift. Stand-ins only for what a container lacks: packaging/build_deb.sh hands over the .deb
# deb_test.sh built, `sudo` runs its command (root already), and eth0 is made if missing. Then
# quadsock@eth0 must answer on the README's socket, and stop cleanly.
. "$(dirname "$0")/deb_test_lib.sh"
work=$(mktemp -d)
mkdir -p "$work/packaging"
cat >"$work/packaging/build_deb.sh" <<'STUB'
#!/bin/bash
cp /deb/quadsock_*.deb .
STUB
chmod +x "$work/packaging/build_deb.sh"
if ! command -v sudo >/dev/null; then
  printf '#!/bin/bash\nexec "$@"\n' >/usr/local/bin/sudo
  chmod +x /usr/local/bin/sudo
fi
if ! ip link show eth0 >/dev/null 2>&1; then
  ip link add eth0 type veth peer name eth0p
  ip link set eth0 up
  ip link set eth0p up
fi
cd "$work"
USER=root bash /deb/readme_install.sh || fail "README.md's install block (its output is above)"
for _ in $(seq 100); do
  quadctl --target=unix:/run/quadsock/quadsock.sock health >/dev/null 2>&1 && break
  sleep 0.2
done
quadctl --target=unix:/run/quadsock/quadsock.sock health ||
  { journalctl -u quadsock@eth0 --no-pager | tail -n 30; fail "quadsock@eth0 does not answer"; }
id -nG root | grep -qw quadsock || fail "the block's adduser did not put root in group quadsock"
timeout 60 systemctl stop quadsock@eth0 || fail "systemctl stop quadsock@eth0"
result=$(systemctl show -p Result --value quadsock@eth0)
[[ "$result" == success ]] || fail "quadsock@eth0 stopped with $result"
log "README.md's install block ran as written: quadsock@eth0 answered and stopped cleanly"
