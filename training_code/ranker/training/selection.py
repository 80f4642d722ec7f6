"""Model selection for the native loop: the weights with the best validation NDCG@10 seen so far, where they come
from, and how many validations have passed without beating them (for early stopping). A run exports these weights,
never merely the last ones, so training longer cannot export a model that is worse on validation.

(train_lightning.py gets the same from Lightning's own `ModelCheckpoint(monitor=SELECTION_METRIC, mode="max")`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ranker.log_format import format_metrics

SELECTION_METRIC = "val_ndcg@10"


def exported_weights_note(step: int, epoch: int) -> str:
    """The log line that says where the exported weights come from (metrics.json holds the same numbers)."""
    return f"exporting the weights of step {step} (epoch {epoch}), the best {SELECTION_METRIC} on validation"


def early_stopping_note(stopped_epoch: int, best_epoch: int, best_score: float, patience: int) -> str:
    """The log line that says early stopping ended the run, where, and which epoch's weights the run exports."""
    validations = "validation" if patience == 1 else "validations"
    return (f"early stopping after epoch {stopped_epoch}: no better {SELECTION_METRIC} than epoch {best_epoch}'s "
            f"{best_score:.6g} in {patience} {validations}; the model exported is epoch {best_epoch}'s")


def exported_metrics_line(final_metrics: Mapping[str, float]) -> str:
    """The log's last line: the exported weights' validation and test metrics, which SageMaker's metric definitions
    read as the job's final values. It names no epoch or step: `exported_weights_note` says where the weights come
    from, and the epoch lines before it keep each epoch's own metrics."""
    return format_metrics({name: value for name, value in final_metrics.items() if name.startswith(("val_", "test_"))})


class BestWeights:
    """A copy of the model's state (on its device: copying is cheap next to an epoch) whenever validation improves."""

    def __init__(self) -> None:
        self.score = float("-inf")
        self.step, self.epoch = 0, 0
        self.state: dict[str, torch.Tensor] | None = None
        self.metrics: dict[str, float] | None = None
        """The validation metrics of the kept weights (None when resumed from a checkpoint that did not hold them)."""
        self.stale_validations = 0

    def consider(self, metrics: dict[str, float], model: nn.Module, step: int, epoch: int) -> bool:
        """Keeps `model`'s weights if `metrics[SELECTION_METRIC]` beats every earlier validation; True if it did.
        Ties keep the earlier weights: a longer run never exports a later copy that is merely as good."""
        score = metrics[SELECTION_METRIC]
        if score <= self.score:
            self.stale_validations += 1
            return False
        self.score, self.step, self.epoch, self.stale_validations = score, step, epoch, 0
        self.metrics = dict(metrics)
        self.state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        return True

    def patience_spent(self, patience: int) -> bool:
        """True once `patience` validations in a row have not beaten the best (never with a patience of 0): early
        stopping's rule, the one Lightning's `EarlyStopping(mode="max", patience=...)` applies in train_lightning.py."""
        return patience > 0 and self.stale_validations >= patience

    def restore(self, model: nn.Module) -> None:
        """Copies the kept weights into `model` in place (the captured step's and the fused wrappers' tensors stay
        the same objects)."""
        if self.state is None:
            raise RuntimeError("BestWeights.restore: no validation was considered; validate the model first")
        model.load_state_dict(self.state)

    def provenance(self) -> dict[str, float]:
        """What metrics.json says about the exported weights."""
        return {"exported_step": self.step, "exported_epoch": self.epoch}

    def state_dict(self) -> dict[str, Any]:
        return {"score": self.score, "step": self.step, "epoch": self.epoch, "stale_validations": self.stale_validations,
                "metrics": self.metrics,
                "state": None if self.state is None else {name: tensor.cpu() for name, tensor in self.state.items()}}

    def load_state_dict(self, saved: dict[str, Any], device: torch.device) -> None:
        self.score, self.step, self.epoch = saved["score"], saved["step"], saved["epoch"]
        self.stale_validations = saved["stale_validations"]
        self.metrics = saved.get("metrics")  # absent from checkpoints written before it was kept
        self.state = None if saved["state"] is None else {name: tensor.to(device)
                                                          for name, tensor in saved["state"].items()}
