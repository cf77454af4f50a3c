"""End-to-end tests against a real quadsockd: one macro for their common shape.

    quadsockd_e2e_test(
        name = "fragments_e2e_test",        # tests/fragments_e2e_test.py
        size = "large",
        tools = ["//clients/python:echo_server"],
    )

is a py_test of NAME.py with tests/e2e.py (e2e.Daemon and the veth helpers), quadsockd's path
as its first argument and each of `tools`' after it, in order; root, exclusive (it makes
namespaces and veth pairs) and unsandboxed.
"""

def quadsockd_e2e_test(name, size = "medium", tools = []):
    native.py_test(
        name = name,
        size = size,
        srcs = [name + ".py"],
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
            ":e2e",
            ":netns",
            ":prometheus_page",
            "//clients/python:quadsock",
        ],
    )
