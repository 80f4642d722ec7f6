"""The learning-rate schedule both loops step after every optimizer step, and tell every validation's NDCG@10.

A linear warm-up to the peak rate, then the peak rate until validation stops improving: after `decay_patience`
validations in a row without a better NDCG@10 the rate is multiplied by `decay_factor`, and the count starts again.
The run so anneals when its validation stalls, whenever that is, before early stopping (a longer patience) ends it;
a cosine over the epoch cap would still be near its peak at a dataset's early best epoch. With a `decay_patience` of
0 the rate follows a cosine to zero over all steps instead: the schedule for a run of a fixed length.

Its whole state (the step, the best score, the stalled validations, the decays) is plain attributes, so the
scheduler's `state_dict` in every checkpoint (the native loop's, Lightning's) resumes it where it was.
"""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LRScheduler


class PlateauDecay(LRScheduler):
    """Warm-up over `warmup_steps`, then the peak rate, decayed by `decay_factor` each time `decay_patience`
    validations in a row (`record_validation`) have not beaten the best; with `decay_patience` 0, a cosine to zero
    at `total_steps` instead."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        warmup_steps: int,
        total_steps: int,
        decay_patience: int,
        decay_factor: float,
    ):
        self.warmup_steps = max(1, warmup_steps)
        self.total_steps = total_steps
        self.decay_patience, self.decay_factor = decay_patience, decay_factor
        self.best_score = float("-inf")
        self.stalled_validations = 0
        """Validations in a row without a better score, since the best one or the last decay."""
        self.decays = 0
        super().__init__(optimizer)

    def factor(self, step: int) -> float:
        """The share of the peak rate after `step` steps."""
        warmup = min(1.0, (step + 1) / self.warmup_steps)
        if self.decay_patience == 0:
            if step < self.warmup_steps:
                return warmup
            progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
            return 0.5 * (1 + math.cos(math.pi * progress))
        return warmup * self.decay_factor**self.decays

    def get_lr(self) -> list[float]:
        return [base * self.factor(self.last_epoch) for base in self.base_lrs]

    def record_validation(self, score: float) -> None:
        """Counts a validation's NDCG@10 (the same on every rank); decays the rate at once where the count says so.
        A tie is no improvement, as for early stopping (ranker.training.selection.BestWeights)."""
        if self.decay_patience == 0:
            return
        if score > self.best_score:
            self.best_score, self.stalled_validations = score, 0
            return
        self.stalled_validations += 1
        if self.stalled_validations < self.decay_patience:
            return
        self.decays, self.stalled_validations = self.decays + 1, 0
        self._last_lr = self.get_lr()
        for group, rate in zip(self.optimizer.param_groups, self._last_lr):
            if isinstance(group["lr"], torch.Tensor):  # a captured step reads the rate from this tensor
                group["lr"].fill_(rate)
            else:
                group["lr"] = rate
