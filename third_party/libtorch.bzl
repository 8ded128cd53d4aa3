"""Where LibTorch (and, for CUDA builds, nvcc and the CUDA runtime) live.

Two repositories, chosen by //third_party:torch (see BUILD.bazel there):
  * @libtorch: Debian's CPU-only libtorch-dev (1.13) under /usr, the default.
  * @libtorch2: the current PyTorch's LibTorch (2.x, CUDA-enabled) inside the
    virtual environment that `./setup.sh --torch2` creates, selected by
    --config=torch2. The environment is $REMAT_TORCH2_VENV, by default
    $HOME/.cache/remat/torch2-venv (setup.sh uses the same default). Found
    by asking that environment's Python for `torch`; nvcc is the first of
    the wheel's (nvidia-cuda-nvcc) and /usr/local/cuda's whose release
    equals torch.version.cuda, since code compiled by another CUDA version
    must not share a process with LibTorch's.

When the environment is missing or unusable, @libtorch2's targets still
load (so `bazel query //...` works), but building anything that needs them
fails with a message that says what to run.
"""

_PROBE = """
import os, sys, sysconfig
import torch
print(os.path.dirname(torch.__file__))
print(torch.__version__)
print(torch.version.cuda or "")
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(sysconfig.get_paths()["purelib"])
print(sysconfig.get_paths()["include"])
print(sys.executable)
"""

def _debian_impl(ctx):
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

libtorch_repository = repository_rule(
    implementation = _debian_impl,
    local = True,
)

# A target that fails to build with `message`: what @libtorch2 holds when
# it cannot find what it needs.
_FAILING = """
genrule(
    name = "{name}_missing",
    outs = ["{name}_missing.h"],
    cmd = "echo 'ERROR: {message}' >&2; exit 1",
)
cc_library(
    name = "{name}",
    hdrs = [":{name}_missing.h"],
)
"""

def _failing(name, message):
    return _FAILING.format(name = name, message = message.replace("'", ""))

def _release(ctx, nvcc):
    """'13.2' from `nvcc --version`, or '' when it does not run."""
    r = ctx.execute([nvcc, "--version"])
    if r.return_code != 0:
        return ""
    for line in r.stdout.splitlines():
        if "release " in line:
            return line.split("release ")[1].split(",")[0].strip()
    return ""

def _torch2_impl(ctx):
    # Re-fetched when the pins change (the environment is then rebuilt).
    ctx.path(Label("//third_party/torch2:requirements.txt"))
    header = "package(default_visibility = [\"//visibility:public\"])\n"
    venv = ctx.os.environ.get("REMAT_TORCH2_VENV", "")
    if not venv:
        venv = ctx.os.environ.get("HOME", "") + "/.cache/remat/torch2-venv"
    python = ctx.path(venv + "/bin/python")
    probe = None
    if python.exists:
        probe = ctx.execute([python, "-c", _PROBE], timeout = 120)
    if probe == None or probe.return_code != 0:
        detail = "no Python there"
        if probe != None:
            lines = probe.stderr.strip().splitlines()
            detail = lines[-1] if lines else "its Python failed"
        why = "no torch 2.x in {} ({}): run ./setup.sh --torch2".format(venv, detail)
        ctx.file("BUILD.bazel", header + "\n".join([
            _failing(n, why)
            for n in ["torch", "torch_cuda", "cuda_runtime", "nvcc", "python_headers", "python", "torch_python"]
        ]))
        ctx.file("info.bzl", "TORCH_VERSION = ''\nCUDA_VERSION = ''\n")
        return
    root, version, cuda, abi, site, py_include, py = probe.stdout.strip().splitlines()[-7:]
    ctx.symlink(root + "/include", "include")
    lib = root + "/lib"
    # The environment's Python, for the extension module
    # (//client/python) and the tests that import it: its headers (pybind11
    # is torch's own, under include/) and the interpreter itself.
    ctx.symlink(py_include, "python_include")
    ctx.file("python.sh", "#!/bin/sh\nexec {} \"$@\"\n".format(py), executable = True)

    # The CUDA runtime and toolkit headers the wheel's nvidia-* packages
    # carry (nvidia/cu13/{include,lib,bin} for CUDA 13).
    major = cuda.split(".")[0]
    cuda_root = "{}/nvidia/cu{}".format(site, major)
    build = [header, """
cc_library(
    name = "torch",
    hdrs = glob(["include/**"]),
    includes = ["include", "include/torch/csrc/api/include"],
    defines = ["_GLIBCXX_USE_CXX11_ABI={abi}"],
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-Wl,--no-as-needed",
                "-ltorch", "-ltorch_cpu", "-lc10", "-Wl,--as-needed"],
)

cc_library(
    name = "python_headers",
    hdrs = glob(["python_include/**"]),
    includes = ["python_include"],
)

sh_binary(
    name = "python",
    srcs = ["python.sh"],
)

# torch's Python bindings: tensors to and from Python (torch/csrc/utils/pybind.h).
cc_library(
    name = "torch_python",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-Wl,--no-as-needed",
                "-ltorch_python", "-Wl,--as-needed"],
    deps = [":torch", ":python_headers"],
)
""".format(lib = lib, abi = abi)]

    if not cuda or not ctx.path(lib + "/libc10_cuda.so").exists:
        why = "torch {} in {} has no CUDA libraries".format(version, venv)
        build += [_failing(n, why) for n in ["torch_cuda", "cuda_runtime", "nvcc"]]
    else:
        ctx.symlink(cuda_root + "/include", "cuda_include")
        build.append("""
# LibTorch's CUDA half: c10::cuda, the caching allocator, CUDA kernels.
cc_library(
    name = "torch_cuda",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-Wl,--no-as-needed",
                "-ltorch_cuda", "-lc10_cuda", "-Wl,--as-needed"],
    deps = [":torch", ":cuda_runtime"],
)

# The CUDA runtime LibTorch itself links (the same libcudart).
cc_library(
    name = "cuda_runtime",
    hdrs = glob(["cuda_include/**"]),
    includes = ["cuda_include"],
    # The wheel ships only the versioned name (libcudart.so.13).
    linkopts = ["-L{cuda_lib}", "-Wl,-rpath,{cuda_lib}", "-l:libcudart.so.{major}"],
)
""".format(lib = lib, cuda_lib = cuda_root + "/lib", major = major))
        nvcc = ""
        tried = []
        for candidate in [cuda_root + "/bin/nvcc", "/usr/local/cuda/bin/nvcc"]:
            if ctx.path(candidate).exists:
                release = _release(ctx, candidate)
                tried.append("{} is {}".format(candidate, release or "unusable"))
                if release == cuda:
                    nvcc = candidate
                    break
        if nvcc:
            # Run by its own path: nvcc finds its compilers and headers
            # relative to where it really is.
            ctx.file("nvcc.sh", "#!/bin/sh\nexec {} \"$@\"\n".format(nvcc), executable = True)
            build.append("""
# nvcc of torch.version.cuda ({cuda}): {nvcc}
sh_binary(
    name = "nvcc",
    srcs = ["nvcc.sh"],
)
""".format(cuda = cuda, nvcc = nvcc))
        else:
            build.append(_failing("nvcc", "no nvcc of CUDA {} (torch {}): {}; run ./setup.sh --torch2".format(
                cuda,
                version,
                "; ".join(tried) or "none found",
            )))
    ctx.file("BUILD.bazel", "".join(build))
    ctx.file("info.bzl", "TORCH_VERSION = '{}'\nCUDA_VERSION = '{}'\n".format(version, cuda))

libtorch2_repository = repository_rule(
    implementation = _torch2_impl,
    environ = ["REMAT_TORCH2_VENV", "HOME"],
    local = True,
)
