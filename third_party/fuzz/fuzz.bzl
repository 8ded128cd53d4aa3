"""remat_fuzz_test: a libFuzzer target that `bazel test` also runs."""

def remat_fuzz_test(name, srcs, deps, corpus, runs = 2000, size = "small"):
    """A fuzz target (LLVMFuzzerTestOneInput in `srcs`) as a cc_test.

    The test replays every file under `corpus` (a directory of this package)
    plus `runs` deterministic mutations of them (third_party/fuzz's driver).
    Under --config=fuzz the same target links libFuzzer instead: run its
    binary directly (tests/fuzz_long.sh); the tag "fuzz_target" finds them.
    """
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        deps = deps + ["//third_party/fuzz:fuzz_main"],
        data = native.glob([corpus + "/**"]),
        args = [
            "-runs=%d" % runs,
            native.package_name() + "/" + corpus,
        ],
        tags = ["fuzz_target"],
    )
