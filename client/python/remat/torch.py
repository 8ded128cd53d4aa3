"""Apply remat's per-step plans to a PyTorch model.

``apply`` does it in place, to a model you did not write: the model's own
forward runs, and inside a step each of the blocks it calls runs under the
step's plan::

    handle = remat.torch.apply(model.model.layers, model=model,
                               optimizer=optimizer,
                               feature_names=["batch", "seq"],
                               memory=memory_source_for(device))
    with handle.step({"batch": b, "seq": s}, budget, inputs=batch):
        model(**batch).loss.backward()

``PlannedModule`` holds a model's blocks in forward order and, per training
step, asks the planner which blocks keep their activations and which
recompute them in backward, runs them so, and reports what it measured::

    import remat
    from remat.torch import PlannedModule, memory_source_for

    planned = PlannedModule(model.layers, name="encoder",
                            feature_names=["batch", "seq"],
                            memory=memory_source_for(device))
    for x in batches:
        with planned.step(features={"batch": x.shape[0], "seq": x.shape[1]},
                          budget_bytes=budget):
            loss = head(planned(embed(x))).mean()
            loss.backward()
        optimizer.step()

Actions, per block:

* KEEP runs the block as it is.
* RECOMPUTE runs it through ``torch.utils.checkpoint.checkpoint`` with
  ``use_reentrant=False`` and the RNG state preserved, so dropout draws the
  same numbers in the recompute and gradients equal the plain model's.
* COLLECT (the planner cannot vouch for these features yet) runs the safe
  plan, every checkpointable block recomputed, and measures each block as
  the C++ runtime does: its activations and forward time when it is
  (re)computed, its backward's workspace, with a copy engine what OFFLOAD
  would move for it, and the step's peak. The sample goes
  to the planner, which then plans for such batches.
* OFFLOAD (with a copy engine, ``copy_engine=remat.CopyEngine(device)``)
  runs the block under ``torch.autograd.graph.saved_tensors_hooks`` whose
  hooks send each tensor autograd saves (each storage once, except the
  block's inputs, parameters and buffers, and storages under
  ``offload_min_bytes``) to host memory through the copy engine, and
  bring it back before the block's backward needs it: prefetched when
  the backward of the block above begins, at the end of forward for the
  last block. Values come back bit for bit. Without a copy engine the
  planner is asked for plans without OFFLOAD.
* RECOMPUTE_OFFLOAD (with a copy engine) recomputes the block from a
  checkpoint that waits in host memory: after a recomputed block it runs
  through ``torch.utils.checkpoint.checkpoint`` with ``use_reentrant=True``
  (which saves its positional tensor inputs for backward) under the same
  hooks, so those inputs go to host and come back as OFFLOAD's do; keyword
  arguments (a mask) stay on the device. Elsewhere (the first block, after
  a block that is not recomputed, or when no positional input needs a
  gradient or a keyword tensor does) it runs as RECOMPUTE. A COLLECT step
  measures it as it measures RECOMPUTE.

Calling conventions: the first block is called with ``forward``'s
arguments; each later block with the previous block's output as its first
positional argument (all of them, when the output is a tuple), followed by
``forward``'s other positional and keyword arguments (an attention mask
that every layer reads, say). Outside a step, ``forward`` runs the plain
model (every block KEEP).

A step never fails for want of a planner: when the planner (the daemon) does
not answer, the step runs the last good plan for a covering batch, else the
safe plan, and training goes on; failures to report are warned about once.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from collections import OrderedDict, deque
from typing import (Any, Callable, Deque, Dict, Iterable, Iterator, List,
                    Mapping, NamedTuple, Optional, Sequence, Tuple, Union)

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from remat import _core
from remat._core import Action, PlanSource
from remat.errors import BudgetError, Error

__all__ = ["Applied", "MicroBatch", "PlannedModule", "Step", "apply",
           "memory_source_for",
           "peak_bytes_of", "remove", "resident_bytes"]

Blocks = Union[nn.ModuleList, nn.Sequential, Mapping[str, nn.Module],
               Iterable[Tuple[str, nn.Module]]]


def memory_source_for(device: Union[str, torch.device]) -> _core.MemorySource:
    """The memory source that measures steps on ``device``.

    CPU: the tracker of LibTorch's CPU allocator (counts what a step
    allocates). CUDA: the caching allocator's statistics for that device.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return _core.CpuMemoryTracker()
    if device.type == "cuda":
        if not _core.WITH_CUDA:
            raise Error("FAILED_PRECONDITION",
                        "remat._core was built without CUDA; reinstall it "
                        "from an environment whose torch has CUDA")
        index = device.index if device.index is not None else \
            torch.cuda.current_device()
        return _core.CudaMemorySource(index)
    raise Error("INVALID_ARGUMENT",
                f"device: no memory source for {device.type!r}; "
                "use 'cpu' or 'cuda'")


def resident_bytes(module: nn.Module,
                   tensors: Iterable[Any] = ()) -> int:
    """Bytes of ``module``'s parameters, their gradients and buffers, and of
    ``tensors``, each storage counted once: what was alive before a step
    that a relative memory source (the CPU tracker) cannot see."""
    return _resident([module], tensors)


def peak_bytes_of(run: Callable[[], Any], memory: _core.MemorySource,
                  resident: int = 0) -> int:
    """The whole-step peak of ``run()`` as a step measures it: an absolute
    source's (CUDA's) peak; on a relative one (the CPU tracker)
    ``resident`` (what was alive before, ``resident_bytes``) plus the most
    that ``run()`` held above where it began."""
    with memory.attach():
        memory.synchronize()
        memory.reset_peak()
        begin = memory.current_bytes()
        run()
        memory.synchronize()
        if memory.absolute():
            return memory.peak_bytes()
        return resident + memory.peak_bytes() - begin


def _ranks() -> int:
    """The ranks of the torch.distributed job this process is in (1: none)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def _resident(modules: Iterable[nn.Module], tensors: Iterable[Any]) -> int:
    seen = set()
    total = 0

    def add(t: Optional[torch.Tensor]) -> None:
        nonlocal total
        if not isinstance(t, torch.Tensor):
            return
        if hasattr(t, "to_local"):  # a DTensor (FSDP2): this rank's shard
            t = t.to_local()
        storage = t.untyped_storage()
        key = (storage.data_ptr(), t.device)
        if storage.nbytes() == 0 or key in seen:
            return
        seen.add(key)
        total += storage.nbytes()

    for module in modules:
        for p in module.parameters():
            add(p)
            add(p.grad)
        for b in module.buffers():
            add(b)
    for t in tensors:
        add(t)
    return total


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


class _GradState:
    """The modules' gradients before a step, to put back after a failed
    run: none where there was none; with `accumulate` a host copy of each
    that exists, else zeros (the step began after zero_grad)."""

    def __init__(self, modules: Iterable[nn.Module], accumulate: bool
                 ) -> None:
        self.saved = [(p, p.grad is not None,
                       p.grad.detach().to("cpu", copy=True)
                       if accumulate and p.grad is not None else None)
                      for p in _unique_parameters(modules)]

    def restore(self) -> None:
        for p, had, grad in self.saved:
            if not had:
                p.grad = None
            elif grad is not None:
                if p.grad is None:
                    p.grad = grad.to(p.device)
                else:
                    p.grad.copy_(grad)
            elif p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()


class _RngState:
    """The CPU's RNG state and that of every CUDA device the modules use,
    to run a step again on the same random numbers (dropout)."""

    def __init__(self, modules: Iterable[nn.Module]) -> None:
        self.cpu = torch.random.get_rng_state()
        devices = {p.device for p in _unique_parameters(modules)
                   if p.device.type == "cuda"}
        self.cuda = {d: torch.cuda.get_rng_state(d) for d in devices}

    def restore(self) -> None:
        torch.random.set_rng_state(self.cpu)
        for device, state in self.cuda.items():
            torch.cuda.set_rng_state(state, device)


class MicroBatch(NamedTuple):
    """One micro-batch of ``split``."""
    features: Dict[str, float]
    inputs: Any
    weight: float  # its share of the batch's rows
    accumulate: bool  # adds to the gradients of those before it


def _unique_parameters(modules: Iterable[nn.Module]
                       ) -> List[nn.Parameter]:
    """The modules' parameters, each once (shared ones too)."""
    seen = set()
    out = []
    for m in modules:
        for p in m.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def _grad_bytes(modules: Iterable[nn.Module]) -> int:
    """The bytes of the gradients the modules' parameters hold now."""
    return _resident([], [p.grad for m in modules for p in m.parameters()])


def _rows(value: Any, start: int, stop: int, rows: int) -> Any:
    """Rows start..stop of every tensor in `value` (a tensor, or a dict,
    list or tuple of them) whose first dimension is `rows`; tensors of one
    row (broadcast) and anything else as they are."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 or (value.shape[0] == 1 and rows > 1):
            return value  # broadcast over the rows
        if value.shape[0] != rows:
            raise ValueError(f"inputs: a tensor of shape {tuple(value.shape)}"
                             f" in a batch of {rows} rows; split takes "
                             "tensors whose first dimension is the batch")
        return value[start:stop]
    if isinstance(value, Mapping):
        return {k: _rows(v, start, stop, rows) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        parts = [_rows(v, start, stop, rows) for v in value]
        return type(value)(*parts) if hasattr(value, "_fields") else \
            type(value)(parts)
    return value


def _tensors_in(value: Any) -> List[torch.Tensor]:
    """The tensors in `value`: itself, or inside its tuples, lists and
    dicts (a block's arguments)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


def _block_input(args: Tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """What a block takes as its input (the hidden states): its first
    positional argument, else its first keyword tensor."""
    if args:
        return args[0]
    return next((v for v in kwargs.values() if isinstance(v, torch.Tensor)),
                None)


@contextlib.contextmanager
def _running_stats_kept(block: nn.Module) -> Iterator[None]:
    """A recompute leaves batch norms' running statistics as the forward
    left them (it would otherwise update them a second time); the
    recompute's output is the forward's either way (batch statistics in
    training)."""
    norms = [m for m in block.modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm) and
             m.training and m.track_running_stats]
    saved = [[b.clone() for b in m.buffers()] for m in norms]
    try:
        yield
    finally:
        # Through .data: batch norm's backward holds the running statistics
        # (unread in training) and would refuse a new version of them.
        for m, buffers in zip(norms, saved):
            for b, old in zip(m.buffers(), buffers):
                b.data.copy_(old)


def _storage_key(t: torch.Tensor) -> Optional[int]:
    """The address of a strided tensor's storage (None for other layouts)."""
    if t.layout != torch.strided:
        return None
    return t.untyped_storage().data_ptr()


def _unpack(saved: _core.SavedTensor) -> torch.Tensor:
    return saved.unpack()


def _map_first_grad_tensor(value: Any,
                           f: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`value` with f applied to its first tensor that requires grad (the
    value itself, or the first such element of a tuple)."""
    if isinstance(value, torch.Tensor):
        return f(value)
    if isinstance(value, tuple):
        for k, t in enumerate(value):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                return value[:k] + (f(t),) + value[k + 1:]
    return value


def _named_blocks(blocks: Blocks) -> "OrderedDict[str, nn.Module]":
    if isinstance(blocks, (nn.ModuleList, nn.Sequential)):
        named = [(str(i), m) for i, m in enumerate(blocks)]
    elif isinstance(blocks, Mapping):
        named = list(blocks.items())
    else:
        named = list(blocks)
    out: "OrderedDict[str, nn.Module]" = OrderedDict()
    for i, item in enumerate(named):
        if not (isinstance(item, tuple) and len(item) == 2 and
                isinstance(item[0], str) and isinstance(item[1], nn.Module)):
            raise TypeError(f"blocks[{i}]: expected (name, nn.Module), "
                            f"got {type(item).__name__}")
        name, module = item
        if name in out:
            raise ValueError(f"blocks[{i}]: the name {name!r} is taken; "
                             "block names must be unique")
        out[name] = module
    if not out:
        raise ValueError("blocks: a model needs at least one block")
    return out


class _Planning:
    """What a model run under remat's plans keeps between steps, shared by
    ``PlannedModule`` and the handle ``apply`` returns: its spec, its
    planner and plan cache, and how steps are measured and reported (the
    options are ``PlannedModule``'s)."""

    # Whether blocks run inside the model's own forward (apply): the step
    # then measures from its start, not from the blocks' first call.
    _in_place = False

    def __init__(self,
                 block_names: List[str],
                 *,
                 planner: Optional[_core.Planner] = None,
                 name: str = "model",
                 feature_names: Sequence[str] = ("batch",),
                 checkpointable: Optional[Sequence[bool]] = None,
                 memory: Optional[_core.MemorySource] = None,
                 trace: Optional[_core.TraceRecorder] = None,
                 solver: str = "",
                 granularity: Optional[Mapping[str, float]] = None,
                 cache_capacity: int = 256,
                 preserve_rng_state: bool = True,
                 report_outcomes: bool = True,
                 copy_engine: Optional[_core.CopyEngine] = None,
                 offload_min_bytes: int = 64 << 10,
                 link_probe_bytes: int = 16 << 20,
                 link_probe_steps: int = 8,
                 warmup_steps: int = 1,
                 over_budget: str = "raise",
                 retry_on_oom: bool = True,
                 max_oom_retries: int = 2,
                 device: Optional[str] = None) -> None:
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps: {warmup_steps}; must be >= 0")
        if over_budget not in ("raise", "run"):
            raise ValueError(f"over_budget: {over_budget!r}; use 'raise' or "
                             "'run'")
        if max_oom_retries < 0:
            raise ValueError(f"max_oom_retries: {max_oom_retries}; must be "
                             ">= 0")
        if checkpointable is None:
            checkpointable = [True] * len(block_names)
        if len(checkpointable) != len(block_names):
            raise ValueError(f"checkpointable: {len(checkpointable)} values "
                             f"for {len(block_names)} blocks; give one per "
                             "block")
        self.spec = _core.ModelSpec(
            name, list(feature_names),
            [_core.BlockSpec(n, bool(c)) for n, c in
             zip(block_names, checkpointable)])
        self.spec.validate()
        self.planner = planner if planner is not None else \
            _core.LocalPlanner()
        self.chooser = _core.PlanChooser(
            self.planner, self.spec, cache_capacity=cache_capacity,
            granularity=dict(granularity or {}), solver=solver,
            offload=copy_engine is not None,
            offload_checkpoints=copy_engine is not None,
            device=device if device is not None else
            memory.device_type() if memory is not None else "")
        # The device type of its profile in the planner (the `device` option).
        self.device_type: str = self.chooser.device
        self.memory = memory
        self.trace = trace
        self.preserve_rng_state = preserve_rng_state
        self.report_outcomes = report_outcomes
        self.copy_engine = copy_engine
        self.offload_min_bytes = offload_min_bytes
        self.link_probe_bytes = link_probe_bytes
        self.link_probe_steps = link_probe_steps
        self.warmup_steps = warmup_steps
        self.over_budget = over_budget
        self.retry_on_oom = retry_on_oom
        self.max_oom_retries = max_oom_retries
        self._lifecycle: Optional[_core.StepLifecycle] = None
        self._step: Optional[Step] = None

    @property
    def feature_names(self) -> List[str]:
        return list(self.spec.feature_names)

    def _new_step(self, features: Mapping[str, float], budget_bytes: int,
                  inputs: Any = (), accumulate: bool = False) -> "Step":
        if self._step is not None:
            raise RuntimeError(f"{type(self).__name__}.step: a step is "
                               "already running; steps do not nest")
        held = _grad_bytes(self._grad_owners()) if accumulate else 0
        return Step(self, self._feature_values(features), int(budget_bytes),
                    _tensors_in(inputs), held)

    def _grad_owners(self) -> List[nn.Module]:
        """What the step's gradients belong to."""
        raise NotImplementedError

    def _feature_values(self, features: Mapping[str, float]) -> List[float]:
        """The features in the spec's order; ValueError unless they are
        exactly the spec's."""
        missing = [n for n in self.spec.feature_names if n not in features]
        unknown = [n for n in features if n not in self.spec.feature_names]
        if missing or unknown:
            raise ValueError(
                f"features: expected exactly {self.feature_names}; "
                + (f"missing {missing}" if missing else "")
                + ("; " if missing and unknown else "")
                + (f"unknown {unknown}" if unknown else ""))
        return [float(features[n]) for n in self.spec.feature_names]

    def fit_batch(self, features: Mapping[str, float], budget_bytes: int,
                  batch: str = "batch") -> _core.BatchFit:
        """Before a batch runs: the largest batch of these features (the
        feature named ``batch`` the number of rows, the others as given)
        that fits ``budget_bytes`` under the planner's current profile,
        and the number of micro-batches the batch splits into so that each
        fits (``micro_batches``: 1 when it fits whole, 0 when not even one
        row does; then ``smallest_peak_bytes`` is a row's least peak).
        Features the planner cannot vouch for yet count as fitting: their
        step collects, under the least-memory plan."""
        values = self._feature_values(features)
        if batch not in self.spec.feature_names:
            raise ValueError(f"batch: {batch!r} is not one of the features "
                             f"{self.feature_names}")
        return self.chooser.fit_batch(values, int(budget_bytes),
                                      self.feature_names.index(batch))

    def micro_batches(self, features: Mapping[str, float], budget_bytes: int,
                      batch: str = "batch") -> int:
        """How many micro-batches ``split`` starts this batch in, as the
        profile stands: 1 when it fits whole, else as many as fit beside
        the gradients accumulation holds; 0 when not even one row does.
        Ranks that must run as many forwards as each other (each forward of
        an FSDP2 model gathers parameters from every rank) agree on the
        largest of theirs and pass it to ``split(micro_batches=...)``."""
        whole = self.fit_batch(features, budget_bytes, batch)
        if whole.micro_batches == 1:
            return 1
        held = self._accumulated_bytes()
        if held >= budget_bytes:
            return 0
        return self.fit_batch(features, budget_bytes - held,
                              batch).micro_batches

    def _accumulated_bytes(self) -> int:
        """The gradients that micro-batches after the first hold."""
        return sum(p.numel() * p.element_size() for p in
                   _unique_parameters(self._grad_owners()) if p.requires_grad)

    def split(self, features: Mapping[str, float], budget_bytes: int,
              inputs: Any, batch: str = "batch",
              micro_batches: Optional[int] = None) -> Iterator["MicroBatch"]:
        """The batch as micro-batches that each fit ``budget_bytes``
        (``fit_batch``), for gradient accumulation, one ``MicroBatch``
        each: its features; its inputs, a slice of the rows of ``inputs``
        (every tensor in it whose first dimension is the batch's rows; a
        tensor, or a dict, list or tuple of them); its weight, its share
        of the rows (scale its loss by it and the accumulated gradients
        are those of the whole batch's mean loss); and whether it
        accumulates onto the gradients of those before it (pass it to
        ``step``, which then plans with them held). One micro-batch, the
        batch itself with weight 1.0, when it fits whole::

            for mb in handle.split(features, budget, batch):
                with handle.step(mb.features, budget, inputs=mb.inputs,
                                 accumulate=mb.accumulate):
                    (model(**mb.inputs).loss * mb.weight).backward()
            optimizer.step()

        Otherwise every micro-batch is sized with the gradients held that
        accumulation leaves, and each is sized when it is drawn, from the
        rows left: a micro-batch that collected tells the planner about
        the next. Raises remat.BudgetError (when it is drawn) where not
        even one row fits.

        With ``micro_batches``: exactly that many (at most the rows), as
        even as can be, whatever fits: for ranks that agreed on it
        (``micro_batches()``)."""
        whole = self.fit_batch(features, budget_bytes, batch)  # checks
        rows = int(features[batch])
        held = self._accumulated_bytes()
        if micro_batches is not None and int(micro_batches) < 1:
            raise ValueError(f"micro_batches: {micro_batches} is not a "
                             "number of micro-batches >= 1")

        def even(parts: int) -> Iterator[MicroBatch]:
            if parts == 1:  # the batch itself
                yield MicroBatch(dict(features), inputs, 1.0, False)
                return
            start = 0
            for i in range(parts):
                n = rows // parts + (i < rows % parts)
                yield MicroBatch({**features, batch: n},
                                 _rows(inputs, start, start + n, rows),
                                 n / rows, start > 0)
                start += n

        def draw() -> Iterator[MicroBatch]:
            if micro_batches is not None:
                yield from even(min(int(micro_batches), rows))
                return
            if whole.micro_batches == 1:
                yield from even(1)
                return
            start = 0
            while start < rows:
                left = rows - start
                fit = self.fit_batch({**features, batch: left},
                                     budget_bytes - held, batch) \
                    if held < budget_bytes else None
                if fit is None or fit.micro_batches == 0:
                    smallest = (fit.smallest_peak_bytes or 0 if fit else 0) \
                        + held
                    raise BudgetError(
                        f"budget_bytes: not even one row of features "
                        f"{dict(features)} fits {int(budget_bytes)} bytes "
                        f"beside the gradients that micro-batches accumulate "
                        f"({held} bytes): a row's smallest reachable peak "
                        f"with them is {smallest} bytes; raise the budget",
                        smallest)
                n = -(-left // fit.micro_batches)  # the rows left, evenly
                yield MicroBatch({**features, batch: n},
                                 _rows(inputs, start, start + n, rows),
                                 n / rows, start > 0)
                start += n

        return draw()

    def run_step(self, features: Mapping[str, float], budget_bytes: int,
                 run: Callable[[], Any], *, inputs: Any = (),
                 accumulate: bool = False) -> "Step":
        """``run()`` (one forward and backward of the model) as a step, as
        ``with self.step(features, budget_bytes, ...): run()`` does, and
        the step that ran through. With ``retry_on_oom`` (the default), a
        step whose forward or backward runs out of memory
        (``torch.OutOfMemoryError``) is not the end: what it held is
        freed (its activations, saved tensors and copies to host in
        flight; the gradients it added: with ``accumulate`` those of
        earlier micro-batches are put back from a host copy, else the
        step is taken to begin from none or zeroed ones, as after
        ``zero_grad``), its outcome is reported, and ``run()`` runs again on
        the same RNG state under a safer plan (the planner's next, else
        the safe plan with checkpoints sent to host where a copy engine
        exists), at most ``max_oom_retries`` times; past them the error
        propagates, naming the features and the budget. ``Step.retries``
        says how often it ran again. In a job of several ranks
        (``torch.distributed`` initialized with a world size above 1) it
        does not run again: one rank repeating forward and backward would
        leave the collectives the others already ran unmatched, a hang
        instead of an error. (A ``with`` block cannot run its
        body twice: retries need ``run_step``.)"""
        step = self._new_step(features, budget_bytes, inputs, accumulate)
        if not self.retry_on_oom or _ranks() > 1:
            with step:
                run()
            return step
        before = _GradState(self._grad_owners(), accumulate)
        rng = _RngState(self._grad_owners())
        for retries in range(self.max_oom_retries + 1):
            try:
                with step:
                    run()
                step.retries = retries
                return step
            except torch.OutOfMemoryError as e:
                if retries == self.max_oom_retries:
                    least = self.chooser.smallest_peak_bytes(
                        self._feature_values(features))
                    reach = "not known yet" if least is None else \
                        f"{least} bytes"
                    raise torch.OutOfMemoryError(
                        f"remat: the step for features {dict(features)} ran "
                        f"out of memory under a budget of {int(budget_bytes)}"
                        f" bytes, {retries + 1} times (retries: "
                        f"max_oom_retries={self.max_oom_retries}); the "
                        f"smallest peak any plan reaches is {reach}; raise "
                        f"the budget or split the batch: {e}") from e
            # Past the except clause the exception and its frames, which
            # held the failed run's tensors, are gone.
            before.restore()
            rng.restore()
            step = step._retry()
        raise AssertionError("unreachable")

    def _resident_bytes(self, tensors: Sequence[torch.Tensor]) -> int:
        """What was alive before the step that a relative memory source
        cannot see."""
        raise NotImplementedError

    def _step_lifecycle(self) -> _core.StepLifecycle:
        """The step lifecycle, made when the first step begins (from the
        options then: memory, trace, report_outcomes, link_probe_bytes,
        link_probe_steps, warmup_steps)."""
        if self._lifecycle is None:
            self._lifecycle = _core.StepLifecycle(
                self.planner, self.chooser, memory=self.memory,
                trace=self.trace, report_outcomes=self.report_outcomes,
                link_probe_bytes=self.link_probe_bytes,
                link_probe_steps=self.link_probe_steps,
                warmup_steps=self.warmup_steps,
                over_budget=self.over_budget)
        return self._lifecycle


class PlannedModule(nn.Module, _Planning):
    """A model's blocks, run per step under remat's plans.

    Args:
        blocks: the blocks in forward order: an ``nn.ModuleList`` or
            ``nn.Sequential`` (named "0", "1", ...), a mapping of names to
            modules, or ``(name, module)`` pairs. Blocks are registered as
            submodules of ``self.blocks``.
        planner: where plans come from; default: a ``remat.LocalPlanner``
            in this process. A ``remat.RemotePlanner`` asks ``rematd``.
        name: the model's name for the planner (the daemon keeps one state
            per name).
        feature_names: the batch features plans depend on, e.g.
            ``["batch", "seq"]``; each step gives a value for each.
        checkpointable: per block, whether it may be recomputed (default:
            all). A block whose forward is not deterministic apart from its
            RNG (or that is cheap to keep) can opt out.
        memory: where steps are measured (``memory_source_for(device)``);
            ``None``: no measurement, so COLLECT steps run the safe plan
            and report nothing, and outcomes carry no peak.
        trace: a ``remat.TraceRecorder`` that also records collected
            samples (a trace CSV for offline fitting), or ``None``.
        solver: the solver to ask for (empty: the planner's default).
        granularity: per feature, the bucket the local plan cache rounds
            it up to (match the planner's; default: the planner's default).
        cache_capacity: plans kept locally.
        preserve_rng_state: save and restore the RNG state around
            recomputes (needed for dropout to match).
        report_outcomes: report each planned step's measured peak and time
            (the planner recalibrates on them).
        copy_engine: where OFFLOAD blocks send their saved tensors (a
            ``remat.CopyEngine`` for the model's device); ``None``: no plan
            offloads.
        offload_min_bytes: saved storages smaller than this stay on the
            device (moving them costs more than it frees).
        link_probe_bytes, link_probe_steps: with a copy engine, the first
            ``link_probe_steps`` COLLECT steps also time one copy of
            ``link_probe_bytes`` each way after their backward, so the
            planner knows the host link; 0: none.
        warmup_steps: the first steps (1 by default) do not report what a
            COLLECT among them measured: they run before the optimizer's
            state and the gradients that every later step starts with
            exist, so their base (what is alive before the step) is not
            the training's. Their outcomes are reported.
        over_budget: when the planner says no plan fits a batch under its
            budget: ``"raise"`` (default), entering the step raises
            ``remat.BudgetError`` (with ``smallest_peak_bytes``) before
            anything runs, so the batch can be split (``split``,
            ``fit_batch``); ``"run"``, the step runs the safe plan over
            budget, warned about once.
        retry_on_oom, max_oom_retries: a step run by ``run_step`` that
            runs out of memory runs again under a safer plan, at most
            ``max_oom_retries`` (2) times (``run_step`` says how).
        device: the device type whose profile the planner plans from and
            adds this model's samples and outcomes to (the planner keeps
            one per device type: a plan for an H100 comes only from H100
            measurements). Default: ``memory.device_type()`` ("cpu", or
            the CUDA device's name and memory, e.g. "NVIDIA H100 80GB
            HBM3, 81559 MiB"), or none without a memory source.
    """

    def __init__(self, blocks: Blocks, **options: Any) -> None:
        super().__init__()
        named = _named_blocks(blocks)
        if not all(n and "." not in n for n in named):
            raise ValueError("blocks: names must be non-empty and "
                             "contain no '.' (they name submodules)")
        self.blocks = nn.ModuleDict(named)
        _Planning.__init__(self, list(named), **options)

    def step(self, features: Mapping[str, float], budget_bytes: int, *,
             accumulate: bool = False) -> "Step":
        """One training step under a plan, as a context manager.

        Entering asks for the plan (local cache, planner, fallbacks); the
        body runs forward (once) and backward; leaving measures and reports
        (the sample of a COLLECT step, else the outcome). An exception in
        the body propagates; its step's outcome is reported at the next
        step, never while the exception unwinds.

        Args:
            features: a value for each of ``feature_names``.
            budget_bytes: the device memory the step may use, in bytes.
            accumulate: the step adds to gradients that earlier
                micro-batches of its batch left (``split``): they are
                alive through its forward, so it is planned with them.
        """
        return self._new_step(features, budget_bytes, (), accumulate)

    def _grad_owners(self) -> List[nn.Module]:
        return [self]

    def _resident_bytes(self, tensors: Sequence[torch.Tensor]) -> int:
        return resident_bytes(self, tensors)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        step = self._step
        if step is None or not torch.is_grad_enabled():
            return self._run(None, args, kwargs)
        return step._forward(args, kwargs)

    def forward_with(self, actions: Sequence[Action], *args: Any,
                     **kwargs: Any) -> Any:
        """Runs the blocks under ``actions`` (one per block), outside any
        step: no planner, no measurement. Raises remat.Error
        (INVALID_ARGUMENT) for actions this model cannot run, OFFLOAD
        without a copy engine among them."""
        actions = list(actions)
        _core.PlanChooser.check_actions(self.spec, actions,
                                        self.copy_engine is not None,
                                        self.copy_engine is not None)
        return self._run(_Runner(self, actions), args, kwargs)

    def _run(self, runner: Optional["_Runner"], args: Tuple[Any, ...],
             kwargs: Dict[str, Any]) -> Any:
        rest = args[1:]
        value: Any = args[0] if args else None
        for i, block in enumerate(self.blocks.values()):
            call_args = args if i == 0 else \
                ((*value, *rest) if isinstance(value, tuple)
                 else (value, *rest))
            if runner is None:
                value = block(*call_args, **kwargs)
            else:
                value = runner.run_block(i, block, block, call_args, kwargs)
        if runner is not None:
            runner.end_forward()
        return value

class _Runner:
    """Runs blocks under one plan's actions and records what ran; with a
    sampler (a COLLECT step), measures each block as it is computed."""

    def __init__(self, owner: PlannedModule, actions: List[Action],
                 sampler: Optional[_core.BlockSampler] = None,
                 copies_out_landed: Sequence[int] = ()) -> None:
        self.owner = owner
        self.actions = actions
        # Before block i, the copies out of the blocks below
        # copies_out_landed[i] have landed (remat.Plan.copies_out_landed).
        self.copies_out_landed = list(copies_out_landed)
        # The blocks that sent copies out no wait has seen yet.
        self._sent: Deque[Tuple[int, _core.OffloadGroup]] = deque()
        self.sampler = sampler
        self.actions_run: List[Optional[Action]] = [None] * len(actions)
        self.recomputes: List[int] = [0] * len(actions)
        self.offloader: Optional[_core.Offloader] = None
        self.below: Optional[_core.OffloadGroup] = None  # offloaded just now
        self._group: Optional[_core.OffloadGroup] = None  # of the last OFFLOAD
        # How long blocks waited for the copies copies_out_landed counts
        # landed (not the wait at the end of forward, which the memory
        # model predicts).
        self.copy_wait_ns = 0

    def run_block(self, i: int, block: nn.Module, call: Callable[..., Any],
                  args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """Runs block i (`block`, called as `call`: the module itself, or
        its own forward when remat is applied in place) under its action."""
        # The memory model counts these copies off the device from block i
        # on: a step faster than the estimates waits here rather than hold
        # more than the plan predicts.
        if i < len(self.copies_out_landed):
            while self._sent and self._sent[0][0] < self.copies_out_landed[i]:
                waiting = time.perf_counter_ns()
                self._sent.popleft()[1].wait_copies_out()
                self.copy_wait_ns += time.perf_counter_ns() - waiting
        out = self._run_block(i, block, call, args, kwargs)
        if self.below is not None:
            # The offloaded block below comes back as this one's backward
            # begins.
            below, self.below = self.below, None
            out = _map_first_grad_tensor(
                out, lambda t: _core.prefetch_on_backward(t, below))
        if self.actions_run[i] in (Action.OFFLOAD, Action.RECOMPUTE_OFFLOAD):
            self.below = self._group
            if self._group is not None:
                self._sent.append((i, self._group))
        return out

    def release(self) -> None:
        """After a failed run: lets every copy out land and drops what
        refers to host copies."""
        if self.offloader is not None:
            self.offloader.wait_copies_out()
        self._sent.clear()
        self.below = self._group = self.offloader = None

    def end_forward(self) -> None:
        """Backward begins once every copy out has landed (the memory
        model's end of forward); the last block's copy back starts then."""
        if self.offloader is not None:
            self.offloader.wait_copies_out()
        if self.below is not None:
            self.below.prefetch()
            self.below = None
        if self.sampler is not None:
            self.sampler.end_forward()  # what follows is the step's tail

    def _run_block(self, i: int, block: nn.Module, call: Callable[..., Any],
                   args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        action = self.actions[i]
        sampler = self.sampler
        if action == Action.KEEP:
            self.actions_run[i] = action
            if sampler is None:
                return call(*args, **kwargs)
            self._count_transfer(i, block, call, args, kwargs)
            sampler.before_block(i, _tensor_bytes(_block_input(args, kwargs)))
            out = call(*args, **kwargs)
            sampler.after_block(i)
            return out
        if action == Action.RECOMPUTE_OFFLOAD and self._sends_checkpoint(
                i, args, kwargs):
            self.actions_run[i] = action
            return self._recompute_offload(i, block, call, args, kwargs)
        if action in (Action.RECOMPUTE, Action.RECOMPUTE_OFFLOAD):
            self.actions_run[i] = Action.RECOMPUTE
            return self._recompute(i, block, call, args, kwargs)
        if action == Action.OFFLOAD:
            self.actions_run[i] = action
            return self._offload(i, block, call, args, kwargs)
        raise Error("INVALID_ARGUMENT", f"block {i}: unknown action {action}")

    def _count_transfer(self, i: int, block: nn.Module,
                        call: Callable[..., Any], args: Tuple[Any, ...],
                        kwargs: Dict[str, Any]) -> None:
        """Tells the sampler what OFFLOAD would move for block i, as the C++
        runtime's MeasureTransfer counts it: the storages autograd saves
        while the block runs, each once, less those of its inputs,
        parameters, buffers and outputs and those under offload_min_bytes.
        Only with a copy engine. Counted in a forward of its own, before
        the measured one (inside checkpoint, whose own hooks would otherwise
        see the saves), with the RNG state put back after it."""
        if self.owner.copy_engine is None:
            return
        tensors = [t for t in (*_tensors_in(args), *_tensors_in(kwargs),
                               *block.parameters(), *block.buffers())]
        stays = {_storage_key(t) for t in tensors}
        min_bytes = self.owner.offload_min_bytes
        # Held until the count is done, so that no other storage takes the
        # address of one counted.
        counted: Dict[int, torch.UntypedStorage] = {}

        def pack(t: torch.Tensor) -> None:
            key = _storage_key(t)
            if key is not None and key not in stays:
                storage = t.untyped_storage()
                if storage.nbytes() >= min_bytes:
                    counted.setdefault(key, storage)

        cuda = sorted({t.device.index or 0 for t in tensors
                       if t.device.type == "cuda"})
        with torch.random.fork_rng(devices=cuda), torch.enable_grad(), \
                saved_tensors_hooks(pack, lambda _: None):
            out = call(*args, **kwargs)
        for t in (out if isinstance(out, tuple) else (out,)):
            if isinstance(t, torch.Tensor):
                counted.pop(_storage_key(t), None)
        self.sampler.transfer_bytes(
            i, sum(s.nbytes() for s in counted.values()))

    def _offload(self, i: int, block: nn.Module, call: Callable[..., Any],
                 args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        engine = self.owner.copy_engine
        if engine is None:
            raise Error("FAILED_PRECONDITION",
                        f"block {i} ({self.owner.spec.blocks[i].name}): "
                        "OFFLOAD needs a copy engine (PlannedModule("
                        "copy_engine=remat.CopyEngine(device)))")
        if self.offloader is None:
            self.offloader = _core.Offloader(engine,
                                             self.owner.offload_min_bytes)
        offloader = self.offloader
        stays = _tensors_in(args) + _tensors_in(kwargs)
        stays += list(block.parameters()) + list(block.buffers())
        offloader.begin_block(stays)
        out = None
        try:
            with saved_tensors_hooks(offloader.pack, _unpack):
                out = call(*args, **kwargs)
        finally:
            outputs = [t for t in (out if isinstance(out, tuple) else (out,))
                       if isinstance(t, torch.Tensor)]
            self._group = offloader.end_block(outputs)
        return out

    def _sends_checkpoint(self, i: int, args: Tuple[Any, ...],
                          kwargs: Dict[str, Any]) -> bool:
        """Whether block i's RECOMPUTE_OFFLOAD acts (see the module's
        docstring)."""
        if self.owner.copy_engine is None:
            raise Error("FAILED_PRECONDITION",
                        f"block {i} ({self.owner.spec.blocks[i].name}): "
                        "RECOMPUTE_OFFLOAD needs a copy engine (PlannedModule("
                        "copy_engine=remat.CopyEngine(device)))")
        if i == 0 or self.actions[i - 1] not in (Action.RECOMPUTE,
                                                  Action.RECOMPUTE_OFFLOAD):
            return False
        if not torch.is_grad_enabled():
            return False
        if any(t.requires_grad for t in _tensors_in(kwargs)):
            return False
        # Reentrant checkpointing passes gradients to tensor arguments only:
        # one inside a tuple (Llama's position embeddings) would get none.
        if any(not isinstance(a, torch.Tensor) and
               any(t.requires_grad for t in _tensors_in(a)) for a in args):
            return False
        return any(isinstance(a, torch.Tensor) and a.requires_grad
                   for a in args)

    def _recompute_offload(self, i: int, block: nn.Module,
                           call: Callable[..., Any], args: Tuple[Any, ...],
                           kwargs: Dict[str, Any]) -> Any:
        if self.offloader is None:
            self.offloader = _core.Offloader(self.owner.copy_engine,
                                             self.owner.offload_min_bytes)
        offloader = self.offloader
        # Reentrant checkpointing takes no keyword arguments: bound here.
        run = self._checkpointed(i, block, call, kwargs)
        # Keyword tensors, parameters and buffers stay; the positional
        # inputs (the checkpoint, saved by reentrant checkpointing) go.
        stays = _tensors_in(kwargs)
        stays += list(block.parameters()) + list(block.buffers())
        offloader.begin_block(stays)
        out = None
        try:
            with saved_tensors_hooks(offloader.pack, _unpack):
                out = checkpoint(run, *args, use_reentrant=True,
                                 preserve_rng_state=self.owner.preserve_rng_state)
        finally:
            outputs = [t for t in (out if isinstance(out, tuple) else (out,))
                       if isinstance(t, torch.Tensor)]
            self._group = offloader.end_block(outputs)
        self._measure_backward(i, args, kwargs)
        return out

    def _checkpointed(self, i: int, block: nn.Module, call: Callable[..., Any],
                      bound: Dict[str, Any]) -> Callable[..., Any]:
        """Block i as checkpointing calls it (with `bound` keyword
        arguments): the first call is the forward, later ones recompute
        (counted); in a COLLECT step the forward counts what OFFLOAD would
        move and the recompute is measured."""
        sampler = self.sampler
        calls = [0]

        def run(*a: Any, **k: Any) -> Any:
            k = {**bound, **k}
            calls[0] += 1
            if calls[0] == 1:
                if sampler is not None:
                    self._count_transfer(i, block, call, a, k)
                return call(*a, **k)  # forward: nothing is saved
            self.recomputes[i] += 1
            with _running_stats_kept(block):
                if sampler is None:
                    return call(*a, **k)
                sampler.before_block(i, _tensor_bytes(_block_input(a, k)))
                out = call(*a, **k)
                # The output is alive here, as it is in a KEEP block's
                # forward: the block's activations are what it saved plus
                # its output.
                sampler.after_block(i)
                return out

        return run

    def _measure_backward(self, i: int, args: Tuple[Any, ...],
                          kwargs: Dict[str, Any]) -> None:
        """In a COLLECT step, block i's backward is done when the gradient
        of its input is (then its workspace window closes)."""
        sampler = self.sampler
        first = _block_input(args, kwargs)
        if (sampler is not None and isinstance(first, torch.Tensor) and
                first.requires_grad):
            first.register_hook(
                lambda grad: (sampler.after_backward(i), grad)[1])

    def _recompute(self, i: int, block: nn.Module, call: Callable[..., Any],
                   args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        run = self._checkpointed(i, block, call, {})
        preserve = self.owner.preserve_rng_state
        if self.sampler is None:
            return checkpoint(run, *args, use_reentrant=False,
                              preserve_rng_state=preserve, **kwargs)
        # Collecting: the whole block is recomputed (no early stop), so its
        # activations are measured whole.
        with set_checkpoint_early_stop(False):
            out = checkpoint(run, *args, use_reentrant=False,
                             preserve_rng_state=preserve, **kwargs)
        self._measure_backward(i, args, kwargs)
        return out


class _InPlaceRun:
    """Runs a model's blocks as its own forward calls them (apply): each
    block once, in the declared order. Needs ``_owner``, ``_runner``,
    ``_next_block`` and ``_misused``."""

    def _block(self, i: int, block: nn.Module, call: Callable[..., Any],
               args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """Block i of a model under apply, called by the model's forward.
        A block out of order is an error before it runs (and marks the run
        misused: a step then reports nothing)."""
        names = [b.name for b in self._owner.spec.blocks]
        if i != self._next_block:
            self._misused = True
            if i < self._next_block:
                raise Error(
                    "FAILED_PRECONDITION",
                    f"block '{names[i]}' ran twice in one step: a step runs "
                    "the model's forward once (begin a step per batch), and "
                    "remat.torch.apply takes blocks that forward calls once "
                    "each")
            raise Error(
                "FAILED_PRECONDITION",
                f"block '{names[i]}' ran before block '{names[self._next_block]}': "
                "give remat.torch.apply the blocks in the order the model's "
                "forward calls them, and only blocks it calls on every "
                "batch")
        self._next_block += 1
        out = self._runner.run_block(i, block, call, args, kwargs)
        if self._next_block == len(names):
            self._runner.end_forward()
        return out


    def _check_all_ran(self) -> None:
        """At the end of a run without an exception: every block ran."""
        names = [b.name for b in self._owner.spec.blocks]
        if self._next_block == 0:
            self._misused = True
            raise Error("FAILED_PRECONDITION",
                        "the step ended without running any of its "
                        f"blocks ({names[0]}, ...): call the model's "
                        "forward, with gradients enabled, inside "
                        "`with handle.step(...)`")
        if self._next_block < len(names):
            self._misused = True
            raise Error("FAILED_PRECONDITION",
                        f"block '{names[self._next_block]}' (and any "
                        "after it) never ran in this step: give "
                        "remat.torch.apply only the blocks the model's "
                        "forward calls on every batch")


class Step(_InPlaceRun):
    """One step under a plan (``PlannedModule.step``).

    Attributes:
        choice: the plan choice (actions, source, predicted peak, solver).
        actions: the actions the plan asked for, one per block.
        actions_run: the actions that ran, one per block (None for a block
            that did not run), filled in by forward.
        recomputes: per block, how often backward recomputed it.
        copy_wait_ns: how long forward waited before blocks for the copies
            to host its plan counts landed (Plan.copies_out_landed); the
            outcome reports it for a plan that sends copies (rematd's
            rematd_copy_wait_seconds_total).
        sample: the sample a finished COLLECT step measured, or None.
        measured_peak_bytes: the step's measured peak (needs a memory
            source), once finished.
        error: what reporting failed with, if it did (training goes on).
    """

    def __init__(self, owner: _Planning, features: List[float],
                 budget_bytes: int,
                 inputs: Sequence[torch.Tensor] = (),
                 held_bytes: int = 0,
                 session: Optional[_core.StepSession] = None) -> None:
        self._owner = owner
        # The batch's tensors, alive before the step (apply's steps).
        self._inputs = list(inputs)
        self.features = features
        self.budget_bytes = budget_bytes
        # The one step lifecycle (client/step_lifecycle.h), as the C++
        # runtime runs it: reports what an unwound step left, then plans.
        self._held_bytes = held_bytes
        self._session: _core.StepSession = session if session is not None \
            else owner._step_lifecycle().begin(features, budget_bytes,
                                               held_bytes)
        self.retries = 0
        self.choice: _core.PlanChoice = self._session.choice
        self.actions: List[Action] = list(self.choice.actions)
        self._runner = _Runner(owner, self.actions,
                               copies_out_landed=list(
                                   self.choice.copies_out_landed))
        self.error: Optional[Exception] = None
        self._device = torch.device("cpu")  # where the link probe lives
        # In place: the next block the model's forward should call, and
        # whether remat was misused in this step (then nothing is reported).
        self._next_block = 0
        self._misused = False

    @property
    def sample(self) -> Optional[_core.Sample]:
        return self._session.sample

    @property
    def measured_peak_bytes(self) -> Optional[int]:
        return self._session.measured_peak_bytes

    @property
    def actions_run(self) -> List[Optional[Action]]:
        return self._runner.actions_run

    @property
    def recomputes(self) -> List[int]:
        return self._runner.recomputes

    @property
    def copy_wait_ns(self) -> int:
        return self._runner.copy_wait_ns

    @property
    def collect(self) -> bool:
        return self.choice.collect

    @property
    def source(self) -> PlanSource:
        return self.choice.source

    def __enter__(self) -> "Step":
        owner = self._owner
        if owner._in_place:
            owner._check_blocks()
            self._begin(self._inputs)
        owner._step = self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        owner = self._owner
        owner._step = None
        if owner._in_place and not self._misused and exc_type is None:
            try:
                self._check_all_ran()
            finally:
                if self._misused:
                    self._abandon()
        if self._misused:
            self._abandon()
            return
        if exc_type is not None and issubclass(exc_type,
                                               torch.OutOfMemoryError):
            self._fail_out_of_memory()
            return
        self._finish(unwinding=exc_type is not None)

    # -- forward ------------------------------------------------------------

    def _forward(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        if self._session.started:
            raise RuntimeError("PlannedModule: forward runs once per step; "
                               "begin a new step for the next batch")
        self._begin(_tensors_in(args) + _tensors_in(kwargs))
        return self._owner._run(self._runner, args, kwargs)

    def _begin(self, tensors: Sequence[torch.Tensor]) -> None:
        """Starts measuring: what is alive now (`tensors`, the model, ...)
        is the step's base."""
        owner = self._owner
        self._device = next((t.device for t in tensors), torch.device("cpu"))
        memory = owner.memory
        resident = owner._resident_bytes(tensors) \
            if memory is not None and not memory.absolute() else 0
        self._runner.sampler = self._session.start(resident)

    def _fail_out_of_memory(self) -> None:
        """Ends a step that ran out of memory: its copies to host in flight
        land and are let go, and its outcome is reported now (so that a
        retry's plan knows)."""
        self._runner.release()
        try:
            self._session.fail_out_of_memory(self._runner.copy_wait_ns)
        except Error as e:
            self.error = e  # warned about once; training goes on

    def _retry(self) -> "Step":
        """A step for the same batch after this one ran out of memory
        (StepLifecycle.retry)."""
        session = self._owner._step_lifecycle().retry(self._session)
        return Step(self._owner, self.features, self.budget_bytes,
                    self._inputs, self._held_bytes, session)

    def _abandon(self) -> None:
        """Stops measuring a step that remat was misused in: nothing is
        reported."""
        self._session.discard()

    def _probe_link(self, nbytes: int) -> Optional[Tuple[float, float]]:
        """Times the host link with `nbytes` on the step's device (after a
        COLLECT step's backward, for its sample)."""
        probe = torch.zeros(nbytes, dtype=torch.uint8, device=self._device)
        try:
            return self._owner.copy_engine.measure_link(probe)
        except Error:
            return None  # e.g. a full host pool: the sample is good without

    # -- finishing ----------------------------------------------------------

    def _finish(self, unwinding: bool) -> None:
        session = self._session
        if session.finished:
            return
        wait_ns = self._runner.copy_wait_ns
        if unwinding:
            session.unwind(wait_ns)
            return
        probe = self._probe_link if self._owner.copy_engine is not None \
            else None
        try:
            session.finish(wait_ns, probe)
        except Error as e:
            self.error = e  # warned about once; training goes on


# -- in place --------------------------------------------------------------


class _BlockForward:
    """A block's forward while remat is applied: an attribute of the block
    that shadows its class's forward, so that its ``__call__`` (hooks
    included) and the model's own forward stay as they are. Inside a step
    it runs the block under the step's plan; outside one, as before."""

    def __init__(self, handle: "Applied", index: int, module: nn.Module,
                 call: Callable[..., Any]) -> None:
        self.handle = handle
        self.index = index
        self.module = module
        self.call = call  # the forward it shadows
        self._signature: Optional[inspect.Signature] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        step = self.handle._step
        if step is None or not torch.is_grad_enabled():
            return self.call(*args, **kwargs)
        if self._signature is None:
            self._signature = inspect.signature(self.call)
        args, kwargs = _without_cache(self.module, self._signature, args,
                                      kwargs)
        return step._block(self.index, self.module, self.call, args, kwargs)

    def __reduce__(self) -> Any:
        # A pickled (or deep-copied) model is the model without remat: its
        # blocks run their own forward.
        return (getattr, (self.module, "forward"))


# The parameters in which Hugging Face's layers take their KV cache.
_CACHE_PARAMETERS = ("past_key_values", "layer_past")


def _without_cache(module: nn.Module, signature: inspect.Signature,
                   args: Tuple[Any, ...], kwargs: Dict[str, Any]
                   ) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """A Hugging Face layer's arguments without its KV cache (positional or
    keyword), as its own checkpointing runs it: a layer that writes the
    cache would write it again when recomputed, and a training step reads
    no cache. Other blocks' arguments as they are."""
    if getattr(module, "_can_checkpoint_with_cache", True):
        return args, kwargs
    bound = signature.bind_partial(*args, **kwargs)
    for name in _CACHE_PARAMETERS:
        if bound.arguments.get(name) is not None:
            bound.arguments[name] = None
    if bound.arguments.get("use_cache"):
        bound.arguments["use_cache"] = False
    return bound.args, bound.kwargs


def _hf_checkpointing(module: nn.Module) -> bool:
    """Whether Hugging Face's gradient checkpointing is on in `module`."""
    return any(getattr(m, "gradient_checkpointing", False) is True
               for m in module.modules())


def _optimizer_tensors(optimizer: Optional[torch.optim.Optimizer]
                       ) -> List[torch.Tensor]:
    if optimizer is None:
        return []
    return [t for state in optimizer.state.values()
            for t in _tensors_in(state)]


class Applied(_Planning):
    """A model whose blocks run under remat's plans, in place
    (``remat.torch.apply``). Steps, options and attributes are
    ``PlannedModule``'s; the model itself is unchanged.

    Attributes:
        blocks: the blocks, in the order the model's forward calls them.
        model, optimizer: what ``apply`` was given (or None).
    """

    _in_place = True

    def __init__(self, named: List[Tuple[str, nn.Module]],
                 model: Optional[nn.Module],
                 optimizer: Optional[torch.optim.Optimizer],
                 options: Dict[str, Any]) -> None:
        _Planning.__init__(self, [n for n, _ in named], **options)
        self.blocks = [m for _, m in named]
        self.model = model
        self.optimizer = optimizer
        self._check_blocks()
        if model is None and self.memory is not None and \
                not self.memory.absolute():
            warnings.warn(
                "remat.torch.apply: without model=, a step on this memory "
                "source counts the blocks' parameters and the batch only, "
                "not the rest of the model (embeddings, head) nor the "
                "optimizer's state; pass model= and optimizer= so that "
                "budget_bytes bounds everything the step holds",
                stacklevel=3)
        for i, module in enumerate(self.blocks):
            module.forward = _BlockForward(self, i, module, module.forward)

    def step(self, features: Mapping[str, float], budget_bytes: int, *,
             inputs: Any = (), accumulate: bool = False) -> Step:
        """One training step under a plan, as a context manager: run the
        model's forward (once) and backward inside it.

        Args:
            features: a value for each of ``feature_names``.
            budget_bytes: the device memory the whole step may use, in
                bytes: parameters, gradients, optimizer state, the batch,
                and every activation inside and outside the blocks.
            inputs: the batch's tensors (a tensor, or a tuple, list or dict
                of them, e.g. a tokenizer's output), alive before the step:
                counted in it on a relative memory source (the CPU's).
            accumulate: the step adds to gradients that earlier
                micro-batches of its batch left (``split``): they are
                alive through its forward, so it is planned with them.
        """
        return self._new_step(features, budget_bytes, inputs, accumulate)

    def _grad_owners(self) -> List[nn.Module]:
        return [self.model] if self.model is not None else self.blocks

    def with_actions(self, actions: Sequence[Action]) -> "_Forced":
        """A context manager in which the model's forward runs its blocks
        under ``actions`` (one per block), outside any step: no planner, no
        measurement (``PlannedModule.forward_with``). Raises remat.Error
        (INVALID_ARGUMENT) for actions this model cannot run, OFFLOAD
        without a copy engine among them."""
        return _Forced(self, actions)

    def measure_peak_bytes(self, run: Callable[[], Any],
                           actions: Optional[Sequence[Action]] = None, *,
                           inputs: Any = ()) -> int:
        """The whole-step peak of ``run()`` (a forward and backward of the
        model), measured as a step measures it, with the blocks under
        ``actions`` (default: every block KEEP, the model without
        checkpointing), outside any step. What a budget is a fraction of.
        Needs a memory source; ``inputs`` as ``step``'s. The gradients run()
        leaves are dropped."""
        memory = self.memory
        if memory is None:
            raise Error("FAILED_PRECONDITION", "measure_peak_bytes needs a "
                        "memory source (apply(..., memory=...))")
        if actions is None:
            actions = [Action.KEEP] * len(self.blocks)
        resident = 0 if memory.absolute() else \
            self._resident_bytes(_tensors_in(inputs))

        def forced() -> None:
            with self.with_actions(actions):
                run()

        peak = peak_bytes_of(forced, memory, resident)
        for module in [self.model] if self.model is not None else \
                self.blocks:
            module.zero_grad(set_to_none=True)
        return peak

    def remove(self) -> None:
        """Restores the blocks' own forward: the model is as it was before
        ``apply``. Idempotent."""
        if self._step is not None:
            raise RuntimeError("remat.torch.remove: a step is running; "
                               "remove after it")
        for module in self.blocks:
            wrapper = module.__dict__.get("forward")
            if isinstance(wrapper, _BlockForward) and wrapper.handle is self:
                del module.forward
                if wrapper.call != getattr(module, "forward"):
                    module.forward = wrapper.call  # someone else's, kept

    def _check_blocks(self) -> None:
        for spec, module in zip(self.spec.blocks, self.blocks):
            if _hf_checkpointing(module):
                raise Error(
                    "FAILED_PRECONDITION",
                    f"block '{spec.name}' has Hugging Face's gradient "
                    "checkpointing on: two checkpointing layers nest badly. "
                    "Turn it off (model.activation_checkpointing_disable()); "
                    "remat recomputes what each step's plan says")

    def _resident_bytes(self, tensors: Sequence[torch.Tensor]) -> int:
        return _resident(self._grad_owners(), [*tensors,
                                   *_optimizer_tensors(self.optimizer)])


class _Forced(_InPlaceRun):
    """``Applied.with_actions``: one forward under fixed actions."""

    def __init__(self, owner: Applied, actions: Sequence[Action]) -> None:
        actions = list(actions)
        _core.PlanChooser.check_actions(owner.spec, actions,
                                        owner.copy_engine is not None,
                                        owner.copy_engine is not None)
        self._owner = owner
        self._runner = _Runner(owner, actions)
        self._next_block = 0
        self._misused = False

    def __enter__(self) -> "_Forced":
        if self._owner._step is not None:
            raise RuntimeError("with_actions: a step is running")
        self._owner._check_blocks()
        self._owner._step = self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._owner._step = None
        if exc_type is None and not self._misused:
            self._check_all_ran()


def _applied_blocks(blocks: Union[Blocks, Sequence[nn.Module]],
                    model: Optional[nn.Module]
                    ) -> List[Tuple[str, nn.Module]]:
    """(name, module) per block: a module's name in `model` when given,
    else its index or the name it was given."""
    if isinstance(blocks, nn.Module) and not isinstance(
            blocks, (nn.ModuleList, nn.Sequential, nn.ModuleDict)):
        raise TypeError("blocks: expected an nn.ModuleList, nn.Sequential, "
                        "nn.ModuleDict, a list of modules or (name, module) "
                        f"pairs, got {type(blocks).__name__}")
    items = list(blocks.items()) if isinstance(
        blocks, (Mapping, nn.ModuleDict)) else list(blocks)
    modules = [m[1] if isinstance(m, tuple) and len(m) == 2 else m
               for m in items]
    ids = [id(m) for m in modules]
    for i, module in enumerate(modules):
        if not isinstance(module, nn.Module):
            continue  # _named_blocks says what is wrong
        if ids.index(id(module)) != i:
            raise ValueError(f"blocks[{i}] is blocks[{ids.index(id(module))}]"
                             " again; each block runs once per forward")
        inner = {id(m) for m in module.modules()} - {id(module)}
        nested = [j for j, other in enumerate(ids) if other in inner]
        if nested:
            raise ValueError(f"blocks[{nested[0]}] lies inside blocks[{i}]; "
                             "give blocks that do not contain each other")
        if isinstance(module.__dict__.get("forward"), _BlockForward):
            raise ValueError(f"blocks[{i}] is already under remat; remove "
                             "that handle first (remat.torch.remove)")
    if items and all(isinstance(m, nn.Module) for m in items):
        qualified = {id(m): n for n, m in model.named_modules()} \
            if model is not None else {}
        missing = [i for i, m in enumerate(items)
                   if model is not None and id(m) not in qualified]
        if missing:
            raise ValueError(f"blocks[{missing[0]}] is not a submodule of "
                             "model=; give the blocks of that model")
        items = [(qualified.get(id(m), str(i)), m)
                 for i, m in enumerate(items)]
    named = _named_blocks(items)
    return list(named.items())


def apply(blocks: Union[Blocks, Sequence[nn.Module]], *,
          model: Optional[nn.Module] = None,
          optimizer: Optional[torch.optim.Optimizer] = None,
          **options: Any) -> Applied:
    """Runs an existing model's blocks under remat's plans, in place.

    The model's own forward runs unchanged: inside ``with
    handle.step(features, budget_bytes):`` each block runs under the step's
    plan (KEEP, RECOMPUTE, OFFLOAD, RECOMPUTE_OFFLOAD; COLLECT's
    measurements), outside a step as before. Parameters, ``state_dict()``
    keys, ``.to()``, optimizers and ``torch.save`` see the model as
    without remat; ``remove(handle)`` restores it::

        model = LlamaForCausalLM(config)
        optimizer = torch.optim.AdamW(model.parameters())
        handle = remat.torch.apply(model.model.layers, model=model,
                                   optimizer=optimizer, name="llama",
                                   feature_names=["batch", "seq"],
                                   memory=memory_source_for("cpu"))
        for batch in loader:
            b, s = batch["input_ids"].shape
            with handle.step({"batch": b, "seq": s}, budget, inputs=batch):
                model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    Args:
        blocks: the blocks in the order the model's forward calls them,
            each once per forward: an ``nn.ModuleList`` (e.g.
            ``model.model.layers``), an ``nn.Sequential``, a list of
            modules (e.g. a ResNet's bottlenecks across its stages), a
            mapping of names to modules, or ``(name, module)`` pairs.
            Blocks may take any arguments (tensors, tuples of tensors,
            masks, None, Python values) and return a tensor or a tuple.
        model: the whole model: names the blocks (``model.layers.0``) and,
            on a relative memory source (the CPU's), its parameters,
            gradients and buffers count in every step's budget.
        optimizer: its state counts in every step's budget likewise.
        options: ``PlannedModule``'s keywords (planner, name,
            feature_names, checkpointable, memory, trace, solver,
            granularity, cache_capacity, preserve_rng_state,
            report_outcomes, copy_engine, offload_min_bytes,
            link_probe_bytes, link_probe_steps, warmup_steps).

    Raises remat.Error (FAILED_PRECONDITION) when a block has Hugging
    Face's gradient checkpointing on; inside a step, when a block runs out
    of the declared order, twice, or not at all (nothing of that step is
    reported).
    """
    return Applied(_applied_blocks(blocks, model), model, optimizer, options)


def remove(handle: Applied) -> None:
    """Restores the model ``apply`` changed (``handle.remove()``)."""
    handle.remove()
