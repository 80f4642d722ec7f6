"""What a tuning job's trials try: its ParameterRanges checked as the service checks them, then sampled as its Grid
and Random strategies do.

Grid: categorical ranges only; every combination of their values once, in order, the first range varying slowest;
MaxNumberOfTrainingJobs may be left out and otherwise must equal the number of combinations. Random: each trial
draws each range independently: uniform for Linear (and Auto, which locally means Linear), log-uniform for
Logarithmic (integers included), and for ReverseLogarithmic uniform in log(1 - x). Random draws are reproducible
with the request's RandomSeed. Bayesian and Hyperband learn from earlier trials in the cloud; locally they draw as
Random does (`emulation_notes` says so, and that early stopping is not emulated).

Values reach the training job as strings: integers as decimal digits, continuous values as Python's shortest
round-trip float text, categorical values exactly as listed.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any

from local_mode.sagemaker_api.service_errors import validation_error

RANGE_KINDS = ("IntegerParameterRanges", "ContinuousParameterRanges", "CategoricalParameterRanges")
LOCALLY_RANDOM_STRATEGIES = ("Bayesian", "Hyperband")
# The service's limit on tunable hyperparameters across all range kinds (each list alone is capped by the model).
MAX_TUNED_HYPERPARAMETERS = 30


@dataclass(frozen=True)
class ParameterRange:
    name: str
    kind: str  # one of RANGE_KINDS
    low: float = 0.0
    high: float = 0.0
    scaling: str = "Auto"
    values: tuple[str, ...] = ()


def parse_ranges(ranges: dict[str, Any], static_names: set[str]) -> list[ParameterRange]:
    """The request's ParameterRanges in request order; ValidationException naming the field for what the service
    refuses (bounds that are not numbers or out of order, log scaling of non-positive values, a name tuned twice or
    also static)."""
    parsed: list[ParameterRange] = []
    for kind in RANGE_KINDS:
        for index, entry in enumerate(ranges.get(kind, [])):
            field = f"HyperParameterTuningJobConfig.ParameterRanges.{kind}[{index}]"
            if kind == "CategoricalParameterRanges":
                parsed.append(ParameterRange(entry["Name"], kind, values=tuple(entry["Values"])))
            else:
                parsed.append(_numeric_range(entry, kind, field))
    if ranges.get("AutoParameters"):
        raise validation_error("HyperParameterTuningJobConfig.ParameterRanges.AutoParameters: local mode does not "
                               "run Autotune; give Integer, Continuous or Categorical ranges instead")
    if len(parsed) > MAX_TUNED_HYPERPARAMETERS:
        raise validation_error(f"HyperParameterTuningJobConfig.ParameterRanges: {len(parsed)} tunable "
                               f"hyperparameters; a tuning job searches at most {MAX_TUNED_HYPERPARAMETERS}")
    names = [item.name for item in parsed]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise validation_error(f"HyperParameterTuningJobConfig.ParameterRanges: {repeated} appear in more than one "
                               "range; give each hyperparameter one range")
    both = sorted(set(names) & static_names)
    if both:
        raise validation_error(f"TrainingJobDefinition.StaticHyperParameters: {both} are also tuned; remove them "
                               "from the static hyperparameters")
    return parsed


def _numeric_range(entry: dict[str, Any], kind: str, field: str) -> ParameterRange:
    parse = int if kind == "IntegerParameterRanges" else float
    try:
        low, high = parse(entry["MinValue"]), parse(entry["MaxValue"])
    except ValueError:
        raise validation_error(f"{field}: MinValue {entry['MinValue']!r} and MaxValue {entry['MaxValue']!r} must be "
                               f"{'integers' if parse is int else 'numbers'}") from None
    scaling = entry.get("ScalingType", "Auto")
    if low > high:
        raise validation_error(f"{field}: MinValue {low} is above MaxValue {high}; swap them")
    if scaling == "Logarithmic" and low <= 0:
        raise validation_error(f"{field}: Logarithmic scaling needs MinValue above 0, got {low}; use Linear, or a "
                               "positive MinValue")
    if scaling == "ReverseLogarithmic":
        if kind == "IntegerParameterRanges":
            raise validation_error(f"{field}: ReverseLogarithmic scaling applies to continuous ranges only; use "
                                   "Linear or Logarithmic")
        if low < 0 or high >= 1:
            raise validation_error(f"{field}: ReverseLogarithmic scaling needs 0 <= MinValue and MaxValue < 1, got "
                                   f"[{low}, {high}]")
    return ParameterRange(entry["Name"], kind, low=low, high=high, scaling=scaling)


def trial_hyperparameters(config: dict[str, Any], ranges: list[ParameterRange]) -> list[dict[str, str]]:
    """The tuned values of every trial the job will run, in launch order (neither strategy looks at results)."""
    strategy = config["Strategy"]
    limit = config["ResourceLimits"].get("MaxNumberOfTrainingJobs")
    if strategy == "Grid":
        return _grid(ranges, limit)
    if limit is None:
        raise validation_error(f"HyperParameterTuningJobConfig.ResourceLimits.MaxNumberOfTrainingJobs is required "
                               f"for the {strategy} strategy (only Grid computes it); set the number of trials")
    seed = config.get("RandomSeed")
    rng = random.Random(seed) if seed is not None else random.Random()
    return [{item.name: _draw(item, rng) for item in ranges} for _ in range(limit)]


def _grid(ranges: list[ParameterRange], limit: int | None) -> list[dict[str, str]]:
    numeric = [item.name for item in ranges if item.kind != "CategoricalParameterRanges"]
    if numeric:
        raise validation_error(f"HyperParameterTuningJobConfig.ParameterRanges: the Grid strategy searches "
                               f"categorical ranges only, and {numeric} are integer or continuous; list their values "
                               "as CategoricalParameterRanges, or use the Random strategy")
    if not ranges:
        raise validation_error("HyperParameterTuningJobConfig.ParameterRanges: the Grid strategy needs at least one "
                               "CategoricalParameterRanges entry")
    combinations = [dict(zip([item.name for item in ranges], values))
                    for values in itertools.product(*(item.values for item in ranges))]
    if limit is not None and limit != len(combinations):
        raise validation_error(f"HyperParameterTuningJobConfig.ResourceLimits.MaxNumberOfTrainingJobs is {limit}, but "
                               f"the grid has {len(combinations)} combinations; leave it out or set it to "
                               f"{len(combinations)}")
    return combinations


def _draw(item: ParameterRange, rng: random.Random) -> str:
    if item.kind == "CategoricalParameterRanges":
        return rng.choice(item.values)
    if item.kind == "IntegerParameterRanges":
        if item.scaling == "Logarithmic":
            # Log-uniform over [low, high + 1): each integer gets the share of the log axis up to its successor.
            drawn = math.exp(rng.uniform(math.log(item.low), math.log(item.high + 1)))
            return str(min(int(drawn), int(item.high)))
        return str(rng.randint(int(item.low), int(item.high)))
    if item.scaling == "Logarithmic":
        return repr(math.exp(rng.uniform(math.log(item.low), math.log(item.high))))
    if item.scaling == "ReverseLogarithmic":
        return repr(1 - math.exp(rng.uniform(math.log(1 - item.high), math.log(1 - item.low))))
    return repr(rng.uniform(item.low, item.high))


def emulation_notes(config: dict[str, Any]) -> list[str]:
    """Where a tuning job with this HyperParameterTuningJobConfig behaves differently here than in the cloud."""
    notes = []
    if config["Strategy"] in LOCALLY_RANDOM_STRATEGIES:
        notes.append(f"the {config['Strategy']} strategy ran as random search (local mode does not model earlier "
                     "trials' results)")
    if config.get("TrainingJobEarlyStoppingType", "Off") != "Off":
        notes.append("early stopping is not emulated: every trial ran to its end")
    if config.get("TuningJobCompletionCriteria"):
        notes.append("TuningJobCompletionCriteria are not emulated: the job ran all its trials")
    if "MaxRuntimeInSeconds" in config["ResourceLimits"]:
        notes.append("ResourceLimits.MaxRuntimeInSeconds is not enforced (each trial's StoppingCondition is)")
    return notes
