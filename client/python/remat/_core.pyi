"""Types of remat's extension module (client/python/core_module.cc)."""

import enum
from typing import (Callable, ContextManager, Dict, List, Optional, Sequence,
                    Tuple)

import torch

WITH_CUDA: bool
torch_version: str  # the LibTorch this module was compiled against


class Action(enum.IntEnum):
    KEEP = 0
    RECOMPUTE = 1
    OFFLOAD = 2
    RECOMPUTE_OFFLOAD = 3


class PlanSource(enum.IntEnum):
    LOCAL_CACHE = 0
    PLANNER = 1
    COLLECT = 2
    LAST_GOOD = 3
    SAFE = 4


class BlockSpec:
    name: str
    checkpointable: bool
    def __init__(self, name: str, checkpointable: bool = True) -> None: ...


class ModelSpec:
    name: str
    feature_names: List[str]
    blocks: List[BlockSpec]
    def __init__(self, name: str, feature_names: Sequence[str],
                 blocks: Sequence[BlockSpec]) -> None: ...
    def validate(self) -> None: ...


class BlockMeasurement:
    act_bytes: int
    input_bytes: int
    forward_ns: int
    workspace_bytes: Optional[int]
    transfer_bytes: Optional[int]


class Sample:
    features: List[float]
    blocks: List[BlockMeasurement]
    base_bytes: Optional[int]
    peak_bytes: Optional[int]
    tail_bytes: Optional[int]
    d2h_bytes_per_s: Optional[float]
    h2d_bytes_per_s: Optional[float]
    device: str


class Outcome:
    model: str
    features: List[float]
    actions: List[Action]
    measured_peak_bytes: int
    step_ns: int
    out_of_memory: bool
    plan_source: Optional[PlanSource]
    copy_wait_ns: Optional[int]
    reserved_peak_bytes: Optional[int]
    device: str


class Plan:
    actions: List[Action]
    reasons: List[str]
    feasible: bool
    predicted_peak_bytes: int
    recompute_ns: int
    exposed_transfer_ns: int
    copies_out_landed: List[int]
    solver: str
    optimality_gap_ns: Optional[int]


class PlanResult:
    collect: bool
    collect_reason: str
    plan: Plan
    from_cache: bool
    bucket: List[int]


class Planner:
    def register_model(self, spec: ModelSpec) -> None: ...
    def get_plan(self, model: str, features: Sequence[float],
                 budget_bytes: int, solver: str = "",
                 offload: bool = True,
                 offload_checkpoints: bool = False,
                 device: str = "") -> PlanResult: ...
    def report_samples(self, model: str, samples: Sequence[Sample]) -> None: ...
    def report_outcome(self, outcome: Outcome) -> None: ...


class ModelState:
    spec: ModelSpec
    device: str
    num_samples: int
    num_quarantined: int
    outcomes: int
    out_of_memory: int
    outcomes_quarantined: int
    reserved_ratio: float
    reserved_outcomes: int


class LocalPlanner(Planner):
    def __init__(self, granularity: Dict[str, float] = ...,
                 default_solver: str = "", margin_fraction: float = 0.0,
                 host_link_bytes_per_s: float = 0.0) -> None: ...
    def model_state(self, model: str, device: str = "") -> ModelState: ...


class RemotePlanner(Planner):
    def __init__(self, address: str = "127.0.0.1:7421",
                 get_plan_deadline_ms: float = 50.0,
                 call_deadline_ms: float = 2000.0, max_attempts: int = 3,
                 tls_ca_file: str = "", tls_cert_file: str = "",
                 tls_key_file: str = "") -> None: ...
    def plans_from_daemon(self) -> int: ...


class PlanChoice:
    actions: List[Action]
    copies_out_landed: List[int]
    source: PlanSource
    predicted_peak_bytes: int
    solver: str
    collect: bool
    bucket: List[int]
    planner_error: Optional[str]
    smallest_peak_bytes: Optional[int]


class BatchFit:
    """The largest batch that fits, and the micro-batch split
    (client/batch_fit.h)."""
    max_batch: int
    micro_batches: int
    smallest_peak_bytes: Optional[int]


class PlanChooserStats:
    local_hits: int
    planner_calls: int
    collects: int
    fallbacks_last_good: int
    fallbacks_safe: int


class PlanChooser:
    def __init__(self, planner: Planner, spec: ModelSpec,
                 cache_capacity: int = 256,
                 granularity: Dict[str, float] = ..., solver: str = "",
                 offload: bool = False,
                 offload_checkpoints: bool = False,
                 device: str = "") -> None: ...
    device: str
    def choose(self, features: Sequence[float],
               budget_bytes: int) -> PlanChoice: ...
    @staticmethod
    def check_actions(spec: ModelSpec, actions: Sequence[Action],
                      offload: bool = False,
                      offload_checkpoints: bool = False) -> None: ...
    def fit_batch(self, features: Sequence[float], budget_bytes: int,
                  batch_feature: int) -> BatchFit: ...
    def smallest_peak_bytes(self, features: Sequence[float]) -> Optional[int]: ...
    def invalidate_plans(self) -> None: ...
    def stats(self) -> PlanChooserStats: ...


class Attachment(ContextManager["Attachment"]):
    def detach(self) -> None: ...


class StepSession:
    """One step of a StepLifecycle (client/step_lifecycle.h)."""
    choice: PlanChoice
    started: bool
    finished: bool
    sample: Optional[Sample]
    measured_peak_bytes: Optional[int]
    def start(self, resident_bytes: int) -> Optional[BlockSampler]: ...
    def finish(self, copy_wait_ns: int = 0,
               probe: Optional[Callable[[int], Optional[Tuple[float, float]]]]
               = None) -> None: ...
    def unwind(self, copy_wait_ns: int = 0) -> None: ...
    def fail_out_of_memory(self, copy_wait_ns: int = 0) -> None: ...
    def discard(self) -> None: ...


class StepLifecycle:
    """The one step lifecycle: plan, measure, report, fall back."""
    def __init__(self, planner: Planner, chooser: PlanChooser,
                 memory: Optional[MemorySource] = None,
                 trace: Optional[TraceRecorder] = None,
                 report_outcomes: bool = True,
                 link_probe_bytes: int = ..., link_probe_steps: int = 8,
                 warmup_steps: int = 1,
                 over_budget: str = "raise") -> None: ...
    def begin(self, features: Sequence[float], budget_bytes: int,
              held_bytes: int = 0) -> StepSession: ...
    def retry(self, failed: StepSession) -> StepSession: ...


class MemorySource:
    """Subclass it in Python to measure memory some other way."""
    def current_bytes(self) -> int: ...
    def peak_bytes(self) -> int: ...
    def reset_peak(self) -> None: ...
    def absolute(self) -> bool: ...
    def synchronize(self) -> None: ...
    def out_of_memory_count(self) -> int: ...
    def reserved_peak_bytes(self) -> Optional[int]: ...
    def device_type(self) -> str: ...
    def attach(self) -> Attachment: ...


class CpuMemoryTracker(MemorySource):
    def __init__(self) -> None: ...
    def events(self) -> int: ...


class CudaMemorySource(MemorySource):  # only when WITH_CUDA
    device_index: int
    def __init__(self, device_index: int = 0) -> None: ...


class CopyEngineStats:
    bytes_to_host: int
    bytes_to_device: int
    failed_copies: int
    pending_copies: int
    host_reserved_bytes: int


class CopyEngine:
    """Moves OFFLOAD's saved tensors to host and back (cpu: the reference
    engine, optionally held to an emulated link; cuda: copy streams)."""
    name: str
    def __init__(self, device: str = "cpu", link_bytes_per_s: float = 0.0,
                 host_limit_bytes: int = 0) -> None: ...
    def stats(self) -> CopyEngineStats: ...
    def measure_link(self, probe: "torch.Tensor") -> Tuple[float, float]: ...


class OffloadGroup:
    def prefetch(self) -> None: ...
    def wait_copies_out(self) -> None: ...


class SavedTensor:
    def unpack(self) -> "torch.Tensor": ...


class Offloader:
    def __init__(self, engine: CopyEngine, min_bytes: int = 65536) -> None: ...
    def begin_block(self, stays: Sequence["torch.Tensor"]) -> None: ...
    def pack(self, tensor: "torch.Tensor") -> SavedTensor: ...
    def end_block(self, outputs: Sequence["torch.Tensor"]) -> OffloadGroup: ...
    def wait_copies_out(self) -> None: ...


def prefetch_on_backward(x: "torch.Tensor",
                         group: OffloadGroup) -> "torch.Tensor": ...


class BlockSampler:
    def __init__(self, source: MemorySource, num_blocks: int) -> None: ...
    def begin_step(self, resident_bytes: int = 0) -> None: ...
    def before_block(self, index: int, input_bytes: int) -> None: ...
    def after_block(self, index: int) -> None: ...
    def after_backward(self, index: int) -> None: ...
    def transfer_bytes(self, index: int, bytes: int) -> None: ...
    def end_forward(self) -> None: ...
    def end_step(self, features: Sequence[float]) -> Sample: ...


class TraceRecorder:
    def __init__(self, path: str, spec: ModelSpec) -> None: ...
    def record(self, sample: Sample) -> None: ...


def plan_for_sample(spec: ModelSpec, sample: Sample, budget_bytes: int,
                    solver: str = "exact") -> Plan:
    """The plan `solver` makes for the batch `sample` measured, from its
    own quantities (no estimate, no bound, no calibration)."""
    ...
