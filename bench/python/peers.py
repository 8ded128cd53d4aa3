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
allocator as remat's tracker counts it; on a GPU, CUDA's allocator).

Strategies:
  none          no checkpointing
  hf_all        Hugging Face's activation checkpointing of every layer
  hf_every_2    the same for every second layer (every_n_layers=2)
  sac           every layer under PyTorch's selective activation
                checkpointing, saving matmul outputs and recomputing the
                rest (torchtitan's per-op mode)
  save_on_cpu   torch.autograd.graph.save_on_cpu around forward (on the
                CPU it copies what it saves within host memory)
  remat         remat.torch.apply on the layers: a plan per batch
  remat_offload the same with a copy engine (on the CPU over an emulated
                host link of the machine's FLOP/s times 6.5e-5 bytes/s,
                an H200's ratio to PCIe Gen5, as bench:e2e does)

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
from typing import Callable, Dict, List

import torch
from torch.utils.checkpoint import (CheckpointPolicy,
                                    create_selective_checkpoint_contexts)
from transformers import LlamaConfig, LlamaForCausalLM

import remat
import remat.torch

STRATEGIES = ["none", "hf_all", "hf_every_2", "sac", "save_on_cpu", "remat",
              "remat_offload"]

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
                 memory: remat.MemorySource, link_bytes_per_s: float) -> None:
        self.name = name
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.memory = memory
        self.handle = None
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
        elif name.startswith("remat"):
            engine = None
            if name == "remat_offload":
                engine = remat.CopyEngine(
                    "cpu", link_bytes_per_s=link_bytes_per_s)
            # A 1 MiB link probe: the emulated link is slow (the machine's
            # FLOP/s times 6.5e-5), and the probe runs in collect steps.
            self.handle = remat.torch.apply(
                model.model.layers, model=model, optimizer=self.optimizer,
                name=name, feature_names=["batch", "seq"], memory=memory,
                copy_engine=engine, link_probe_bytes=1 << 20)

    def resident_bytes(self, batch: Dict[str, torch.Tensor]) -> int:
        state = [t for s in self.optimizer.state.values()
                 for t in s.values() if isinstance(t, torch.Tensor)]
        return remat.torch.resident_bytes(self.model,
                                          [*batch.values(), *state])

    def step(self, batch: Dict[str, torch.Tensor], budget: int) -> None:
        start = time.perf_counter()
        if self.handle is not None:
            b, s = batch["input_ids"].shape
            with self.handle.step({"batch": b, "seq": s}, budget,
                                  inputs=batch) as step:
                self.model(**batch).loss.backward()
            peak = step.measured_peak_bytes
            self.collect += step.collect
            self.recomputed.append(sum(
                a in (remat.RECOMPUTE, remat.RECOMPUTE_OFFLOAD)
                for a in step.actions))
        else:
            peak = measure(self.memory, self.resident_bytes(batch),
                           lambda: self.forward_backward(batch))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.ms.append((time.perf_counter() - start) * 1e3)
        self.peaks.append(peak)

    def forward_backward(self, batch: Dict[str, torch.Tensor]) -> None:
        if self.name == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu():
                loss = self.model(**batch).loss
        else:
            loss = self.model(**batch).loss
        loss.backward()


def measure(memory: remat.MemorySource, resident: int,
            run: Callable[[], None]) -> int:
    """The whole-step peak of run(), as a remat step measures it."""
    with memory.attach():
        memory.reset_peak()
        begin = memory.current_bytes()
        run()
        return resident + memory.peak_bytes() - begin


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
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-seq", type=int, default=1024)
    p.add_argument("--median-seq", type=float, default=256)
    p.add_argument("--budget-fraction", type=float, default=0.45,
                   help="of the no-checkpoint peak at --max-seq (with the "
                   "optimizer's state)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    names = a.strategies.split(",")
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or a.steps < a.rounds or a.rounds < 1:
        p.error(f"--strategies: unknown {unknown} (known: {STRATEGIES}); "
                "need 1 <= --rounds <= --steps")
    if "none" not in names:
        names.insert(0, "none")

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=4096, hidden_size=a.width,
                         intermediate_size=4 * a.width,
                         num_hidden_layers=a.layers, num_attention_heads=4,
                         num_key_value_heads=2,
                         max_position_embeddings=a.max_seq,
                         attn_implementation="eager")
    base = LlamaForCausalLM(config)
    memory = remat.torch.memory_source_for("cpu")

    def batch_of(seq: int, seed: int) -> Dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, config.vocab_size, (a.batch, 1), generator=g)
        ids = (start + torch.arange(seq)) % config.vocab_size
        return {"input_ids": ids, "labels": ids}

    # The budget: a step of a scratch copy without checkpointing at the
    # longest length, once its optimizer has state.
    scratch = Runner("none", copy.deepcopy(base), memory, 0)
    longest = batch_of(a.max_seq, 0)
    scratch.step(longest, 0)
    scratch.step(longest, 0)
    full_peak = scratch.peaks[-1]
    budget = int(a.budget_fraction * full_peak)
    del scratch

    link = emulated_link_bytes_per_s()
    runners = [Runner(n, copy.deepcopy(base), memory, link) for n in names]
    lengths = draw_lengths(a.steps, a.median_seq, a.max_seq, a.seed)
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
        if runner.name == "remat_offload":
            line["emulated_link_bytes_per_s"] = link
        print(json.dumps(line), flush=True)
        rows.append(line)

    print(f"\nLlama ({a.layers} layers, width {a.width}), batch {a.batch}, "
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
