"""A step that runs out of memory is recovered inside it (run_step): what
it held is freed, its outcome reported, and the same batch runs again under
a safer plan, with the loss and gradients of a clean run of it. The
out-of-memory errors are raised on purpose (torch.OutOfMemoryError, from
inside a block of Hugging Face's Llama) at a chosen moment: its forward,
its backward, its recompute, or a forward while copies to host are in
flight."""

import copy
import gc

import pytest
import torch

import remat
from remat.torch import apply, memory_source_for

transformers = pytest.importorskip("transformers")
from test_apply import llama, run, text_batch  # noqa: E402

FEATURES = {"batch": 3, "seq": 19}


class Fault:
    """Raises torch.OutOfMemoryError once (`always`: every time), from
    inside `block` (its MLP): in the forward of its `call`-th run (`always`:
    of every run), or in the backward of its first."""

    def __init__(self, block: torch.nn.Module, when: str, call: int = 1,
                 always: bool = False):
        self.when, self.call, self.always = when, call, always
        self.engine = None  # a copy engine whose copies in flight to count
        self.in_flight = 0
        self.calls = 0
        self.fired = False
        mlp = block.mlp
        forward = mlp.forward

        def faulty(*args, **kwargs):
            self.calls += 1
            if self.when == "forward" and (self.always or
                                           self.calls == self.call):
                self.fire()
            out = forward(*args, **kwargs)
            if self.when == "backward" and self.calls == 1 and \
                    out.requires_grad:
                out.register_hook(lambda grad: self.fire())
            return out

        mlp.forward = faulty

    def fire(self):
        if self.fired and not self.always:
            return
        self.fired = True
        if self.engine is not None:
            self.in_flight = self.engine.stats().pending_copies
        raise torch.OutOfMemoryError("injected: out of memory")


def recovered(when, call=1, copy_engine=None, block=1):
    """One step of a fresh Llama with a fault in a layer (`block`), run by
    run_step; checked against a clean run of the same batch. Returns the
    fault."""
    torch.manual_seed(0)
    model, blocks = llama()  # attention dropout on
    plain = copy.deepcopy(model)
    memory = memory_source_for("cpu")
    handle = apply(blocks, model=model, name="oom", memory=memory,
                   feature_names=list(FEATURES), copy_engine=copy_engine,
                   offload_min_bytes=0)
    batch = text_batch(3, 19, 1)
    fault = Fault(blocks[block], when, call)
    fault.engine = copy_engine
    losses = []

    def step():
        loss = model(**batch).loss
        loss.backward()
        losses.append(loss.detach())

    want_loss, want = run(plain, batch, seed=5)
    with memory.attach():
        gc.collect()
        start = memory.current_bytes()
        torch.manual_seed(5)
        done = handle.run_step(FEATURES, 1 << 40, step, inputs=batch)
        assert fault.fired and done.retries == 1
        assert torch.equal(losses[-1], want_loss)
        got = {n: p.grad for n, p in model.named_parameters()
               if p.grad is not None}
        assert got.keys() == want.keys()
        assert all(torch.equal(got[n], want[n]) for n in want), when
        # Nothing of the failed run is left: the model's gradients and the
        # losses aside, memory is where it was.
        del got, done
        losses.clear()
        model.zero_grad(set_to_none=True)
        gc.collect()
        assert memory.current_bytes() == start
    state = handle.planner.model_state("oom", handle.device_type)
    assert state.out_of_memory == 1  # reported, as an outcome
    return fault


@pytest.mark.parametrize("when", ["forward", "backward"])
def test_out_of_memory_in_forward_or_backward_is_recovered(when):
    recovered(when)


def test_out_of_memory_in_a_recompute_is_recovered():
    # The first step collects: every block recomputed, so the block's
    # second run is its recompute, in backward.
    recovered("forward", call=2)


def test_out_of_memory_with_copies_to_host_in_flight_is_recovered():
    # A slow link, so that copies are still on it.
    engine = remat.CopyEngine("cpu", link_bytes_per_s=2e6)
    # The first step collects sending checkpoints to host (nothing is known
    # yet): the third layer's forward fails while the second's are in
    # flight.
    fault = recovered("forward", copy_engine=engine, block=2)
    assert fault.in_flight > 0
    stats = engine.stats()
    assert stats.bytes_to_host > 0
    assert stats.pending_copies == 0


def test_accumulated_gradients_are_kept_and_retries_are_bounded():
    torch.manual_seed(0)
    model, blocks = llama()
    plain = copy.deepcopy(model)
    handle = apply(blocks, model=model, name="acc",
                   feature_names=list(FEATURES), max_oom_retries=1)
    first, second = text_batch(3, 19, 1), text_batch(3, 19, 2)

    def step_on(batch):
        return lambda: model(**batch).loss.backward()

    torch.manual_seed(3)
    handle.run_step(FEATURES, 1 << 40, step_on(first), inputs=first)
    fault = Fault(blocks[2], "backward")
    handle.run_step(FEATURES, 1 << 40, step_on(second), inputs=second,
                    accumulate=True)
    assert fault.fired
    torch.manual_seed(3)
    plain(**first).loss.backward()
    plain(**second).loss.backward()
    for (n, p), q in zip(model.named_parameters(), plain.parameters()):
        assert torch.equal(p.grad, q.grad), n

    # Past max_oom_retries the error propagates, naming the batch, the
    # budget and the least peak the planner knows (none yet: 2 steps).
    again = Fault(blocks[0], "forward", always=True)
    reported = handle.planner.model_state(
        "acc", handle.device_type).out_of_memory
    with pytest.raises(torch.OutOfMemoryError,
                       match=r"features \{'batch': 3, 'seq': 19\} .* budget "
                             r"of 1099511627776 bytes.* smallest peak any "
                             r"plan reaches is not known yet"):
        handle.run_step(FEATURES, 1 << 40, step_on(first), inputs=first)
    assert again.calls == 2  # the step and its one retry
    assert handle._step is None
    assert handle.planner.model_state(
        "acc", handle.device_type).out_of_memory == reported + 2
    # Without retries: the error as it came, reported all the same.
    handle.retry_on_oom = False
    with pytest.raises(torch.OutOfMemoryError, match="injected"):
        handle.run_step(FEATURES, 1 << 40, step_on(first), inputs=first)
    assert again.calls == 3
    assert handle.planner.model_state(
        "acc", handle.device_type).out_of_memory == reported + 3
