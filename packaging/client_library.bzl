"""The C++ client library as one static archive and its headers, for use outside Bazel.

    client_library(
        name = "libquadsock",
        deps = ["//clients/cpp:client"],
    )

gives libquadsock.a (the object files of the deps and of every library of this workspace they
depend on; system libraries, which come from Debian through pkg-config, are left to the
linker) and libquadsock_headers.tsv: one line per header those libraries need, "PATH<TAB>NAME",
PATH where Bazel has it (execroot-relative) and NAME the path a source includes it by.
"""

def _include_name(header, include_dirs):
    """The path a source includes `header` by: relative to an `includes` folder when it is
    under one (generated protobuf headers), else the workspace-relative path."""
    for d in include_dirs:
        if header.path.startswith(d + "/"):
            return header.path[len(d) + 1:]
    return header.short_path

def _client_library_impl(ctx):
    objects = []
    headers = []
    include_dirs = []
    for dep in ctx.attr.deps:
        cc = dep[CcInfo]
        for linker_input in cc.linking_context.linker_inputs.to_list():
            if linker_input.owner.workspace_name != "":
                continue
            for library in linker_input.libraries:
                objects += library.pic_objects or library.objects
        headers += [h for h in cc.compilation_context.headers.to_list()
                    if not h.short_path.startswith("../")]
        include_dirs += [d for d in cc.compilation_context.includes.to_list() +
                                    cc.compilation_context.system_includes.to_list() if d != "."]
    if not objects:
        fail("no object files in %s" % ctx.attr.deps)

    archive = ctx.actions.declare_file(ctx.label.name + ".a")
    args = ctx.actions.args()
    args.add("qcs")
    args.add(archive)
    args.add_all(objects)
    ctx.actions.run(
        executable = "ar",
        arguments = [args],
        inputs = objects,
        outputs = [archive],
        mnemonic = "ClientArchive",
        progress_message = "Archiving %s" % archive.short_path,
    )

    manifest = ctx.actions.declare_file(ctx.label.name + "_headers.tsv")
    lines = sorted({"%s\t%s" % (h.path, _include_name(h, include_dirs)): None
                    for h in headers}.keys())
    ctx.actions.write(manifest, "\n".join(lines) + "\n")
    return [DefaultInfo(files = depset([archive, manifest] + headers))]

client_library = rule(
    implementation = _client_library_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo], mandatory = True)},
)
