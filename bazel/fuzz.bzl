"""Fuzz targets: one macro for libFuzzer targets of our own.

    quadsock_fuzz_test(
        name = "frame_fuzzer",
        srcs = ["frame_fuzzer.cc"],   # defines LLVMFuzzerTestOneInput
        corpus = glob(["corpus/frame/*"]),
        dict = "dicts/frame.dict",
        deps = ["//stack/net:wire"],
    )

makes two targets:
  NAME         the fuzzer binary. Under --config=fuzz (clang, -fsanitize=fuzzer,address,undefined)
               it is a libFuzzer binary, run by scripts/fuzz.sh; in any other build it is the
               replay driver (fuzz/replay_main.cc) over files given on its command line.
  NAME_replay  a test that runs every file of the seed corpus through the target once, in every
               configuration the test command runs (default, ASan, UBSan): the corpus is a
               regression suite even where libFuzzer is not built.
"""

def quadsock_fuzz_test(name, srcs, deps, corpus, dict = None, tags = []):
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        linkopts = select({
            "//fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            "//fuzz:fuzzing": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        data = corpus + ([dict] if dict else []),
        tags = tags + ["fuzzer"],
    )
    native.sh_test(
        name = name + "_replay",
        size = "small",
        srcs = ["//fuzz:replay.sh"],
        args = ["$(location :%s)" % name] + ["$(location %s)" % c for c in corpus],
        data = [":" + name] + corpus,
        tags = tags,
    )
