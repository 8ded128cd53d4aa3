"""remat.torch.apply on models it did not write: Hugging Face's Llama, GPT-2
and BERT (transformers, tiny configs, random weights) and torchvision's
ResNet-18, each running its own forward. Under every kind of plan the loss
and every gradient are the plain model's, bit for bit (dropout on); planned
steps stay within their budget as measured; the model is otherwise
untouched; misuse is an error that names the block and the fix."""

import copy
import io
import random
import warnings

import pytest
import torch
from torch import nn

import remat
from remat import Action
from remat.torch import apply, memory_source_for, remove

transformers = pytest.importorskip("transformers")
torchvision = pytest.importorskip("torchvision")

VOCAB = 96
# The language models train without a KV cache (use_cache=False), as
# remat's blocks run them and as Hugging Face's own checkpointing does: with
# one, GPT-2's attention reads its keys and values back from the cache, in
# another memory layout, and on some CPUs (AVX2) the gradients then differ
# in their last bits from those of a run without it.
K, R, O, RO = (Action.KEEP, Action.RECOMPUTE, Action.OFFLOAD,
               Action.RECOMPUTE_OFFLOAD)


def llama():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256, attention_dropout=0.1,
        attn_implementation="eager", use_cache=False)
    model = transformers.LlamaForCausalLM(config)
    return model, model.model.layers


def gpt2():
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=3, n_head=4, n_positions=256,
        attn_implementation="eager", use_cache=False)  # dropout 0.1 by default
    model = transformers.GPT2LMHeadModel(config)
    return model, model.transformer.h


def bert():
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=256, attn_implementation="eager")
    model = transformers.BertForMaskedLM(config)
    return model, model.bert.encoder.layer


def resnet18():
    model = torchvision.models.resnet18(num_classes=10)
    return model, [*model.layer1, *model.layer2, *model.layer3,
                   *model.layer4]


def llama_large_vocab():
    """A vocabulary whose logits (and their loss) outweigh the layers, as in
    real language models: the step's peak is at the head, outside every
    block."""
    config = transformers.LlamaConfig(
        vocab_size=8192, hidden_size=32, intermediate_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config)
    return model, model.model.layers


LANGUAGE_MODELS = {"llama": llama, "gpt2": gpt2, "bert": bert}


def text_batch(batch: int, seq: int, seed: int):
    """Token ids with right padding (a mask of zeros past each length)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def image_batch(batch: int, height: int, width: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 3, height, width, generator=g),
            torch.randint(0, 10, (batch,), generator=g))


def loss_of(model, batch):
    if isinstance(batch, dict):
        return model(**batch).loss
    images, labels = batch
    return nn.functional.cross_entropy(model(images), labels)


def run(model, batch, seed):
    """One forward and backward from a fixed RNG state: loss, gradients."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss = loss_of(model, batch)
    loss.backward()
    return loss.detach(), {n: p.grad.clone()
                           for n, p in model.named_parameters()
                           if p.grad is not None}


def mixes(n: int, count: int, seed: int):
    """`count` action mixes over n blocks (every one when there are no
    more), always including all-OFFLOAD and all-RECOMPUTE_OFFLOAD."""
    every = 4 ** n
    codes = range(every) if every <= count else \
        random.Random(seed).sample(range(every), count)
    choices = [K, R, O, RO]
    out = [[O] * n, [RO] * n]
    for code in codes:
        out.append([choices[code // 4 ** i % 4] for i in range(n)])
    return out


def check_mixes_match_plain(make, batch, count):
    torch.manual_seed(0)
    model, blocks = make()
    model.train()
    plain = copy.deepcopy(model)
    keys = list(model.state_dict().keys())
    names = [n for n, _ in model.named_parameters()]
    engine = remat.CopyEngine("cpu")
    handle = apply(blocks, model=model, name="m", copy_engine=engine,
                   offload_min_bytes=0)
    assert list(model.state_dict().keys()) == keys
    assert [n for n, _ in model.named_parameters()] == names
    for k, actions in enumerate(mixes(len(handle.blocks), count, 1)):
        want_loss, want = run(plain, batch, seed=k)
        model.zero_grad(set_to_none=True)
        torch.manual_seed(k)
        with handle.with_actions(actions):
            loss = loss_of(model, batch)
        loss.backward()
        assert torch.equal(loss.detach(), want_loss), actions
        got = {n: p.grad for n, p in model.named_parameters()
               if p.grad is not None}
        assert got.keys() == want.keys()
        assert all(torch.equal(got[n], want[n]) for n in want), actions
        # Buffers (batch norms' running statistics) as the plain model's:
        # a recompute does not update them a second time.
        for (n, b), (_, c) in zip(model.named_buffers(),
                                  plain.named_buffers()):
            assert torch.equal(b, c), (n, actions)
        assert engine.stats().pending_copies == 0
    assert engine.stats().bytes_to_host > 0
    remove(handle)
    assert all("forward" not in m.__dict__ for m in handle.blocks)


@pytest.mark.parametrize("family", sorted(LANGUAGE_MODELS))
def test_language_models_match_the_plain_model_under_every_kind_of_plan(
        family):
    # Every mix for the three layers of Llama; 24 (and the all-OFFLOAD and
    # all-RECOMPUTE_OFFLOAD plans) for the others.
    count = 64 if family == "llama" else 24
    check_mixes_match_plain(LANGUAGE_MODELS[family], text_batch(3, 19, 1),
                            count)


def test_resnet_matches_the_plain_model_under_every_kind_of_plan():
    check_mixes_match_plain(resnet18, image_batch(2, 40, 56, 1), 16)


def text_workload(k: int):
    seq = [24, 48, 96, 64, 32, 80, 56, 40, 72, 88, 96, 60][k % 12]
    return {"batch": 4, "seq": seq}, text_batch(4, seq, k)


def image_workload(k: int):
    # Sides in multiples of 32, which ResNet halves five times exactly.
    h, w = [(32, 64), (64, 64), (96, 32), (64, 96), (32, 32), (96, 64)][k % 6]
    b = 2 + k % 4
    return {"batch": b, "height": h, "width": w}, image_batch(b, h, w, k)


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert", "resnet",
                                    "llama_large_vocab"])
def test_trains_within_budget_with_its_optimizer_counted(family):
    # ResNet on PyTorch's native convolutions. Where PyTorch picks oneDNN's
    # for the CPU (an AVX2 EPYC, say), their scratch memory follows the
    # shape's blocking, not the batch: the step's peak varied by 18 MiB
    # against the input's size there, the estimator's bounds widen to
    # match, and the planner rightly refuses a budget under 3 MiB above the
    # smallest peak. This test is about planning within a budget.
    with torch.backends.mkldnn.flags(enabled=family != "resnet"):
        trains_within_budget(family)


def trains_within_budget(family):
    torch.manual_seed(0)
    make, workload = {
        "resnet": (resnet18, image_workload),
        "llama_large_vocab": (llama_large_vocab, text_workload),
    }.get(family) or (LANGUAGE_MODELS[family], text_workload)
    model, blocks = make()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    memory = memory_source_for("cpu")
    features, _ = workload(0)
    # A batch whose predicted bounds fit no plan runs the safe plan, as it
    # did before steps could be refused: this test checks the planned
    # steps (refusal and splitting are tested below).
    handle = apply(blocks, model=model, optimizer=optimizer, name=family,
                   feature_names=list(features), memory=memory,
                   over_budget="run")
    # The budget: halfway from the peak with every block recomputed to the
    # peak without checkpointing, on the largest batch, with the
    # optimizer's state present (after one step).
    largest = max((workload(k) for k in range(12)),
                  key=lambda w: torch.tensor(list(w[0].values())).prod())
    loss_of(model, largest[1]).backward()
    optimizer.step()
    model.zero_grad(set_to_none=True)
    recompute_peak, keep_peak = (handle.measure_peak_bytes(
        lambda: loss_of(model, largest[1]).backward(),
        [action] * len(blocks), inputs=largest[1]) for action in (R, K))
    budget = (recompute_peak + keep_peak) // 2
    planned = reported = 0
    steps = 36
    for k in range(steps):
        features, batch = workload(k)
        with handle.step(features, budget, inputs=batch) as step:
            loss_of(model, batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        assert step.measured_peak_bytes is not None
        reported += not step.collect
        if step.source in (remat.PlanSource.PLANNER,
                           remat.PlanSource.LOCAL_CACHE):
            planned += 1
            assert step.measured_peak_bytes <= budget, (k, features,
                                                        step.actions)
    assert planned >= steps // 3
    state = handle.planner.model_state(family, handle.device_type)
    assert state.num_samples > 0 and state.outcomes == reported


def test_the_model_is_unchanged_for_save_load_copy_and_to():
    torch.manual_seed(0)
    model, blocks = llama()
    keys = list(model.state_dict().keys())
    handle = apply(blocks, model=model)
    batch = text_batch(2, 12, 0)
    want = run(model, batch, 0)[0]
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert list(loaded.state_dict().keys()) == keys
    assert torch.equal(run(loaded, batch, 0)[0], want)
    assert torch.equal(run(copy.deepcopy(model), batch, 0)[0], want)
    model.to(torch.float64)
    assert all(p.dtype == torch.float64 for p in model.parameters())
    # Blocks still run under remat after .to(): the handle holds the same
    # modules.
    with handle.with_actions([R] * 3):
        loss = loss_of(model, text_batch(2, 12, 0))
    loss.backward()
    assert all(p.grad.dtype == torch.float64 for p in blocks.parameters())
    handle.remove()
    handle.remove()  # idempotent


def test_misuse_is_an_error_naming_the_block_and_nothing_is_reported():
    torch.manual_seed(0)
    model, layers = llama()
    budget = 1 << 40
    features = {"batch": 2, "seq": 12}
    batch = text_batch(2, 12, 0)
    # Out of the forward's order.
    handle = apply(list(reversed(layers)), model=model, name="reversed",
                   feature_names=["batch", "seq"])
    with pytest.raises(remat.Error, match="model.layers.0.*ran before.*"
                       "model.layers.2.*order") as e:
        with handle.step(features, budget):
            loss_of(model, batch).backward()
    assert e.value.code == "FAILED_PRECONDITION"
    assert handle.planner.model_state(
        "reversed", handle.device_type).num_samples == 0
    handle.remove()
    # Run twice in one step.
    handle = apply(layers, model=model, name="twice",
                   feature_names=["batch", "seq"])
    with pytest.raises(remat.Error, match="model.layers.0.*ran twice"):
        with handle.step(features, budget):
            loss_of(model, batch)
            loss_of(model, batch)
    # Not reached, or not at all.
    with pytest.raises(remat.Error, match="without running any"):
        with handle.step(features, budget):
            pass
    with pytest.raises(ValueError, match="missing \\['seq'\\]"):
        handle.step({"batch": 2}, budget)
    # Nothing of those steps reached the planner, and the next step is a
    # good one.
    assert handle.planner.model_state(
        "twice", handle.device_type).num_samples == 0
    with handle.step(features, budget) as step:
        loss_of(model, batch).backward()
    assert step.collect and step.sample is None  # no memory source
    handle.remove()
    extra = nn.Linear(4, 4)
    handle = apply([*layers, extra], name="extra")
    with pytest.raises(remat.Error, match="'3'.*never ran"):
        with handle.step({"batch": 2}, budget):
            loss_of(model, batch).backward()
    handle.remove()


def test_hugging_face_checkpointing_and_remat_do_not_nest():
    model, layers = llama()
    model.activation_checkpointing_enable()
    with pytest.raises(remat.Error, match="model.layers.0.*gradient "
                       "checkpointing.*activation_checkpointing_disable"):
        apply(layers, model=model)
    model.activation_checkpointing_disable()
    handle = apply(layers, model=model)
    model.activation_checkpointing_enable()
    with pytest.raises(remat.Error, match="gradient checkpointing"):
        with handle.step({"batch": 2}, 1 << 40):
            pass
    model.activation_checkpointing_disable()
    handle.remove()


def test_blocks_are_checked_whole():
    model, layers = llama()
    with pytest.raises(ValueError, match="blocks\\[1\\] is blocks\\[0\\]"):
        apply([layers[0], layers[0]], model=model)
    with pytest.raises(ValueError, match="inside"):
        apply([layers[0], layers[0].mlp], model=model)
    with pytest.raises(ValueError, match="not a submodule"):
        apply([nn.Linear(2, 2)], model=model)
    handle = apply(layers, model=model)
    with pytest.raises(ValueError, match="already under remat"):
        apply(layers, model=model)
    handle.remove()
    # Without model= a relative memory source cannot see the rest.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply(layers, memory=memory_source_for("cpu")).remove()
    assert any("model=" in str(w.message) for w in caught)


def test_remat_trainer_plans_every_training_step():
    from remat.integrations import RematTrainer, hf_layers
    torch.manual_seed(0)
    model, layers = llama()
    assert hf_layers(model) is layers

    class Texts(torch.utils.data.Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, i):
            return {k: v[0] for k, v in
                    text_batch(1, 8 + 2 * i, i).items()}

    def collate(items):
        n = max(len(x["input_ids"]) for x in items)
        pad = {"input_ids": 0, "attention_mask": 0, "labels": -100}
        return {k: torch.stack([nn.functional.pad(x[k], (0, n - len(x[k])),
                                                  value=v) for x in items])
                for k, v in pad.items()}

    args = dict(output_dir="/tmp/remat-trainer-test", max_steps=16,
                per_device_train_batch_size=2, report_to=[], use_cpu=True,
                save_strategy="no", logging_strategy="no",
                disable_tqdm=True)
    trainer = RematTrainer(
        model=model, args=transformers.TrainingArguments(**args),
        train_dataset=Texts(), data_collator=collate, budget_bytes=1 << 30,
        remat_options={"memory": memory_source_for("cpu")})
    trainer.train()
    steps = trainer.remat_steps
    assert len(steps) == 16 and len(trainer.losses) == 16
    assert all(s.features[0] == 2 for s in steps)
    assert any(not s.collect for s in steps)
    assert all(s.measured_peak_bytes for s in steps)
    trainer.remat.remove()
    with pytest.raises(ValueError, match="activation_checkpointing"):
        RematTrainer(model=model, args=transformers.TrainingArguments(
            activation_checkpointing=True, **args), train_dataset=Texts(),
            data_collator=collate, budget_bytes=1 << 30)


def test_a_batch_no_plan_fits_is_refused_before_it_runs_or_split():
    torch.manual_seed(0)
    model, blocks = llama()
    model.eval()  # no dropout: micro-batches add up to the whole batch
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    memory = memory_source_for("cpu")
    handle = apply(blocks, model=model, optimizer=optimizer, name="split",
                   feature_names=["batch", "seq"], memory=memory)

    def full_batch(b, seq, seed):
        ids = torch.randint(0, VOCAB, (b, seq),
                            generator=torch.Generator().manual_seed(seed))
        return {"input_ids": ids, "labels": ids}

    # A profile over batches of 1 to 4 rows, under a loose budget.
    loose = 1 << 40
    for k in range(20):
        b, seq = 1 + k % 4, [32, 64, 96, 48, 80][k % 5]
        batch = full_batch(b, seq, k)
        with handle.step({"batch": b, "seq": seq}, loose, inputs=batch):
            model(**batch).loss.backward()
        model.zero_grad(set_to_none=True)

    # Two rows at 96 tokens need at least this much.
    with pytest.raises(remat.BudgetError) as two:
        handle.step({"batch": 2, "seq": 96}, 1, inputs=full_batch(2, 96, 0))
    grads = sum(p.numel() * p.element_size() for p in model.parameters())
    budget = (two.value.smallest_peak_bytes + grads) * 21 // 20
    batch = full_batch(4, 96, 99)
    features = {"batch": 4, "seq": 96}
    with pytest.raises(remat.BudgetError) as four:
        with handle.step(features, budget, inputs=batch):
            pytest.fail("a step no plan fits must not run")
    assert four.value.smallest_peak_bytes > budget
    assert four.value.code == "RESOURCE_EXHAUSTED"
    assert "split" in str(four.value)
    assert handle._step is None  # nothing is left running

    assert 2 <= handle.fit_batch(features, budget).max_batch < 4
    # Micro-batches after the first hold the first's gradients.
    fit = handle.fit_batch(features, budget - grads)
    assert fit.max_batch >= 2
    assert fit.micro_batches == 2
    assert handle.micro_batches(features, budget) == 2
    parts = list(handle.split(features, budget, batch))
    assert [p.features for p in parts] == [{"batch": 2, "seq": 96}] * 2
    # As many as ranks agreed on, as even as can be.
    agreed = list(handle.split(features, budget, batch, micro_batches=3))
    assert [p.features["batch"] for p in agreed] == [2, 1, 1]
    assert [p.weight for p in agreed] == [0.5, 0.25, 0.25]
    assert [p.accumulate for p in agreed] == [False, True, True]
    assert torch.equal(torch.cat([p.inputs["input_ids"] for p in agreed]),
                       batch["input_ids"])
    with pytest.raises(ValueError, match="micro_batches"):
        handle.split(features, budget, batch, micro_batches=0)
    assert [p.weight for p in parts] == [0.5, 0.5]
    assert [p.accumulate for p in parts] == [False, True]
    for mb in parts:
        with handle.step(mb.features, budget, inputs=mb.inputs,
                         accumulate=mb.accumulate) as step:
            (model(**mb.inputs).loss * mb.weight).backward()
        assert step.source in (remat.PlanSource.PLANNER,
                               remat.PlanSource.LOCAL_CACHE)
        assert step.measured_peak_bytes <= budget
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()  # the whole batch, without remat
    for n, p in model.named_parameters():
        assert torch.allclose(got[n], p.grad, rtol=1e-4, atol=1e-6), n
    model.zero_grad(set_to_none=True)
    # A batch that fits whole is itself.
    small = full_batch(1, 32, 5)
    assert list(handle.split({"batch": 1, "seq": 32}, budget, small)) == \
        [({"batch": 1, "seq": 32}, small, 1.0, False)]
    with pytest.raises(ValueError, match="first dimension"):
        list(handle.split(features, budget, {"input_ids": torch.zeros(3, 96)}))
    with pytest.raises(remat.BudgetError, match="not even one row"):
        list(handle.split(features, 1, batch))
    with pytest.raises(ValueError, match="features"):
        handle.split({"batch": 4}, budget, batch)  # checked when called

    # over_budget="run": the step runs (the safe plan), over budget.
    remove(handle)
    running = apply(blocks, model=model, optimizer=optimizer, name="split",
                    feature_names=["batch", "seq"], memory=memory,
                    planner=handle.planner, over_budget="run")
    with running.step(features, budget, inputs=batch) as step:
        model(**batch).loss.backward()
    assert step.source == remat.PlanSource.SAFE
    assert step.choice.smallest_peak_bytes > budget
    remove(running)
    with pytest.raises(ValueError, match="over_budget"):
        apply(blocks, model=model, over_budget="maybe")
