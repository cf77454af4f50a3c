#!/usr/bin/python3
"""Prints the container runtime's default seccomp profile with bpf(2) allowed to a container
that has CAP_BPF. Debian 12's profile (containers-common) allows bpf only with CAP_SYS_ADMIN,
which quadsockd should not need; so this takes `bpf` out of the rules that decide it by
CAP_SYS_ADMIN and allows it with CAP_BPF instead. Everything else is the host's default.

    docker/seccomp_with_bpf.py /usr/share/containers/seccomp.json > /tmp/quadsockd-seccomp.json
    podman run --security-opt seccomp=/tmp/quadsockd-seccomp.json ...
"""
import json
import sys


def main(path):
    with open(path) as f:
        profile = json.load(f)
    rules = []
    for rule in profile["syscalls"]:
        decided_by_sys_admin = "CAP_SYS_ADMIN" in (rule.get("includes", {}).get("caps", []) +
                                                  rule.get("excludes", {}).get("caps", []))
        if decided_by_sys_admin and "bpf" in rule["names"]:
            rule = dict(rule, names=[n for n in rule["names"] if n != "bpf"])
            if not rule["names"]:
                continue
        rules.append(rule)
    rules.append({"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_BPF"]}})
    profile["syscalls"] = rules
    json.dump(profile, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: seccomp_with_bpf.py DEFAULT_PROFILE.json")
    main(sys.argv[1])
