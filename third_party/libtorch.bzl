"""The @libtorch repository: where LibTorch's headers and libraries live.

The single switch is the environment variable REMAT_LIBTORCH:
  * unset (default): Debian's CPU-only libtorch-dev (1.13) under /usr;
  * set to a LibTorch root (the folder holding include/ and lib/, e.g. the
    `torch` folder of a pip-installed PyTorch): that LibTorch, linked with an
    rpath, including its CUDA libraries when it has them.
Pass it as `bazel build --repo_env=REMAT_LIBTORCH=/path/to/torch ...`.
"""

def _libtorch_impl(ctx):
    root = ctx.os.environ.get("REMAT_LIBTORCH", "")
    if not root:
        ctx.symlink("/usr/include/torch/csrc/api/include", "api_include")
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "torch",
    hdrs = glob(["api_include/**"]),
    includes = ["api_include"],
    linkopts = ["-ltorch", "-ltorch_cpu", "-lc10"],
)
""")
        return
    ctx.symlink(root + "/include", "include")
    lib = root + "/lib"
    libs = ["-ltorch", "-ltorch_cpu", "-lc10"]
    if ctx.path(lib + "/libc10_cuda.so").exists:
        libs += ["-ltorch_cuda", "-lc10_cuda"]
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "torch",
    hdrs = glob(["include/**"]),
    includes = ["include", "include/torch/csrc/api/include"],
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-Wl,--no-as-needed"] + {libs} + ["-Wl,--as-needed"],
)
""".format(lib = lib, libs = libs))

libtorch_repository = repository_rule(
    implementation = _libtorch_impl,
    environ = ["REMAT_LIBTORCH"],
    local = True,
)
