#!/usr/bin/env python3
"""A Hugging Face causal language model (Llama, random weights, no download)
fine-tuned on batches whose lengths vary per step, under an absolute memory
budget, with remat applied in place: the model's own forward runs, each
batch under a plan for its length.

Beside it, in lockstep (the same batches, one step each in turn), the same
model with Hugging Face's gradient checkpointing of every layer: the static
choice a fixed budget forces. Prints the demo's step lines and summary.

    python examples/python/train_hf_causal_lm.py --steps 40

Exit status: 0, or 3 when a step's measured peak exceeded the budget.
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import remat.torch
from demo_report import StepLog, format_bytes
from train_encoder import draw_lengths


def make_llama(layers: int, width: int, max_seq: int,
               device: torch.device) -> LlamaForCausalLM:
    """The model, as a user has it (from_pretrained works the same way),
    the same for a given seed."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=width,
                         intermediate_size=4 * width,
                         num_hidden_layers=layers, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=max_seq,
                         attn_implementation="eager")
    return LlamaForCausalLM(config).to(device)


def text_batch(model: LlamaForCausalLM, rows: int, seq: int, seed: int):
    """Runs of consecutive token ids from random starts: learnable."""
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (rows, 1), generator=g)
    ids = (start + torch.arange(seq)) % vocab
    device = model.device
    return {"input_ids": ids.to(device), "labels": ids.to(device)}


def full_peak_bytes(handle, model: LlamaForCausalLM, longest) -> int:
    """The peak of a step on `longest` without checkpointing, with
    AdamW's state (two buffers per parameter), which exists from its first
    step on."""
    adam = 2 * sum(p.numel() * p.element_size() for p in model.parameters())
    peak = adam + handle.measure_peak_bytes(
        lambda: model(**longest).loss.backward(), inputs=longest)
    model.zero_grad(set_to_none=True)
    return peak


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-seq", type=int, default=512)
    p.add_argument("--median-seq", type=float, default=128)
    p.add_argument("--budget-fraction", type=float, default=0.35,
                   help="of the no-checkpoint peak at --max-seq")
    p.add_argument("--planner", default="", help="rematd address; default: "
                   "the in-process planner")
    p.add_argument("--device", default="cpu")
    p.add_argument("--inject-oom-every", type=int, default=0,
                   help="every this many steps, the step's first run raises "
                   "an out-of-memory error after its forward, and runs "
                   "again (0: never)")
    a = p.parse_args(argv)
    device = torch.device(a.device)

    model = make_llama(a.layers, a.width, a.max_seq, device)
    baseline = copy.deepcopy(model)
    baseline.activation_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    baseline_optimizer = torch.optim.AdamW(baseline.parameters(), lr=1e-3)

    # remat, in place: the layers, the whole model and its optimizer counted.
    planner = remat.RemotePlanner(a.planner) if a.planner else None
    handle = remat.torch.apply(
        model.model.layers, model=model, optimizer=optimizer, name="llama",
        feature_names=["batch", "seq"], planner=planner,
        memory=remat.torch.memory_source_for(device))

    def batch_of(seq: int, seed: int):
        return text_batch(model, a.batch, seq, seed)

    full_peak = full_peak_bytes(handle, model, batch_of(a.max_seq, 0))
    budget = int(a.budget_fraction * full_peak)
    print(f"Llama ({a.layers} layers, width {a.width}) with remat.torch.apply"
          f"; no-checkpoint peak at seq {a.max_seq}: "
          f"{format_bytes(full_peak)}; budget {format_bytes(budget)}")

    log = StepLog(a.steps, budget)
    for n, seq in enumerate(draw_lengths(a.steps, 16, a.max_seq,
                                         a.median_seq), 1):
        batch = batch_of(seq, n)

        inject = [a.inject_oom_every > 0 and n % a.inject_oom_every == 0]

        def train():
            # A batch no plan fits runs as micro-batches that do; a run
            # out of memory runs again (run_step).
            steps, loss = [], 0.0
            for mb in handle.split({"batch": a.batch, "seq": seq}, budget,
                                   batch):
                part = []

                def run():
                    out = model(**mb.inputs).loss * mb.weight
                    if inject[0]:  # as an allocator out of memory would
                        inject[0] = False
                        raise torch.OutOfMemoryError("injected")
                    out.backward()
                    part.append(out.item())

                steps.append(handle.run_step(mb.features, budget, run,
                                             inputs=mb.inputs,
                                             accumulate=mb.accumulate))
                loss += part[-1]
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return steps, loss

        def train_baseline():
            baseline(**batch).loss.backward()
            baseline_optimizer.step()
            baseline_optimizer.zero_grad(set_to_none=True)

        log.run_step(train, train_baseline, f"batch {a.batch} seq {seq:3d}",
                     device)
    log.summary("Hugging Face checkpointing of every layer")
    return 3 if log.over_budget() else 0


if __name__ == "__main__":
    sys.exit(main())
