"""Builds the quadsock Python package (see pyproject.toml) with its generated gRPC modules.

The hand-written modules are in quadsock/; quadsock.v1 and quadsock.std are generated at build
time from the tree's proto/ folder with protoc and grpc_python_plugin, as clients/python's Bazel
genrule does, so the installed package is whole. The version is the tree's VERSION file.
"""

import pathlib
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

TREE = pathlib.Path(__file__).resolve().parent.parent.parent
PROTO_ROOT = TREE / "proto"


def _tool(name, package):
    path = shutil.which(name) or shutil.which(name, path="/usr/bin")
    if not path:
        raise SystemExit("quadsock: building the gRPC modules needs %s (Debian: apt install %s)"
                         % (name, package))
    return path


class BuildPyWithProtos(build_py):
    """build_py, then the quadsock.v1 and quadsock.std modules generated into the build."""

    def run(self):
        super().run()
        protos = sorted(p.relative_to(PROTO_ROOT).as_posix()
                        for p in PROTO_ROOT.glob("quadsock/*/*.proto"))
        if not protos:
            raise SystemExit("quadsock: no .proto files under %s: build from the quadsock tree"
                             % PROTO_ROOT)
        out = pathlib.Path(self.build_lib)
        subprocess.run(
            [_tool("protoc", "protobuf-compiler"), "--proto_path=%s" % PROTO_ROOT,
             "--python_out=%s" % out, "--grpc_python_out=%s" % out,
             "--plugin=protoc-gen-grpc_python=%s"
             % _tool("grpc_python_plugin", "protobuf-compiler-grpc")] + protos,
            check=True)
        for package in sorted({pathlib.PurePosixPath(p).parent for p in protos}):
            (out / package / "__init__.py").touch()


setup(
    version=(TREE / "VERSION").read_text().split()[0],
    cmdclass={"build_py": BuildPyWithProtos},
)
