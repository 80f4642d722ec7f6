"""How local tuning jobs choose their trials: the service's Grid and Random rules, checked without running any."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from local_mode.sagemaker_api.service_errors import ServiceError
from local_mode.sagemaker_api.tuning_search import emulation_notes, parse_ranges, trial_hyperparameters


def config(strategy: str, ranges: dict, max_jobs: int | None = None, **extra) -> dict:
    limits = {"MaxParallelTrainingJobs": 1, **({"MaxNumberOfTrainingJobs": max_jobs} if max_jobs else {})}
    return {"Strategy": strategy, "ResourceLimits": limits, "ParameterRanges": ranges, **extra}


def trials(settings: dict) -> list[dict[str, str]]:
    return trial_hyperparameters(settings, parse_ranges(settings["ParameterRanges"], set()))


LOG_RATE = {"ContinuousParameterRanges": [{"Name": "learning-rate", "MinValue": "0.0001", "MaxValue": "0.1",
                                           "ScalingType": "Logarithmic"}]}


def test_a_grid_is_every_combination_once_with_the_first_range_slowest():
    ranges = {"CategoricalParameterRanges": [{"Name": "loss", "Values": ["listnet", "lambdarank"]},
                                             {"Name": "layers", "Values": ["1", "2", "3"]}]}
    assert trials(config("Grid", ranges)) == [
        {"loss": "listnet", "layers": "1"}, {"loss": "listnet", "layers": "2"}, {"loss": "listnet", "layers": "3"},
        {"loss": "lambdarank", "layers": "1"}, {"loss": "lambdarank", "layers": "2"},
        {"loss": "lambdarank", "layers": "3"}]


@pytest.mark.parametrize("max_jobs", [1, 3])
def test_a_grid_whose_max_jobs_is_not_its_size_is_refused(max_jobs):
    # SageMaker: "If specified, the value of MaxNumberOfTrainingJobs should equal the total number of distinct
    # categorical combinations possible" (the trigger's guard refuses the same, tests/unit/trigger/test_tuning.py).
    ranges = {"CategoricalParameterRanges": [{"Name": "loss", "Values": ["listnet", "lambdarank"]}]}
    with pytest.raises(ServiceError, match=f"MaxNumberOfTrainingJobs is {max_jobs}, but the grid has 2 combinations"):
        trials(config("Grid", ranges, max_jobs=max_jobs))


def test_a_grid_may_name_its_size():
    ranges = {"CategoricalParameterRanges": [{"Name": "loss", "Values": ["listnet", "lambdarank"]}]}
    assert len(trials(config("Grid", ranges, max_jobs=2))) == 2


def test_random_draws_are_reproducible_with_a_seed_and_differ_without():
    seeded = config("Random", LOG_RATE, max_jobs=5, RandomSeed=42)
    assert trials(seeded) == trials(seeded)
    assert trials(seeded) != trials(config("Random", LOG_RATE, max_jobs=5, RandomSeed=43))
    assert trials(config("Random", LOG_RATE, max_jobs=5)) != trials(config("Random", LOG_RATE, max_jobs=5))


def test_log_scaling_spreads_draws_evenly_over_the_decades():
    drawn = [float(trial["learning-rate"]) for trial in trials(config("Random", LOG_RATE, max_jobs=3000,
                                                                      RandomSeed=0))]
    assert all(0.0001 <= value <= 0.1 for value in drawn)
    decades = Counter(math.floor(math.log10(value)) for value in drawn)
    # Three decades, a third of the draws each (a uniform draw would put 90% in the last one)
    assert all(abs(decades[decade] / len(drawn) - 1 / 3) < 0.04 for decade in (-4, -3, -2))


def test_integer_draws_cover_both_ends_and_log_scaled_integers_favour_small_values():
    linear = {"IntegerParameterRanges": [{"Name": "epochs", "MinValue": "1", "MaxValue": "4",
                                          "ScalingType": "Linear"}]}
    values = Counter(trial["epochs"] for trial in trials(config("Random", linear, max_jobs=400, RandomSeed=1)))
    assert set(values) == {"1", "2", "3", "4"}
    logarithmic = {"IntegerParameterRanges": [{"Name": "width", "MinValue": "1", "MaxValue": "100",
                                               "ScalingType": "Logarithmic"}]}
    widths = [int(trial["width"]) for trial in trials(config("Random", logarithmic, max_jobs=2000, RandomSeed=1))]
    assert min(widths) >= 1 and max(widths) <= 100
    # log-uniform: about as many draws below 10 as from 10 up
    assert 0.4 < sum(width < 10 for width in widths) / len(widths) < 0.6


def test_reverse_logarithmic_draws_crowd_towards_one():
    reverse = {"ContinuousParameterRanges": [{"Name": "momentum", "MinValue": "0.0", "MaxValue": "0.999",
                                              "ScalingType": "ReverseLogarithmic"}]}
    drawn = [float(trial["momentum"]) for trial in trials(config("Random", reverse, max_jobs=1000, RandomSeed=2))]
    assert all(0 <= value <= 0.999 for value in drawn)
    assert 0.25 < sum(value > 0.99 for value in drawn) / len(drawn) < 0.42  # one decade of 1 - x in three


@pytest.mark.parametrize(("ranges", "message"), [
    ({"IntegerParameterRanges": [{"Name": "epochs", "MinValue": "5", "MaxValue": "2"}]}, "MinValue 5 is above"),
    ({"IntegerParameterRanges": [{"Name": "epochs", "MinValue": "1.5", "MaxValue": "2"}]}, "must be integers"),
    ({"IntegerParameterRanges": [{"Name": "epochs", "MinValue": "1", "MaxValue": "2",
                                  "ScalingType": "ReverseLogarithmic"}]}, "continuous ranges only"),
    ({"ContinuousParameterRanges": [{"Name": "momentum", "MinValue": "0.5", "MaxValue": "1",
                                     "ScalingType": "ReverseLogarithmic"}]}, "MaxValue < 1"),
    ({"IntegerParameterRanges": [{"Name": "epochs", "MinValue": "1", "MaxValue": "2"}],
      "CategoricalParameterRanges": [{"Name": "epochs", "Values": ["3"]}]}, "['epochs'] appear in more than one"),
])
def test_ranges_the_service_refuses(ranges, message):
    with pytest.raises(ServiceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_ranges(ranges, set())


def test_the_notes_say_what_local_mode_does_differently():
    assert emulation_notes(config("Random", LOG_RATE, max_jobs=2)) == []
    notes = emulation_notes(config("Bayesian", LOG_RATE, max_jobs=2, TrainingJobEarlyStoppingType="Auto"))
    assert notes[0].startswith("the Bayesian strategy ran as random search")
    assert notes[1].startswith("early stopping is not emulated")
