"""Builds the Python package `remat`: its extension module (remat._core)
with Bazel, against the LibTorch of the torch that the running Python
imports, then the package around it.

    pip install --no-build-isolation ./client/python

--no-build-isolation: the extension must link the same LibTorch as the
torch that will import it, so the build runs in the environment that holds
that torch (an isolated build environment has none). The environment must
be a virtual environment (its prefix holds bin/python); the repository's
`./setup.sh --torch2` makes one.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the Bazel workspace


class BinaryDistribution(Distribution):
    """The wheel holds a compiled module: tag it for this platform."""

    def has_ext_modules(self):
        return True


class BuildWithBazel(build_py):
    def run(self):
        super().run()
        try:
            import torch
        except ImportError:
            sys.exit(f"remat: no torch importable from {sys.executable}; "
                     "install torch in this environment first and build "
                     "with pip install --no-build-isolation")
        if not os.path.exists(os.path.join(sys.prefix, "bin", "python")):
            sys.exit(f"remat: {sys.prefix} is not a virtual environment "
                     "(no bin/python); create one (./setup.sh --torch2)")
        # With CUDA, the extension also binds the CUDA allocator's source.
        config = "--config=cuda" if torch.version.cuda else "--config=torch2"
        env = dict(os.environ, REMAT_TORCH2_VENV=sys.prefix)
        target = "//client/python:_core.so"
        # --symlink_prefix=/: no bazel-bin symlink, so the default build's
        # stays the user's (this build's outputs are in a config dir of
        # their own).
        subprocess.check_call(
            ["bazel", "build", config, "--symlink_prefix=/", target],
            cwd=ROOT, env=env)
        bin_dir = subprocess.check_output(
            ["bazel", "info", config, "bazel-bin"], cwd=ROOT, env=env,
            text=True).strip()
        out = os.path.join(self.build_lib, "remat")
        os.makedirs(out, exist_ok=True)
        dest = os.path.join(out, "_core.so")
        if os.path.exists(dest):
            os.chmod(dest, 0o644)
        shutil.copyfile(os.path.join(bin_dir, "client", "python", "_core.so"),
                        dest)


def torch_requirement():
    """The torch the extension binds to, by major and minor version: its
    C++ ABI changes between minor releases."""
    import torch
    major, minor = torch.__version__.split(".")[:2]
    return f"torch=={major}.{minor}.*"


# Metadata is in pyproject.toml; here only what must be code.
setup(
    install_requires=[torch_requirement()],
    cmdclass={"build_py": BuildWithBazel},
    distclass=BinaryDistribution,
)
