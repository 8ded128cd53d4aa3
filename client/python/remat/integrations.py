"""remat in Hugging Face's ``transformers.Trainer``: every training step
(each micro-batch, under gradient accumulation) runs under a plan for its
batch, within an absolute memory budget, with no loop of your own::

    from remat.integrations import RematTrainer

    trainer = RematTrainer(model=model, args=TrainingArguments(...),
                           train_dataset=dataset, data_collator=collator,
                           budget_bytes=6 << 30,
                           remat_options={"memory": memory_source_for(dev)})
    trainer.train()

The blocks default to the model's decoder (or encoder) layers; features to
the batch size and sequence length of ``input_ids``. Hugging Face's own
gradient checkpointing must stay off (remat refuses to nest with it).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import transformers
from torch import nn

from remat.torch import Applied, apply

__all__ = ["RematTrainer", "hf_layers", "sequence_features"]


def hf_layers(model: nn.Module) -> nn.ModuleList:
    """The repeated layers of a Hugging Face model: the first
    ``nn.ModuleList`` whose modules are all its checkpointable layers
    (``GradientCheckpointingLayer``), e.g. ``model.model.layers``."""
    layer = getattr(transformers.modeling_layers,
                    "GradientCheckpointingLayer", None)
    for _, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0 and \
                layer is not None and \
                all(isinstance(m, layer) for m in module):
            return module
    raise ValueError(f"{type(model).__name__}: no list of Hugging Face "
                     "layers found; pass remat_blocks=")


def sequence_features(inputs: Mapping[str, Any]) -> Dict[str, float]:
    """``batch`` and ``seq`` from ``input_ids``' shape."""
    ids = inputs.get("input_ids")
    if ids is None or ids.dim() != 2:
        raise ValueError("sequence_features: the batch has no 2-d input_ids; "
                         "pass features= to RematTrainer")
    return {"batch": float(ids.shape[0]), "seq": float(ids.shape[1])}


class RematTrainer(transformers.Trainer):
    """A ``transformers.Trainer`` whose training steps run under remat's
    per-batch plans.

    Args (keywords, beside ``Trainer``'s own):
        budget_bytes: the device memory each step may use, in bytes.
        remat_blocks: the blocks (``remat.torch.apply``'s); default:
            ``hf_layers(model)``.
        features: the batch's features from its inputs; default:
            ``sequence_features`` (``batch``, ``seq``).
        feature_names: the names ``features`` gives; default
            ``["batch", "seq"]``.
        remat_options: further ``remat.torch.apply`` options (planner,
            name, memory, copy_engine, ...).

    Attributes:
        remat: the handle ``apply`` returned; ``remat.remove()`` restores
            the model.
        remat_steps: per training step, its remat step (plan, measured
            peak), for inspection; a batch no plan fits whole runs as
            micro-batches (``Applied.split``), a remat step each.
        losses: per training step, its loss.
    """

    def __init__(self, *args: Any, budget_bytes: int,
                 remat_blocks: Optional[Sequence[nn.Module]] = None,
                 features: Callable[[Mapping[str, Any]],
                                    Mapping[str, float]] = sequence_features,
                 feature_names: Sequence[str] = ("batch", "seq"),
                 remat_options: Optional[Dict[str, Any]] = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.args.activation_checkpointing:
            raise ValueError("RematTrainer: TrainingArguments."
                             "activation_checkpointing (gradient_checkpointing)"
                             " is on; remat plans what each step recomputes, "
                             "so turn it off")
        options = dict(remat_options or {})
        options.setdefault("name", type(self.model).__name__)
        blocks = remat_blocks if remat_blocks is not None else \
            hf_layers(self.model)
        self.remat: Applied = apply(blocks, model=self.model,
                                    feature_names=list(feature_names),
                                    **options)
        self.budget_bytes = int(budget_bytes)
        self.features = features
        self.remat_steps: List[Any] = []
        self.losses: List[float] = []

    def training_step(self, model: nn.Module, inputs: Dict[str, Any],
                      *args: Any, **kwargs: Any) -> Any:
        # The optimizer exists from the first step on; its state counts.
        self.remat.optimizer = self.optimizer
        # A batch no plan fits runs as micro-batches that do (Applied.split),
        # their losses weighted by their share of the rows; a run out of
        # memory runs again (Applied.run_step).
        loss = None
        parent = super()
        for mb in self.remat.split(self.features(inputs), self.budget_bytes,
                                   inputs):
            self._remat_weight = mb.weight
            parts = []
            step = self.remat.run_step(
                mb.features, self.budget_bytes,
                lambda: parts.append(parent.training_step(
                    model, mb.inputs, *args, **kwargs)),
                inputs=mb.inputs, accumulate=mb.accumulate)
            loss = parts[-1] if loss is None else loss + parts[-1]
            self.remat_steps.append(step)
        self._remat_weight = 1.0
        self.losses.append(float(loss))
        return loss

    def compute_loss(self, model: nn.Module, inputs: Dict[str, Any],
                     *args: Any, **kwargs: Any) -> Any:
        out = super().compute_loss(model, inputs, *args, **kwargs)
        weight = getattr(self, "_remat_weight", 1.0)
        if weight == 1.0:
            return out
        if isinstance(out, tuple):  # return_outputs
            return (out[0] * weight, *out[1:])
        return out * weight
