"""remat: input-aware activation checkpointing for PyTorch.

Per training step remat plans which blocks of a model keep their
activations and which recompute them in backward, from the batch's input
features and a memory budget; ``remat.torch.apply`` applies the plans
to an existing model in place (``remat.torch.PlannedModule`` to a model
built around remat). Plans come from a planner in this process (``LocalPlanner``, the
default) or from the ``rematd`` daemon (``RemotePlanner``), with fallbacks
when the daemon does not answer (the last good plan, then the safe plan).
"""

# torch first: the extension links the LibTorch that this torch loads.
import torch as _torch  # noqa: F401

from remat.errors import BudgetError, Error
from remat._core import (  # noqa: F401
    Action,
    BatchFit,
    BlockMeasurement,
    BlockSampler,
    BlockSpec,
    CopyEngine,
    CopyEngineStats,
    CpuMemoryTracker,
    LocalPlanner,
    MemorySource,
    ModelSpec,
    ModelState,
    Offloader,
    OffloadGroup,
    Outcome,
    Plan,
    PlanChoice,
    PlanChooser,
    PlanResult,
    PlanSource,
    Planner,
    Sample,
    TraceRecorder,
    WITH_CUDA,
    plan_for_sample,
)

from remat._version import __version__  # noqa: F401
from remat._core import torch_version  # noqa: F401

# The extension links LibTorch's C++ API, which changes between minor
# releases: another torch would fail in obscure ways, so say it plainly.
if _torch.__version__.split(".")[:2] != torch_version.split(".")[:2]:
    raise ImportError(
        f"remat {__version__} was built for torch {torch_version}, but this "
        f"environment has torch {_torch.__version__}; install the remat "
        "wheel built for this torch (client/python/build_wheel.sh builds one)")

if WITH_CUDA:
    from remat._core import CudaMemorySource  # noqa: F401
try:
    from remat._core import RemotePlanner  # noqa: F401
except ImportError:  # a build without gRPC (bench/gpu_peers.sh)
    RemotePlanner = None

KEEP = Action.KEEP
RECOMPUTE = Action.RECOMPUTE
OFFLOAD = Action.OFFLOAD
RECOMPUTE_OFFLOAD = Action.RECOMPUTE_OFFLOAD

__all__ = [
    "Action", "BatchFit", "BlockMeasurement", "BudgetError", "BlockSampler", "BlockSpec",
    "CopyEngine", "CopyEngineStats", "CpuMemoryTracker", "Error", "KEEP", "LocalPlanner", "MemorySource",
    "ModelSpec", "ModelState", "OFFLOAD", "Offloader", "OffloadGroup", "Outcome", "Plan", "PlanChoice", "PlanChooser",
    "PlanResult", "PlanSource", "Planner", "RECOMPUTE", "RECOMPUTE_OFFLOAD",
    "Sample", "TraceRecorder", "WITH_CUDA", "__version__", "plan_for_sample",
    "torch_version",
] + (["CudaMemorySource"] if WITH_CUDA else []) + \
    (["RemotePlanner"] if RemotePlanner is not None else [])
