"""Wraps Debian's system libraries as cc_library targets, with flags from pkg-config.

    system_libraries(
        name = "system",
        libraries = {"grpc++": "grpc++", "xdp": "libxdp"},
    )

gives @system//:grpc++ and @system//:xdp. Headers live in /usr/include, which the compiler
already searches; the targets carry the link flags (and any -I/-D flags pkg-config reports).
A missing module fails the fetch with the apt package to install, never a download.
"""

def _pkg_config(ctx, flag, modules):
    result = ctx.execute(["pkg-config", flag] + modules.split(" "))
    if result.return_code != 0:
        fail(("pkg-config cannot find %s: %s\nInstall the Debian -dev packages " +
              "(see scripts/setup.sh) and build again.") % (modules, result.stderr))
    return [f for f in result.stdout.strip().split(" ") if f]

def _system_libraries_impl(ctx):
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, modules in ctx.attr.libraries.items():
        cflags = _pkg_config(ctx, "--cflags", modules)
        libs = _pkg_config(ctx, "--libs", modules)
        build.append("cc_library(name = %r, copts = %r, linkopts = %r)" % (name, cflags, libs))
    for name, flags in ctx.attr.extra.items():
        build.append("cc_library(name = %r, linkopts = %r)" % (name, flags.split(" ")))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD", "\n".join(build) + "\n")

system_libraries = repository_rule(
    implementation = _system_libraries_impl,
    attrs = {
        "libraries": attr.string_dict(mandatory = True),
        "extra": attr.string_dict(),
    },
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)
