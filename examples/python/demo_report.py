"""The step lines and summary the Python examples print (the C++ demo's
format), with the comparison against a baseline run in lockstep."""

from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence

import torch

import remat


def format_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value, unit = float(n), "B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1023.5:
            break
    return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def timed_ms(run: Callable[[], object], device: torch.device) -> float:
    """Wall time of run(), the device synchronised after it."""
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1e3


class StepLog:
    """Records each step under remat (and, when given, the baseline's time
    for the same batch) and prints the demo's lines."""

    def __init__(self, steps: int, budget_bytes: int,
                 quiet: bool = False) -> None:
        self.steps = steps
        self.budget = budget_bytes
        self.quiet = quiet  # records, prints no step lines
        self.records: List[tuple] = []  # (collect, ms, recomputed, peak,
        #                                  over, loss)
        self.baseline_ms: List[float] = []
        self.retried = 0  # steps run again after out of memory

    def record(self, steps: Sequence["remat.torch.Step"], ms: float,
               loss: float, shape: str,
               baseline_ms: Optional[float] = None) -> None:
        """One training step: its remat steps (one per micro-batch, when
        the batch ran split), its time and loss."""
        step = steps[-1]  # the plan shown; the peak is the largest
        if len(steps) > 1:
            shape += f" in {len(steps)}"
        src = step.source
        plan = (step.choice.solver if src in (remat.PlanSource.PLANNER,
                                              remat.PlanSource.LOCAL_CACHE)
                else src.name.lower())
        recomputed = sum(x in (remat.RECOMPUTE, remat.RECOMPUTE_OFFLOAD)
                         for x in step.actions)
        offloaded = sum(x == remat.OFFLOAD for x in step.actions)
        offload = f"offload {offloaded} " if offloaded else ""
        retries = sum(getattr(s, "retries", 0) for s in steps)
        self.retried += retries > 0
        peak = max(s.measured_peak_bytes or 0 for s in steps)
        pred = max(s.choice.predicted_peak_bytes for s in steps)
        over = peak > self.budget
        collect = any(s.collect for s in steps)
        self.records.append((collect, ms, recomputed, peak, over, loss))
        if baseline_ms is not None:
            self.baseline_ms.append(baseline_ms)
        n = len(self.records)
        if self.quiet:
            return
        print(f"step {n:4d}/{self.steps}  {shape}  {plan:<13s} recompute "
              f"{recomputed:2d}/{len(step.actions):<2d} {offload}peak "
              f"{format_bytes(pred) if pred else '-':>9s} pred / "
              f"{format_bytes(peak):>9s} meas / "
              f"{format_bytes(self.budget):>9s} budget  {ms:7.1f} ms  "
              f"loss {loss:.3f}{'  OVER BUDGET' if over else ''}"
              f"{f'  retried {retries}' if retries else ''}",
              flush=True)

    def run_step(self, train: Callable[[], tuple],
                 baseline: Optional[Callable[[], object]], shape: str,
                 device: torch.device) -> None:
        """Runs one step under remat (`train` returns its remat steps, one
        per micro-batch, and its loss) and the baseline's on the same batch
        (if any: in lockstep, taking turns to go first), and records
        both."""
        result = []
        baseline_ms = None
        if baseline is not None and len(self.records) % 2:
            baseline_ms = timed_ms(baseline, device)
        ms = timed_ms(lambda: result.append(train()), device)
        if baseline is not None and baseline_ms is None:
            baseline_ms = timed_ms(baseline, device)
        steps, loss = result[0]
        self.record(steps, ms, loss, shape, baseline_ms)

    def over_budget(self) -> int:
        return sum(r[4] for r in self.records)

    def round_ratios(self, rounds: int = 4) -> List[float]:
        """Throughput against the baseline over each of `rounds` runs of
        consecutive steps: how much the machine's speed drifted."""
        n = len(self.baseline_ms)
        bounds = [n * k // rounds for k in range(rounds + 1)]
        return [sum(self.baseline_ms[i:j]) /
                sum(r[1] for r in self.records[i:j])
                for i, j in zip(bounds, bounds[1:]) if j > i]

    def summary(self, baseline: str = "every block recomputed",
                together: str = "same batches, in lockstep") -> None:
        records = self.records
        collect_ms = [r[1] for r in records if r[0]]
        planned = [r for r in records if not r[0]]
        planned_ms = [r[1] for r in planned]
        k = min(10, len(records))
        first = mean([r[5] for r in records[:k]])
        last = mean([r[5] for r in records[-k:]])
        print(f"\n{'steps':<10s} {'count':>6s} {'mean ms':>10s} "
              f"{'p95 ms':>10s} {'blocks recomputed':>18s}\n"
              f"{'collect':<10s} {len(collect_ms):6d} "
              f"{mean(collect_ms):10.1f} "
              f"{percentile(collect_ms, 0.95):10.1f} {'all':>18s}\n"
              f"{'planned':<10s} {len(planned_ms):6d} "
              f"{mean(planned_ms):10.1f} "
              f"{percentile(planned_ms, 0.95):10.1f} "
              f"{mean([r[2] for r in planned]):18.2f}\n\n"
              f"max measured peak {format_bytes(max(r[3] for r in records))}"
              f" of budget {format_bytes(self.budget)}; steps over budget: "
              f"{self.over_budget()}; steps run again after out of memory: "
              f"{self.retried}\n"
              f"loss: {first:.3f} (mean of first {k} steps) -> {last:.3f} "
              f"(mean of last {k})")
        if self.baseline_ms:
            all_ms = [r[1] for r in records]
            planned_base = [b for b, r in zip(self.baseline_ms, records)
                            if not r[0]]
            ratios = self.round_ratios()
            print(f"throughput vs {baseline} ({together}): "
                  f"{sum(self.baseline_ms) / sum(all_ms):.3f}x over all "
                  f"steps ({min(ratios):.3f}x..{max(ratios):.3f}x over "
                  f"{len(ratios)} rounds of consecutive steps), "
                  + (f"{sum(planned_base) / sum(planned_ms):.3f}x over "
                     "planned steps" if planned_ms else "no planned steps"),
                  flush=True)

