#!/usr/bin/env python3
"""A Hugging Face ``Trainer`` fine-tuning a small Llama (random weights, no
download) on sequences of varying length, with remat switched on by
``remat.integrations.RematTrainer``: no training loop of your own, each step
under a plan for its batch within an absolute memory budget.

Beside it, in lockstep, the same model under Trainer's own gradient
checkpointing of every layer (the static choice): each training step also
runs that model's step on the same batch, the two taking turns to go
first. Prints the demo's step lines and summary.

    python examples/python/train_hf_trainer.py --steps 40

Exit status: 0, or 3 when a step's measured peak exceeded the budget.
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, Trainer,
                          TrainingArguments)

import remat
import remat.torch
from demo_report import StepLog, format_bytes, timed_ms
from remat.integrations import RematTrainer
from train_encoder import draw_lengths


class Runs(torch.utils.data.Dataset):
    """Runs of consecutive token ids from random starts (learnable), of
    log-normal lengths."""

    def __init__(self, count: int, vocab: int, max_seq: int) -> None:
        self.lengths = draw_lengths(count, 16, max_seq, max_seq / 4)
        self.vocab = vocab

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int):
        start = int(torch.randint(0, self.vocab, (1,),
                                  generator=torch.Generator().manual_seed(i)))
        ids = (start + torch.arange(self.lengths[i])) % self.vocab
        return {"input_ids": ids}


def collate(items):
    """Right padding to the longest; padded labels are ignored."""
    n = max(len(x["input_ids"]) for x in items)
    ids = torch.zeros(len(items), n, dtype=torch.long)
    mask = torch.zeros(len(items), n, dtype=torch.long)
    for i, x in enumerate(items):
        ids[i, :len(x["input_ids"])] = x["input_ids"]
        mask[i, :len(x["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask,
            "labels": ids.masked_fill(mask == 0, -100)}


class SideBySide(RematTrainer):
    """RematTrainer that also trains `baseline` (a Trainer over a copy of
    the model with Trainer's gradient checkpointing of every layer) on each
    batch, timing each one's training step (forward and backward) and
    taking turns to go first; the baseline's optimizer steps untimed."""

    def __init__(self, *args, baseline: Trainer, log: StepLog,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.baseline = baseline
        self.step_log = log
        baseline.model.activation_checkpointing_enable()  # as Trainer does
        baseline.create_optimizer_and_scheduler(
            num_training_steps=self.args.max_steps)

    def training_step(self, model, inputs, *args, **kwargs):
        losses = []
        done = len(self.remat_steps)

        def remat_step():
            losses.append(super(SideBySide, self).training_step(
                model, inputs, *args, **kwargs))

        def baseline_step():
            self.baseline.training_step(self.baseline.model, inputs, *args,
                                        **kwargs)

        cpu = torch.device("cpu")
        if len(self.step_log.records) % 2:
            baseline_ms = timed_ms(baseline_step, cpu)
            ms = timed_ms(remat_step, cpu)
        else:
            ms = timed_ms(remat_step, cpu)
            baseline_ms = timed_ms(baseline_step, cpu)
        self._baseline_optimizer_step()
        # This batch's remat steps: more than one when it ran split.
        steps = self.remat_steps[done:]
        self.step_log.record(steps, ms, float(losses[0]),
                             "batch {:d} seq {:3d}".format(
                                 *map(int, self.features(inputs).values())),
                             baseline_ms)
        return losses[0]

    def _baseline_optimizer_step(self) -> None:
        """What Trainer's loop does after a step: clip, step, schedule."""
        base = self.baseline
        torch.nn.utils.clip_grad_norm_(base.model.parameters(),
                                       base.args.max_grad_norm)
        base.optimizer.step()
        base.lr_scheduler.step()
        base.optimizer.zero_grad()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-seq", type=int, default=384)
    p.add_argument("--budget-fraction", type=float, default=0.5,
                   help="of the no-checkpoint peak at --max-seq")
    a = p.parse_args(argv)

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=128,
                         intermediate_size=512, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=a.max_seq,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config)
    baseline_model = copy.deepcopy(model)
    data = Runs(a.steps * a.batch, config.vocab_size, a.max_seq)
    args = dict(per_device_train_batch_size=a.batch, max_steps=a.steps,
                learning_rate=1e-3, report_to=[], use_cpu=True,
                save_strategy="no", logging_strategy="no",
                disable_tqdm=True, dataloader_drop_last=True, seed=0)

    # The budget: a fraction of the peak of one step without
    # checkpointing at the longest length (the Trainer's optimizer, AdamW,
    # holds twice the parameters from its first step on).
    memory = remat.torch.memory_source_for("cpu")
    longest = collate([{"input_ids": torch.arange(a.max_seq)}] * a.batch)
    probe = remat.torch.apply(model.model.layers, model=model, memory=memory)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    full_peak = probe.measure_peak_bytes(
        lambda: model(**longest).loss.backward(), inputs=longest) + 2 * params
    probe.remove()
    budget = int(a.budget_fraction * full_peak)
    print(f"Llama (4 layers, width 128) under RematTrainer; no-checkpoint "
          f"peak at seq {a.max_seq}: {format_bytes(full_peak)}; budget "
          f"{format_bytes(budget)}")

    log = StepLog(a.steps, budget)
    baseline = Trainer(model=baseline_model,
                       args=TrainingArguments("/tmp/remat-trainer-baseline",
                                              **args),
                       data_collator=collate)
    SideBySide(model=model,
               args=TrainingArguments("/tmp/remat-trainer", **args),
               train_dataset=data, data_collator=collate,
               budget_bytes=budget, baseline=baseline, log=log,
               remat_options={"name": "llama", "memory": memory}).train()
    log.summary("Trainer's gradient checkpointing of every layer")
    return 3 if log.over_budget() else 0


if __name__ == "__main__":
    sys.exit(main())
