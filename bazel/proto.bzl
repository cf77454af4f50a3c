"""Generates C++ message and gRPC code from .proto files with the system protoc and
grpc_cpp_plugin (Debian's protobuf-compiler and protobuf-compiler-grpc).

    cc_grpc_library(
        name = "socket_cc_grpc",
        srcs = ["quadsock/v1/socket.proto"],
        deps = [":common_cc_grpc"],
    )

Files are relative to the package, which is the import root: `import "quadsock/v1/common.proto"`
and `#include "quadsock/v1/socket.grpc.pb.h"` both work.
"""

def cc_grpc_library(name, srcs, deps = [], visibility = None):
    package = native.package_name()
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc", base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    dep_protos = [d + "_protos" for d in deps]
    native.filegroup(name = name + "_protos", srcs = srcs + dep_protos, visibility = visibility)
    native.genrule(
        name = name + "_generate",
        srcs = srcs + dep_protos,
        outs = outs,
        cmd = ("protoc --proto_path={package} --cpp_out=$(GENDIR)/{package} " +
               "--grpc_out=$(GENDIR)/{package} " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin {files}").format(
            package = package,
            files = " ".join(["%s/%s" % (package, s) for s in srcs]),
        ),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["@system//:protobuf", "@system//:grpc++"],
        visibility = visibility,
    )
