"""Early stopping's rule (ranker.training.selection.BestWeights): patience counted in validations without a better
NDCG@10, the best weights kept for export, and both carried through a checkpoint."""

from __future__ import annotations

import torch
from ranker.training.selection import SELECTION_METRIC, BestWeights
from torch import nn


def validated(best: BestWeights, model: nn.Module, scores: list[float]) -> list[bool]:
    """Each score considered in turn, the model's weights set to that validation's number first; whether each one
    ran out of a patience of 2."""
    spent = []
    for epoch, score in enumerate(scores, start=1):
        with torch.no_grad():
            model.weight.fill_(epoch)
        best.consider({SELECTION_METRIC: score}, model, step=10 * epoch, epoch=epoch)
        spent.append(best.patience_spent(2))
    return spent


def test_patience_runs_out_after_that_many_validations_in_a_row_without_a_better_score():
    best, model = BestWeights(), nn.Linear(1, 1, bias=False)
    # A tie is no improvement; a better score starts the count again
    spent = validated(best, model, [0.70, 0.72, 0.72, 0.75, 0.74, 0.75])
    assert spent == [False, False, False, False, False, True]
    assert best.stale_validations == 2


def test_a_patience_of_zero_never_stops():
    best, model = BestWeights(), nn.Linear(1, 1, bias=False)
    validated(best, model, [0.9, 0.1, 0.1, 0.1, 0.1])
    assert best.stale_validations == 4
    assert not best.patience_spent(0)


def test_the_weights_kept_are_the_first_validation_no_later_one_beat():
    best, model = BestWeights(), nn.Linear(1, 1, bias=False)
    validated(best, model, [0.70, 0.75, 0.75, 0.74])
    # The model now holds epoch 4's weights; restoring puts epoch 2's back (the tie at epoch 3 kept the earlier)
    best.restore(model)
    assert model.weight.item() == 2.0
    assert best.provenance() == {"exported_step": 20, "exported_epoch": 2}


def test_a_resumed_run_keeps_the_best_weights_and_the_patience_already_spent():
    best, model = BestWeights(), nn.Linear(1, 1, bias=False)
    validated(best, model, [0.70, 0.75, 0.74])
    # Given the state a checkpoint carries (on the CPU), loaded by a fresh run
    resumed = BestWeights()
    resumed.load_state_dict(best.state_dict(), torch.device("cpu"))
    # Then one more validation without a better score runs out of a patience of 2, as in the uninterrupted run
    assert validated(resumed, model, [0.73]) == validated(best, model, [0.73]) == [True]
    resumed.restore(model)
    assert model.weight.item() == 2.0
