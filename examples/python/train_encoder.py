#!/usr/bin/env python3
"""remat's demo workload in PyTorch: a Transformer encoder of
``nn.TransformerEncoderLayer`` blocks trained on synthetic token batches
whose sequence lengths vary per step (log-normal, like a question-answering
dataset), under a memory budget, with a checkpointing plan per batch.

It prints one line per step and a summary, as the C++ demo
(``bazel-bin/examples/train``) does, and compares the throughput with the
same model trained on the same batches with every block recomputed (the
static choice a fixed budget forces), the two run in lockstep so that the
machine's drift affects both alike.

    python examples/python/train_encoder.py                     # in process
    python examples/python/train_encoder.py --planner unix:/tmp/rematd.sock

Exit status: 0, or 3 when a step's measured peak exceeded the budget.
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import sys
from typing import List, Sequence, Tuple

import torch
from torch import nn

import remat
from demo_report import StepLog, format_bytes
from remat.torch import (PlannedModule, memory_source_for, peak_bytes_of,
                         resident_bytes)


class Embed(nn.Module):
    """Token ids [batch, seq] -> embeddings [batch, seq, width]."""

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)


class Head(nn.Module):
    """[batch, seq, width] -> logits [batch, classes] (mean over tokens)."""

    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.mean(1))


def make_blocks(depth: int = 6, width: int = 128, heads: int = 4,
                ffn: int = 512, vocab: int = 1024, classes: int = 2,
                dropout: float = 0.1
                ) -> Tuple[List[Tuple[str, nn.Module]], List[bool]]:
    """The demo encoder's blocks (embed, layer0.., head) and which may be
    recomputed (all but the embedding, whose input is integer ids)."""
    blocks: List[Tuple[str, nn.Module]] = [("embed", Embed(vocab, width))]
    for i in range(depth):
        blocks.append((f"layer{i}", nn.TransformerEncoderLayer(
            width, heads, dim_feedforward=ffn, dropout=dropout,
            batch_first=True)))
    blocks.append(("head", Head(width, classes)))
    return blocks, [name != "embed" for name, _ in blocks]


def make_batch(batch: int, seq: int, vocab: int, generator: torch.Generator
               ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each sequence leans to the lower or upper half of the vocabulary (75%
    of its tokens); the label says which, so the loss falls within a few
    dozen steps."""
    lean = torch.where(torch.rand(batch, 1, generator=generator) < 0.5,
                       torch.full((batch, 1), 0.25),
                       torch.full((batch, 1), 0.75))
    lower = torch.rand(batch, seq, generator=generator) < lean
    half = torch.randint(vocab // 2, (batch, seq), generator=generator)
    ids = torch.where(lower, half, half + vocab // 2)
    labels = (lower.float().mean(1) > 0.5).long()
    return ids, labels


def draw_lengths(steps: int, min_seq: int, max_seq: int, median_seq: float,
                 sigma: float = 0.55, seed: int = 1) -> List[int]:
    """Sequence lengths ~ LogNormal(log(median), sigma), clipped."""
    rng = random.Random(seed)
    return [min(max_seq, max(min_seq, round(rng.lognormvariate(
        math.log(median_seq), sigma)))) for _ in range(steps)]


def no_checkpoint_peak_bytes(model: PlannedModule, ids: torch.Tensor,
                             labels: torch.Tensor) -> int:
    """The measured peak of one plain step (every block KEEP)."""
    model.zero_grad(set_to_none=True)
    peak = peak_bytes_of(
        lambda: nn.functional.cross_entropy(model(ids), labels).backward(),
        model.memory, resident_bytes(model, [ids]))
    model.zero_grad(set_to_none=True)
    return peak


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--planner", default="",
                   help="rematd address (unix:/path or host:port); "
                   "default: the in-process planner")
    p.add_argument("--solver", default="",
                   help="solver to ask for (exact, mimose_greedy, ...); "
                   "default: the planner's")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--depth", type=int, default=6, help="encoder layers")
    p.add_argument("--width", type=int, default=128, help="d_model")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=512, help="feed-forward width")
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8, help="sequences per batch")
    p.add_argument("--min-seq", type=int, default=32)
    p.add_argument("--max-seq", type=int, default=512)
    p.add_argument("--median-seq", type=float, default=150)
    p.add_argument("--budget-fraction", type=float, default=0.45,
                   help="budget as a fraction of the no-checkpoint peak at "
                   "--max-seq")
    p.add_argument("--budget-bytes", type=int, default=0,
                   help="the budget in bytes (overrides --budget-fraction)")
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the every-block-recomputed comparison")
    p.add_argument("--offload", action="store_true",
                   help="give the runtime a copy engine, so plans may "
                   "OFFLOAD blocks to host memory")
    p.add_argument("--host-link-gbps", type=float, default=0,
                   help="with --offload on the CPU: hold the copy engine to "
                   "this emulated host link, GB/s per direction (0: memory "
                   "speed)")
    p.add_argument("--trace", default="",
                   help="write collected samples to this trace CSV")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.steps < 1 or not 0 < a.budget_fraction <= 1 or a.min_seq < 1 or \
            a.max_seq < a.min_seq or a.budget_bytes < 0:
        p.error("need --steps >= 1, 0 < --budget-fraction <= 1, "
                "1 <= --min-seq <= --max-seq and --budget-bytes >= 0")

    device = torch.device(a.device)
    torch.manual_seed(a.seed)
    blocks, checkpointable = make_blocks(a.depth, a.width, a.heads, a.ffn,
                                         a.vocab)
    baseline_blocks = copy.deepcopy(blocks)  # the same initial weights
    planner = (remat.RemotePlanner(a.planner) if a.planner
               else remat.LocalPlanner())
    spec = dict(name="encoder", feature_names=["batch", "seq"],
                checkpointable=checkpointable)
    engine = (remat.CopyEngine(str(device),
                               link_bytes_per_s=a.host_link_gbps * 1e9)
              if a.offload else None)
    model = PlannedModule(blocks, planner=planner, solver=a.solver,
                          memory=memory_source_for(device),
                          copy_engine=engine, **spec).to(device)
    if a.trace:
        model.trace = remat.TraceRecorder(a.trace, model.spec)
    baseline = PlannedModule(baseline_blocks, **spec).to(device)
    every_recomputed = [remat.RECOMPUTE if c else remat.KEEP
                        for c in checkpointable]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    baseline_optimizer = torch.optim.Adam(baseline.parameters(), lr=1e-3)

    generator = torch.Generator().manual_seed(a.seed)
    ids, labels = make_batch(a.batch, a.max_seq, a.vocab, generator)
    full_peak = no_checkpoint_peak_bytes(model, ids.to(device),
                                         labels.to(device))
    budget = a.budget_bytes or int(a.budget_fraction * full_peak)
    print(f"remat demo (PyTorch {torch.__version__}): {a.depth}-layer "
          f"encoder (width {a.width}), batch {a.batch}, seq "
          f"{a.min_seq}..{a.max_seq} (median {a.median_seq:.0f}), planner "
          f"{a.planner or 'in-process'}\nno-checkpoint peak at seq "
          f"{a.max_seq}: {format_bytes(full_peak)}; budget "
          f"{format_bytes(budget)}", flush=True)

    lengths = draw_lengths(a.steps, a.min_seq, a.max_seq, a.median_seq,
                           seed=a.seed)
    log = StepLog(a.steps, budget)
    for seq in lengths:
        ids, labels = (t.to(device) for t in
                       make_batch(a.batch, seq, a.vocab, generator))

        def train():
            optimizer.zero_grad(set_to_none=True)
            # A batch no plan fits runs as micro-batches that do.
            steps, loss = [], 0.0
            for mb in model.split({"batch": a.batch, "seq": seq}, budget,
                                  (ids, labels)):
                with model.step(mb.features, budget,
                                accumulate=mb.accumulate) as step:
                    part = nn.functional.cross_entropy(
                        model(mb.inputs[0]), mb.inputs[1]) * mb.weight
                    part.backward()
                steps.append(step)
                loss += part.item()
            optimizer.step()
            return steps, loss

        def train_baseline():
            baseline_optimizer.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(
                baseline.forward_with(every_recomputed, ids),
                labels).backward()
            baseline_optimizer.step()

        log.run_step(train, None if a.no_baseline else train_baseline,
                     f"batch {a.batch:2d} seq {seq:3d}", device)
    log.summary()
    return 3 if log.over_budget() else 0

if __name__ == "__main__":
    sys.exit(main())
