"""End-to-end tests against a real quadsockd: one macro for their common shape.

    quadsockd_e2e_test(
        name = "fragments_e2e_test",        # tests/fragments_e2e_test.py
        size = "large",
        tools = ["//clients/python:echo_server"],
    )

is a py_test of NAME.py with quadsockd_e2e_test.py beside it (e2e.Daemon and the veth
helpers), quadsockd's path as its first argument and each of `tools`' after it, in order; root,
exclusive (it makes namespaces and veth pairs) and unsandboxed.
"""

def quadsockd_e2e_test(name, size = "medium", tools = []):
    srcs = [name + ".py"]
    if name != "quadsockd_e2e_test":
        srcs.append("quadsockd_e2e_test.py")
    native.py_test(
        name = name,
        size = size,
        srcs = srcs,
        args = ["$(location //service:quadsockd)"] + ["$(location %s)" % t for t in tools],
        data = ["//service:quadsockd"] + tools,
        main = name + ".py",
        python_version = "PY3",
        tags = [
            "exclusive",
            "no-sandbox",
            "root",
        ],
        deps = [
            ":netns",
            ":prometheus_page",
            ":sanitizer_report",
            "//clients/python:quadsock",
        ],
    )
