"""docker/kubernetes/quadsockd.yaml against what it names: the image docker/build.sh makes and
what the image holds, the flags quadsockd takes, the capabilities docker/smoke.sh runs the
container with (and proves enough), and its own mounts. A manifest that names a flag the daemon
lost, a capability the smoke test does not grant, or a probe that talks to another socket than
the daemon listens on fails here, not on a cluster.

Usage (Bazel passes it): kubernetes_test.py QUADSOCKD
"""

import os
import re
import subprocess
import sys
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
QUADSOCKD = None


def read(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def shell_assignment(script, name):
    m = re.search(r"^\s*(?:[A-Z_]+=\S+\s+)*%s=(\S+)" % name, read(script), re.M)
    if m is None:
        raise AssertionError("%s does not set %s" % (script, name))
    return m.group(1).strip("\"'")


def flag_names(args):
    return [a[2:].split("=", 1)[0] for a in args if a.startswith("--")]


def flag_value(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith("--%s=" % name)]
    return values[-1] if values else None


def under(path, directory):
    return os.path.commonpath([path, directory]) == directory


class ManifestTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        docs = [d for d in yaml.safe_load_all(read("kubernetes/quadsockd.yaml")) if d]
        cls.kinds = {d["kind"]: d for d in docs}
        cls.pod = cls.kinds["DaemonSet"]["spec"]["template"]["spec"]
        (cls.container,) = cls.pod["containers"]
        cls.args = cls.container["args"]
        cls.mounts = {m["mountPath"]: m for m in cls.container["volumeMounts"]}
        help_text = subprocess.run([QUADSOCKD, "--helpfull"], capture_output=True,
                                   text=True).stdout
        cls.known_flags = set(re.findall(r"^\s+--([a-z_0-9]+) ", help_text, re.M))

    def test_the_daemon_set_is_in_its_namespace_and_selects_its_pods(self):
        ds = self.kinds["DaemonSet"]
        self.assertEqual(ds["metadata"]["namespace"], self.kinds["Namespace"]["metadata"]["name"])
        labels = ds["spec"]["template"]["metadata"]["labels"]
        for k, v in ds["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(labels.get(k), v)

    def test_the_memory_limit_holds_what_the_flags_let_quadsockd_take(self):
        def flag(name, default):
            value = flag_value(self.args, name)
            return int(value) if value is not None else default
        mib = 1 << 20
        most = (flag("max_receive_mib", 512) * mib +
                flag("max_all_channels_mib", 1024) * mib +
                flag("max_grpc_threads", 1024) * flag("max_message_bytes", 4 * mib) +
                64 * 4096 * 4096 +             # UMEM: 64 queues of 4096 4-KiB frames
                flag("reassembly_kib", 4096) * 1024 +
                128 * mib)                     # code, threads, the socket table
        limit = self.container["resources"]["limits"]["memory"]
        units = {"Mi": mib, "Gi": 1024 * mib}
        limit_bytes = int(limit[:-2]) * units[limit[-2:]]
        self.assertLessEqual(most, limit_bytes,
                             "the flags let quadsockd take %d MiB, the limit is %s"
                             % (most // mib, limit))

    def test_image_is_the_one_build_sh_makes(self):
        self.assertEqual(self.container["image"], shell_assignment("build.sh", "IMAGE"))
        self.assertEqual(self.container["imagePullPolicy"], "Never")  # built on the node

    def test_every_flag_is_one_quadsockd_takes(self):
        self.assertIn("interface", self.known_flags)  # the help text was read
        self.assertEqual(set(flag_names(self.args)) - self.known_flags, set())
        example = read("kubernetes/quadsockd.flags.example").split()
        self.assertEqual(set(flag_names(example)) - self.known_flags, set())
        self.assertTrue({"interface", "address"} <= set(flag_names(example)))

    def test_the_flagfile_is_on_a_read_only_mount(self):
        path = flag_value(self.args, "flagfile")
        self.assertIsNotNone(path)
        mount = [m for p, m in self.mounts.items() if under(path, p)]
        self.assertEqual(len(mount), 1, path)
        self.assertTrue(mount[0].get("readOnly"))

    def test_probes_ask_the_socket_the_daemon_listens_on(self):
        listen = flag_value(self.args, "listen")
        self.assertTrue(listen.startswith("unix:"), listen)
        self.assertIn(os.path.dirname(listen[len("unix:"):]), self.mounts)
        containerfile = read("Containerfile")
        for probe in ("startupProbe", "livenessProbe"):
            command = self.container[probe]["exec"]["command"]
            self.assertEqual(command[-1], "health")
            self.assertEqual(flag_value(command, "target"), listen)
            # The probe's binary is one the image installs.
            self.assertRegex(containerfile, r"COPY .*\b%s\b.* %s/" % (
                os.path.basename(command[0]), os.path.dirname(command[0])))

    def test_the_admin_socket_is_on_a_mount_of_its_own(self):
        # Client pods mount the control socket's folder; the administration socket must not be
        # in it, or a client container running as root could change the neighbour table.
        listen = flag_value(self.args, "listen")[len("unix:"):]
        admin = flag_value(self.args, "admin_listen")
        self.assertTrue(admin.startswith("unix:"), admin)
        admin_dir = os.path.dirname(admin[len("unix:"):])
        self.assertIn(admin_dir, self.mounts)
        self.assertNotEqual(admin_dir, os.path.dirname(listen))
        self.assertFalse(under(admin_dir, os.path.dirname(listen)))

    def test_privileges_are_what_the_smoke_test_grants(self):
        sc = self.container["securityContext"]
        caps = sc["capabilities"]
        self.assertEqual(caps["drop"], ["ALL"])
        self.assertEqual(sorted(caps["add"]),
                         sorted(shell_assignment("smoke.sh", "CAPS").split(",")))
        self.assertNotIn("SYS_ADMIN", caps["add"])
        self.assertNotIn("privileged", sc)
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertEqual(sc["seccompProfile"]["type"], "Localhost")
        # smoke.sh runs the image so too: read-only, no new privileges, the seccomp profile.
        smoke = read("smoke.sh")
        for option in ("--read-only", "no-new-privileges", "--cap-drop=all",
                       "seccomp=", "--flagfile=%s" % flag_value(self.args, "flagfile")):
            self.assertIn(option, smoke)

    def test_host_network_for_the_nic(self):
        self.assertIs(self.pod["hostNetwork"], True)
        self.assertEqual(self.pod["dnsPolicy"], "ClusterFirstWithHostNet")


if __name__ == "__main__":
    QUADSOCKD = sys.argv.pop(1)
    unittest.main()
