#!/usr/bin/env python3
"""torchvision's ResNet-18 trained on multi-scale images (DELTA's setting:
batch size, height and width vary per step) under an absolute memory
budget, with remat applied in place to its eight residual blocks across
layer1..layer4: torchvision's own forward runs, each batch under a plan for
its shape.

Beside it, in lockstep, the same model with every residual block
recomputed (torch.utils.checkpoint, the static choice a fixed budget
forces). Prints the demo's step lines and summary.

    python examples/python/train_resnet.py --steps 40

Exit status: 0, or 3 when a step's measured peak exceeded the budget.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torchvision.models import resnet18

import remat.torch
from demo_report import StepLog, format_bytes


def every_block_recomputed(model: nn.Module, images: torch.Tensor
                           ) -> torch.Tensor:
    """ResNet's forward with each residual block under checkpoint()."""
    x = model.maxpool(model.relu(model.bn1(model.conv1(images))))
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in stage:
            x = checkpoint(block, x, use_reentrant=False)
    return model.fc(torch.flatten(model.avgpool(x), 1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--min-batch", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--sizes", default="96,128,160,192,224",
                   help="image sides to draw from, pixels")
    p.add_argument("--budget-fraction", type=float, default=0.5,
                   help="how far the budget lies from the peak with every "
                   "block recomputed (0) to the peak without checkpointing "
                   "(1), both at the largest shape (the stem and head, "
                   "outside the blocks, hold much of a ResNet's peak)")
    p.add_argument("--planner", default="", help="rematd address; default: "
                   "the in-process planner")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    device = torch.device(a.device)
    sizes = [int(s) for s in a.sizes.split(",")]

    if device.type == "cpu":
        # PyTorch's native convolutions on the CPU. Where it picks oneDNN's
        # (an AVX2 EPYC, say), their scratch memory follows the shape's
        # blocking rather than the batch: the step's peak is not monotone
        # in the input's size, the per-block estimates' bounds widen to
        # match, and the planner refuses budgets near the smallest peak.
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    model = resnet18(num_classes=10).to(device)
    baseline = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    baseline_optimizer = torch.optim.SGD(baseline.parameters(), lr=0.01,
                                         momentum=0.9)
    planner = remat.RemotePlanner(a.planner) if a.planner else None
    handle = remat.torch.apply(
        [*model.layer1, *model.layer2, *model.layer3, *model.layer4],
        model=model, optimizer=optimizer, name="resnet18",
        feature_names=["batch", "height", "width"], planner=planner,
        memory=remat.torch.memory_source_for(device))

    def batch_of(b: int, h: int, w: int, seed: int):
        # Class 0: brighter left half; class 1: brighter top half.
        g = torch.Generator().manual_seed(seed)
        labels = torch.randint(0, 2, (b,), generator=g)
        images = torch.randn(b, 3, h, w, generator=g)
        images[labels == 0, :, :, : w // 2] += 0.05
        images[labels == 1, :, : h // 2, :] += 0.05
        return images.to(device), labels.to(device)

    def loss_of(net, images, labels, plain=False):
        logits = every_block_recomputed(net, images) if plain else net(images)
        return nn.functional.cross_entropy(logits, labels)

    # Both with the optimizer's state (SGD's momentum: one buffer per
    # parameter), which exists from its first step on.
    largest = batch_of(a.max_batch, max(sizes), max(sizes), 0)
    momentum = sum(p.numel() * p.element_size() for p in model.parameters())
    peaks = [momentum + handle.measure_peak_bytes(
        lambda: loss_of(model, *largest).backward(), [action] * 8,
        inputs=largest) for action in (remat.RECOMPUTE, remat.KEEP)]
    budget = int(peaks[0] + a.budget_fraction * (peaks[1] - peaks[0]))
    print(f"ResNet-18 with remat.torch.apply; at batch {a.max_batch} "
          f"{max(sizes)}x{max(sizes)} the peak is {format_bytes(peaks[0])} "
          f"with every block recomputed, {format_bytes(peaks[1])} without "
          f"checkpointing; budget {format_bytes(budget)}")

    rng = random.Random(a.seed)
    log = StepLog(a.steps, budget)
    for n in range(1, a.steps + 1):
        b = rng.randint(a.min_batch, a.max_batch)
        h, w = rng.choice(sizes), rng.choice(sizes)
        images, labels = batch_of(b, h, w, n)

        def train():
            # A batch no plan fits runs as micro-batches that do.
            steps, loss = [], 0.0
            for mb in handle.split({"batch": b, "height": h, "width": w},
                                   budget, (images, labels)):
                part = []

                def run():
                    out = loss_of(model, *mb.inputs) * mb.weight
                    out.backward()
                    part.append(out.item())

                steps.append(handle.run_step(mb.features, budget, run,
                                             inputs=mb.inputs[0],
                                             accumulate=mb.accumulate))
                loss += part[-1]
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return steps, loss

        def train_baseline():
            loss_of(baseline, images, labels, plain=True).backward()
            baseline_optimizer.step()
            baseline_optimizer.zero_grad(set_to_none=True)

        log.run_step(train, train_baseline, f"batch {b:2d} {h:3d}x{w:<3d}",
                     device)
    log.summary("every residual block recomputed")
    return 3 if log.over_budget() else 0


if __name__ == "__main__":
    sys.exit(main())
