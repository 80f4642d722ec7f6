"""The learning-rate schedule's rule (ranker.training.schedule.PlateauDecay): warm-up, the peak rate until validation
stalls, a decay after that many validations in a row without a better NDCG@10, and all of it carried through a
checkpoint."""

from __future__ import annotations

import pytest
import torch
from ranker.training.schedule import PlateauDecay

PEAK = 0.01


def schedule(
    decay_patience: int = 2, decay_factor: float = 0.1, warmup_steps: int = 4, total_steps: int = 100
) -> PlateauDecay:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=PEAK)
    return PlateauDecay(
        optimizer,
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        decay_patience=decay_patience,
        decay_factor=decay_factor,
    )


def rate(scheduler: PlateauDecay) -> float:
    """What the optimizer's next step uses."""
    return scheduler.optimizer.param_groups[0]["lr"]


def steps(scheduler: PlateauDecay, count: int) -> None:
    for _ in range(count):
        scheduler.optimizer.step()
        scheduler.step()


def test_the_rate_warms_up_linearly_then_holds_its_peak_while_validation_improves():
    scheduler = schedule(warmup_steps=4)
    # Given the rate of the first step, a quarter of the peak
    assert rate(scheduler) == pytest.approx(PEAK / 4)
    steps(scheduler, 3)
    assert rate(scheduler) == pytest.approx(PEAK)
    # When validation keeps improving over many more steps, Then the rate stays at the peak
    for score in (0.5, 0.6, 0.7):
        scheduler.record_validation(score)
        steps(scheduler, 30)
    assert rate(scheduler) == pytest.approx(PEAK)


def test_the_rate_drops_after_that_many_stalled_validations_and_not_before():
    scheduler = schedule(decay_patience=2, decay_factor=0.1)
    steps(scheduler, 10)
    scheduler.record_validation(0.70)
    # A tie is no improvement: one stalled validation leaves the rate at its peak
    scheduler.record_validation(0.70)
    assert rate(scheduler) == pytest.approx(PEAK)
    # The second in a row decays it at once, for the very next step, and the steps after keep it there
    scheduler.record_validation(0.69)
    assert rate(scheduler) == pytest.approx(PEAK * 0.1)
    steps(scheduler, 5)
    assert rate(scheduler) == pytest.approx(PEAK * 0.1)
    # The count starts again after a decay: one more stall waits, the next decays again
    scheduler.record_validation(0.69)
    assert rate(scheduler) == pytest.approx(PEAK * 0.1)
    scheduler.record_validation(0.69)
    assert rate(scheduler) == pytest.approx(PEAK * 0.01)


def test_a_better_validation_starts_the_count_again():
    scheduler = schedule(decay_patience=2)
    steps(scheduler, 10)
    for score in (0.70, 0.65, 0.71, 0.70):
        scheduler.record_validation(score)
    # Two stalls in all, but not in a row: no decay
    assert rate(scheduler) == pytest.approx(PEAK)


def test_with_a_patience_of_zero_the_rate_follows_a_cosine_to_zero_whatever_validation_says():
    scheduler = schedule(decay_patience=0, warmup_steps=10, total_steps=110)
    steps(scheduler, 9)
    assert rate(scheduler) == pytest.approx(PEAK)
    steps(scheduler, 51)  # half the steps after warm-up
    for score in (0.7, 0.6, 0.5, 0.4):
        scheduler.record_validation(score)
    assert rate(scheduler) == pytest.approx(PEAK / 2)
    steps(scheduler, 50)
    assert rate(scheduler) == pytest.approx(0.0, abs=1e-12)


def test_a_resumed_schedule_keeps_its_decays_and_its_count():
    # Given a schedule that decayed once and has one stalled validation since
    scheduler = schedule(decay_patience=2)
    steps(scheduler, 10)
    for score in (0.70, 0.60, 0.60, 0.60):
        scheduler.record_validation(score)
    saved = scheduler.state_dict()
    # When a fresh one (as a resumed run builds it) loads the checkpoint's state
    resumed = schedule(decay_patience=2)
    resumed.load_state_dict(saved)
    steps(scheduler, 1)
    steps(resumed, 1)
    # Then it steps to the same decayed rate, and one more stall decays both again
    assert rate(resumed) == rate(scheduler) == pytest.approx(PEAK * 0.1)
    resumed.record_validation(0.65)
    scheduler.record_validation(0.65)
    assert rate(resumed) == rate(scheduler) == pytest.approx(PEAK * 0.01)
