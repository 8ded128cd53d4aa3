#!/usr/bin/env python3
"""bench/python/peers.py: remat beside what a PyTorch user would pick
instead, on a Hugging Face Llama (random weights) trained on batches of
varying length under one absolute memory budget.

Every strategy trains its own copy of the model (the same initial weights,
AdamW) on the same batches in lockstep: batch k runs on every strategy, in
an order that rotates with k, before batch k+1 runs on any, so a machine
whose speed drifts slows them alike. The steps are split into --rounds
rounds; each strategy reports its throughput relative to `none` over each
round, their median and spread, beside the ratio over all steps.

A step's peak is everything it holds, as remat's budget means it: the
model's parameters and gradients, the optimizer's state, the batch, and
every activation inside and outside the layers (on the CPU, LibTorch's
allocator as remat's tracker counts it; on a GPU, CUDA's allocator,
counted from where the step begins plus the strategy's own model,
optimizer state and batch, since every strategy's model is on the one
device).

Strategies:
  none          no checkpointing
  hf_all        Hugging Face's activation checkpointing of every layer
  hf_every_2    the same for every second layer (every_n_layers=2)
  sac           every layer under PyTorch's selective activation
                checkpointing, saving matmul outputs and recomputing the
                rest (torchtitan's per-op mode)
  save_on_cpu   torch.autograd.graph.save_on_cpu around forward (on the
                CPU it copies what it saves within host memory)
  compile_budget torch.compile(model, dynamic=True) under
                torch._functorch.config.activation_memory_budget: the
                largest of --compile-budgets whose measured peak at the
                longest length fits the budget, found before the run by
                bisection, as a user would tune it (the search's and the
                compile's time are reported, not counted)
  remat         remat.torch.apply on the layers: a plan per batch
  remat_offload the same with a copy engine (on the CPU over an emulated
                host link of the machine's FLOP/s times 6.5e-5 bytes/s,
                an H200's ratio to PCIe Gen5, as bench:e2e does)
  remat_compiled remat's plans with each layer's forward compiled by
                torch.compile(dynamic=True) (compiled before the run:
                compile time reported, not counted)
  hindsight     the limit for a planner of this kind: the exact plan for
                each batch from its own measured per-layer quantities
                (measured before the run, one step per distinct length),
                no collect steps, no bounds, no calibration; remat's
                distance to it is what learning costs

Prints one JSON line per strategy, then a table.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import random
import statistics
import sys
import time
from typing import Callable, Dict, List, Sequence

import torch
import torch._functorch.config as functorch_config
from torch.utils.checkpoint import (CheckpointPolicy,
                                    create_selective_checkpoint_contexts)
from transformers import LlamaConfig, LlamaForCausalLM

import remat
import remat.torch

STRATEGIES = ["none", "hf_all", "hf_every_2", "sac", "save_on_cpu",
              "compile_budget", "remat", "remat_offload", "remat_compiled",
              "hindsight"]

# Matmuls whose outputs selective checkpointing saves.
_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
            torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default}


def _save_matmuls(ctx, op, *args, **kwargs):
    return (CheckpointPolicy.MUST_SAVE if op in _MATMULS
            else CheckpointPolicy.PREFER_RECOMPUTE)


def draw_lengths(steps: int, median: float, max_seq: int,
                 seed: int) -> List[int]:
    """Log-normal lengths (sigma 0.55), clipped to [32, max_seq]."""
    rng = random.Random(seed)
    return [min(max_seq, max(32, round(rng.lognormvariate(math.log(median),
                                                          0.55))))
            for _ in range(steps)]


def emulated_link_bytes_per_s() -> float:
    """This machine's float matmul FLOP/s times an H200's bytes per FLOP
    over PCIe Gen5 (64e9 / 989e12)."""
    a = torch.randn(512, 512)
    a @ a
    start = time.perf_counter()
    for _ in range(8):
        a @ a
    flops = 8 * 2 * 512 ** 3 / (time.perf_counter() - start)
    return flops * 64e9 / 989e12


class Runner:
    """One strategy: its model, optimizer and how it runs a step."""

    def __init__(self, name: str, model: LlamaForCausalLM,
                 memory: remat.MemorySource, device: torch.device,
                 link_bytes_per_s: float = 0,
                 compile_fraction: float = 1.0) -> None:
        self.name = name
        self.model = model
        self.device = device
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.memory = memory
        self.handle = None
        self.compiled = None
        self.compile_fraction = compile_fraction
        self.plans: Dict[int, List[remat.Action]] = {}  # hindsight's
        self.extra: Dict[str, object] = {}  # more for its JSON line
        self.ms: List[float] = []
        self.peaks: List[int] = []
        self.recomputed: List[int] = []
        self.collect = 0
        if name == "hf_all":
            model.activation_checkpointing_enable()
        elif name == "hf_every_2":
            model.activation_checkpointing_enable(every_n_layers=2)
        elif name == "sac":
            model.activation_checkpointing_enable({
                "use_reentrant": False,
                "context_fn": functools.partial(
                    create_selective_checkpoint_contexts, _save_matmuls)})
        elif name == "compile_budget":
            self.compiled = torch.compile(model, dynamic=True)
        elif name.startswith("remat") or name == "hindsight":
            if name == "remat_compiled":
                for layer in model.model.layers:
                    layer.forward = torch.compile(layer.forward, dynamic=True)
            engine = None
            if name == "remat_offload":
                engine = remat.CopyEngine(device.type) if device.type != \
                    "cpu" else remat.CopyEngine(
                        "cpu", link_bytes_per_s=link_bytes_per_s)
            # A 1 MiB link probe: the emulated link is slow (the machine's
            # FLOP/s times 6.5e-5), and the probe runs in collect steps.
            # A batch no plan fits runs over budget (and is counted so), as
            # every other strategy's does: the same batches for all.
            self.handle = remat.torch.apply(
                model.model.layers, model=model, optimizer=self.optimizer,
                name=name, feature_names=["batch", "seq"], memory=memory,
                copy_engine=engine, link_probe_bytes=1 << 20,
                over_budget="run")

    @property
    def plans_per_batch(self) -> bool:
        """remat's strategies: a step under the planner's plan."""
        return self.handle is not None and self.name != "hindsight"

    def resident_bytes(self, batch: Dict[str, torch.Tensor]) -> int:
        state = [t for s in self.optimizer.state.values()
                 for t in s.values() if isinstance(t, torch.Tensor)]
        return remat.torch.resident_bytes(self.model,
                                          [*batch.values(), *state])

    def step(self, batch: Dict[str, torch.Tensor], budget: int) -> None:
        start = time.perf_counter()
        b, s = batch["input_ids"].shape
        if self.plans_per_batch:
            with self.handle.step({"batch": b, "seq": s}, budget,
                                  inputs=batch) as step:
                self.model(**batch).loss.backward()
            peak = step.measured_peak_bytes
            self.collect += step.collect
            actions = step.actions
        else:
            actions = self.plans.get(s, [])
            peak = remat.torch.peak_bytes_of(
                lambda: self.forward_backward(batch, actions), self.memory,
                self.resident_bytes(batch))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.ms.append((time.perf_counter() - start) * 1e3)
        self.peaks.append(peak)
        self.recomputed.append(sum(
            a in (remat.RECOMPUTE, remat.RECOMPUTE_OFFLOAD) for a in actions))

    def forward_backward(self, batch: Dict[str, torch.Tensor],
                         actions: Sequence[remat.Action] = ()) -> None:
        if self.name == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu(
                    pin_memory=self.device.type == "cuda"):
                loss = self.model(**batch).loss
        elif self.compiled is not None:
            with functorch_config.patch(
                    activation_memory_budget=self.compile_fraction):
                loss = self.compiled(**batch).loss
        elif self.name == "hindsight":
            with self.handle.with_actions(actions):
                loss = self.model(**batch).loss
        else:
            loss = self.model(**batch).loss
        loss.backward()

    def warm_up(self, batch: Dict[str, torch.Tensor]) -> None:
        """Compiles what a compiled strategy runs (every variant a step may
        take), untimed and leaving the model as it was; the time goes in its
        JSON line as compile_s."""
        if self.compiled is None and self.name != "remat_compiled":
            return
        start = time.perf_counter()
        if self.compiled is not None:
            self.forward_backward(batch)
        else:  # recomputed (no-grad forward, then with grad) and kept
            n = len(self.model.model.layers)
            for action in (remat.RECOMPUTE, remat.KEEP):
                with self.handle.with_actions([action] * n):
                    self.model(**batch).loss.backward()
        self.model.zero_grad(set_to_none=True)
        self.extra["compile_s"] = time.perf_counter() - start


class OwnShare(remat.MemorySource):
    """A device's allocator statistics, counted as the CPU tracker counts
    (relative: from where a step begins, remat adding what the step's own
    model, optimizer and batch hold), so that a strategy's peak never holds
    the other strategies' models on the same device."""

    def __init__(self, device_source: remat.MemorySource) -> None:
        super().__init__()
        self.device_source = device_source

    def absolute(self) -> bool:
        return False

    def current_bytes(self) -> int:
        return self.device_source.current_bytes()

    def peak_bytes(self) -> int:
        return self.device_source.peak_bytes()

    def reset_peak(self) -> None:
        self.device_source.reset_peak()

    def synchronize(self) -> None:
        self.device_source.synchronize()


def tune_compile_budget(make: Callable[[float], Runner],
                        longest: Dict[str, torch.Tensor], budget: int,
                        fractions: List[float]) -> Dict[str, object]:
    """The largest fraction whose step at the longest length fits `budget`
    (its second step, once the optimizer has state), by bisection over
    `fractions` (a smaller fraction saves less, so peaks fall as fractions
    do); the smallest when none fits."""
    start = time.perf_counter()
    peaks: Dict[float, int] = {}

    def fits(x: float) -> bool:
        if x not in peaks:
            torch._dynamo.reset()
            runner = make(x)
            runner.step(longest, budget)
            runner.step(longest, budget)
            peaks[x] = runner.peaks[-1]
        return peaks[x] <= budget

    ordered = sorted(fractions)
    lo, hi = -1, len(ordered) - 1  # ordered[lo] fits (-1: none known)
    if fits(ordered[hi]):
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(ordered[mid]):
            lo = mid
        else:
            hi = mid
    torch._dynamo.reset()
    return {"activation_memory_budget": ordered[max(lo, 0)],
            "fits": lo >= 0,
            "search_peaks": {str(x): peaks[x] for x in sorted(peaks)},
            "search_s": time.perf_counter() - start}


def hindsight_plans(model: LlamaForCausalLM, memory: remat.MemorySource,
                    batches: Dict[int, Dict[str, torch.Tensor]],
                    budget: int) -> Dict[int, List[remat.Action]]:
    """Per length, the exact plan from that batch's own quantities: one
    COLLECT step each (on `model`, which has trained a step, so its
    optimizer has state) measures them."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    longest = batches[max(batches)]
    model(**longest).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    plans = {}
    for seq, batch in sorted(batches.items()):
        handle = remat.torch.apply(
            model.model.layers, model=model, optimizer=optimizer,
            name="hindsight", feature_names=["batch", "seq"], memory=memory,
            planner=remat.LocalPlanner(), warmup_steps=0)
        features = {"batch": batch["input_ids"].shape[0], "seq": seq}
        with handle.step(features, budget, inputs=batch) as step:
            model(**batch).loss.backward()
        model.zero_grad(set_to_none=True)
        handle.remove()
        assert step.collect and step.sample is not None
        plans[seq] = list(remat.plan_for_sample(handle.spec, step.sample,
                                                budget).actions)
    return plans


def quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4,
                   help="attention heads (half as many key/value heads)")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--attention", default="eager",
                   help="transformers' attn_implementation (eager, sdpa)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-seq", type=int, default=1024)
    p.add_argument("--median-seq", type=float, default=256)
    p.add_argument("--budget-fraction", type=float, default=0.45,
                   help="of the no-checkpoint peak at --max-seq (with the "
                   "optimizer's state)")
    p.add_argument("--compile-budgets",
                   default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0",
                   help="compile_budget's activation_memory_budget "
                   "candidates")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    names = a.strategies.split(",")
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or a.steps < a.rounds or a.rounds < 1:
        p.error(f"--strategies: unknown {unknown} (known: {STRATEGIES}); "
                "need 1 <= --rounds <= --steps")
    try:
        fractions = [float(x) for x in a.compile_budgets.split(",")]
    except ValueError:
        fractions = []
    if not fractions or not all(0 < x <= 1 for x in fractions):
        p.error("--compile-budgets: numbers in (0, 1], comma-separated")
    if "none" not in names:
        names.insert(0, "none")
    device = torch.device(a.device)

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.width,
                         intermediate_size=4 * a.width,
                         num_hidden_layers=a.layers,
                         num_attention_heads=a.heads,
                         num_key_value_heads=max(1, a.heads // 2),
                         max_position_embeddings=a.max_seq,
                         attn_implementation=a.attention)
    base = LlamaForCausalLM(config).to(device)
    memory = remat.torch.memory_source_for(device)
    if memory.absolute():
        memory = OwnShare(memory)

    def batch_of(seq: int, seed: int) -> Dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, config.vocab_size, (a.batch, 1), generator=g)
        ids = ((start + torch.arange(seq)) % config.vocab_size).to(device)
        return {"input_ids": ids, "labels": ids}

    # The budget: a step of a scratch copy without checkpointing at the
    # longest length, once its optimizer has state.
    scratch = Runner("none", copy.deepcopy(base), memory, device)
    longest = batch_of(a.max_seq, 0)
    scratch.step(longest, 0)
    scratch.step(longest, 0)
    full_peak = scratch.peaks[-1]
    budget = int(a.budget_fraction * full_peak)
    del scratch

    # Before the run, untimed: what compile_budget and hindsight need.
    lengths = draw_lengths(a.steps, a.median_seq, a.max_seq, a.seed)
    tuned: Dict[str, object] = {}
    if "compile_budget" in names:
        tuned = tune_compile_budget(
            lambda x: Runner("compile_budget", copy.deepcopy(base), memory,
                             device, compile_fraction=x),
            longest, budget, fractions)
    plans = {}
    if "hindsight" in names:
        start = time.perf_counter()
        plans = hindsight_plans(copy.deepcopy(base), memory,
                                {s: batch_of(s, 0) for s in set(lengths)},
                                budget)
        measure_s = time.perf_counter() - start

    link = emulated_link_bytes_per_s() if device.type == "cpu" else 0
    runners = []
    for n in names:
        runner = Runner(n, copy.deepcopy(base), memory, device, link,
                        compile_fraction=float(
                            tuned.get("activation_memory_budget", 1.0)))
        if n == "compile_budget":
            runner.extra.update(tuned)
        if n == "hindsight":
            runner.plans = plans
            runner.extra["measure_s"] = measure_s
        runner.warm_up(longest)
        runners.append(runner)
    for k, seq in enumerate(lengths):
        batch = batch_of(seq, k + 1)
        shift = k % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            runner.step(batch, budget)

    none = runners[0]
    bounds = [round(r * a.steps / a.rounds) for r in range(a.rounds + 1)]
    rows = []
    for runner in runners:
        per_round = [sum(none.ms[lo:hi]) / sum(runner.ms[lo:hi])
                     for lo, hi in zip(bounds, bounds[1:])]
        line = {
            "bench": "peers", "strategy": runner.name, "steps": a.steps,
            "budget_bytes": budget, "no_checkpoint_peak_bytes": full_peak,
            "max_peak_bytes": max(runner.peaks),
            "steps_over_budget": sum(pk > budget for pk in runner.peaks),
            "throughput_vs_none": sum(none.ms) / sum(runner.ms),
            "round_throughput_vs_none": per_round,
            "median_round_throughput_vs_none": statistics.median(per_round),
            "round_spread": [min(per_round), max(per_round)],
            "mean_step_ms": statistics.mean(runner.ms),
            "p95_step_ms": quantile(runner.ms, 0.95),
        }
        if runner.handle is not None:
            line["collect_steps"] = runner.collect
            line["recomputed_layers_per_step"] = statistics.mean(
                runner.recomputed)
        if runner.name == "remat_offload" and link:
            line["emulated_link_bytes_per_s"] = link
        line.update(runner.extra)
        print(json.dumps(line), flush=True)
        rows.append(line)

    print(f"\nLlama ({a.layers} layers, width {a.width}) on {device}, "
          f"batch {a.batch}, "
          f"seq 32..{a.max_seq} (median {a.median_seq:.0f}), {a.steps} "
          f"steps in {a.rounds} rounds; budget {budget / 2**20:.1f} MiB "
          f"({a.budget_fraction:.0%} of the no-checkpoint peak at "
          f"{a.max_seq})")
    print(f"{'strategy':<14s} {'over budget':>11s} {'max peak MiB':>12s} "
          f"{'vs none':>8s} {'rounds (min..max)':>18s} {'mean ms':>8s} "
          f"{'p95 ms':>8s}")
    for r in rows:
        print(f"{r['strategy']:<14s} {r['steps_over_budget']:>11d} "
              f"{r['max_peak_bytes'] / 2**20:>12.1f} "
              f"{r['throughput_vs_none']:>8.3f} "
              f"{r['round_spread'][0]:>8.3f}..{r['round_spread'][1]:<8.3f} "
              f"{r['mean_step_ms']:>8.1f} {r['p95_step_ms']:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
