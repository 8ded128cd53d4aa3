"""cuda_library: CUDA C++ (.cu) compiled by the nvcc of LibTorch's CUDA release.

Built only under --config=cuda (elsewhere the target is incompatible and
`//...` skips it), so a dependent selects it on //third_party:cuda. Sources
see the workspace root and the CUDA toolkit's headers, nothing of LibTorch:
keep .cu files to kernels and their launchers, behind a plain C++ header.
"""

# H100 and H200 (sm_90) machine code, plus PTX for later GPUs to JIT.
NVCC_ARCH_FLAGS = "-gencode=arch=compute_90,code=[sm_90,compute_90]"

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = "", **kwargs):
    compatible = select({
        "//third_party:cuda": [],
        "//conditions:default": ["//third_party:cuda_build_only"],
    })
    objs = []
    for src in srcs:
        obj = "_{}_{}.pic.o".format(name, src.replace("/", "_").replace(".cu", ""))
        native.genrule(
            name = obj.replace(".", "_"),
            srcs = [src] + hdrs,
            outs = [obj],
            tools = ["//third_party:nvcc"],
            cmd = " ".join([
                "$(location //third_party:nvcc)",
                "-std=c++17 -O2 -Xcompiler=-fPIC -I.",
                "-I$(GENDIR)",
                NVCC_ARCH_FLAGS,
                nvcc_flags,
                "-c $(location {}) -o $@".format(src),
            ]),
            target_compatible_with = compatible,
            testonly = kwargs.get("testonly", False),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["//third_party:cuda_runtime"],
        target_compatible_with = compatible,
        **kwargs
    )
