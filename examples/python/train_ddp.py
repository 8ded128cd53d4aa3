#!/usr/bin/env python3
"""A Hugging Face Llama (random weights) trained data-parallel, one process
per device as torchrun starts them, under DistributedDataParallel (or
FSDP2, --fsdp2), with remat applied to its layers in every rank. Each rank
draws batches of its own lengths and plans its own steps; all of them ask
one rematd (the node's), so what one rank collected serves the others.

    bazel-bin/planner/service/rematd --listen "" --unix-socket /tmp/r.sock &
    torchrun --nproc_per_node 2 examples/python/train_ddp.py \\
        --planner unix:/tmp/r.sock --steps 30

On the CPU the ranks talk over gloo; --device cuda uses nccl and the GPU
of each rank's LOCAL_RANK. A batch no plan fits runs as micro-batches
that do, as many on every rank (the most any rank needs: each forward
gathers or broadcasts across ranks), gradients accumulated without
synchronising (no_sync) until the last. Steps run
in `with handle.step(...)`, not `run_step`: running a step again after out
of memory in one rank alone would leave the collectives the others already
ran (DDP's buffer broadcast in forward, its gradient buckets in backward)
unmatched. Rank 0 prints its steps and summary, then every rank's count of
steps over budget, and whether the ranks' parameters are equal.

Exit status: 0, or 3 when a step on any rank exceeded the budget.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import remat.torch
from demo_report import StepLog, format_bytes
from train_encoder import draw_lengths
from train_hf_causal_lm import full_peak_bytes, make_llama, text_batch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-seq", type=int, default=384)
    p.add_argument("--median-seq", type=float, default=96)
    p.add_argument("--budget-fraction", type=float, default=0.35,
                   help="of the no-checkpoint peak at --max-seq")
    p.add_argument("--planner", default="", help="rematd address; default: "
                   "a planner in each process")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--fsdp2", action="store_true",
                   help="shard each layer and the model (fully_shard) "
                   "instead of DDP")
    a = p.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device(a.device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    # The same initial model on every rank.
    model = make_llama(a.layers, a.width, a.max_seq, device)
    planner = remat.RemotePlanner(a.planner) if a.planner else None
    handle = remat.torch.apply(
        model.model.layers, model=model, name="llama-ddp",
        feature_names=["batch", "seq"], planner=planner,
        memory=remat.torch.memory_source_for(device))

    # The budget from the longest batch's peak without checkpointing, on
    # the unwrapped model (the same on every rank).
    full_peak = full_peak_bytes(handle, model,
                                text_batch(model, a.batch, a.max_seq, 0))
    budget = int(a.budget_fraction * full_peak)

    if a.fsdp2:
        for layer in model.model.layers:
            fully_shard(layer)
        job = fully_shard(model)

        @contextlib.contextmanager
        def no_sync():
            job.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                job.set_requires_gradient_sync(True)
    else:
        job = DDP(model, device_ids=[local_rank] if device.type == "cuda"
                  else None)
        no_sync = job.no_sync
    # Made after sharding (FSDP2 replaces the parameters); its state counts
    # in every step's budget.
    optimizer = torch.optim.AdamW(job.parameters(), lr=1e-3)
    handle.optimizer = optimizer
    if rank == 0:
        print(f"Llama ({a.layers} layers, width {a.width}) under "
              f"{'FSDP2' if a.fsdp2 else 'DDP'}, {world} ranks, remat.torch."
              f"apply; no-checkpoint peak at seq {a.max_seq}: "
              f"{format_bytes(full_peak)}; budget {format_bytes(budget)}",
              flush=True)

    log = StepLog(a.steps, budget, quiet=rank != 0)
    lengths = draw_lengths(a.steps, 16, a.max_seq, a.median_seq,
                           seed=1 + rank)  # each rank its own batches
    for n, seq in enumerate(lengths, 1):
        batch = text_batch(model, a.batch, seq, 1000 * rank + n)

        def train():
            # Every rank runs as many micro-batches (forwards gather and
            # broadcast across ranks): the most any rank needs.
            features = {"batch": a.batch, "seq": seq}
            parts = torch.tensor([handle.micro_batches(features, budget)])
            dist.all_reduce(parts, op=dist.ReduceOp.MAX)
            parts = max(1, int(parts))
            steps, loss = [], 0.0
            for i, mb in enumerate(handle.split(features, budget, batch,
                                                micro_batches=parts)):
                # One gradient synchronisation a step, at its last part.
                last = i == parts - 1
                with contextlib.nullcontext() if last else no_sync():
                    with handle.step(mb.features, budget, inputs=mb.inputs,
                                     accumulate=mb.accumulate) as s:
                        out = job(**mb.inputs).loss * mb.weight
                        out.backward()
                steps.append(s)
                loss += out.item()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return steps, loss

        log.run_step(train, None, f"batch {a.batch} seq {seq:3d}", device)
    if rank == 0:
        log.summary()

    # Every rank's steps over budget, and the ranks' parameters compared.
    over = torch.tensor([log.over_budget()], dtype=torch.int64)
    counts = [torch.zeros_like(over) for _ in range(world)]
    dist.all_gather(counts, over)
    flat = torch.cat([t.detach().to("cpu").reshape(-1).float()
                      for t in (q.full_tensor() if hasattr(q, "full_tensor")
                                else q for q in job.parameters())])
    first = flat.clone()
    dist.broadcast(first, src=0)
    equal = torch.tensor([int(torch.equal(flat, first))])
    dist.all_reduce(equal, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(f"ranks: {world}; steps over budget per rank: "
              f"{[int(c) for c in counts]}; parameters equal on every rank: "
              f"{'yes' if equal.item() else 'NO'}", flush=True)
    # Every rank past its last collective before any tears the group down:
    # a rank that closes its connections while another still completes one
    # can take the other down at exit.
    dist.barrier()
    dist.destroy_process_group()
    if not equal.item():
        return 1
    return 3 if sum(int(c) for c in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
