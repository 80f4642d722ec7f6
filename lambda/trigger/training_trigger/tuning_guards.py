"""A tuning job's rules, checked before any call (dry runs included): the scripts' own flags for each range, the
rules of SageMaker's ranges and strategies, the limits of its API model, the warm start's parents, and the cost
ceiling counted over every trial the tuning job may start. Each error names the field, the value and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from training_trigger.hyperband import HYPERBAND, hyperband_resource_errors
from training_trigger.hyperparameter_flags import flag_kind, flag_problem
from training_trigger.job_names import job_name_errors
from training_trigger.limits import api_shape, hyperparameter_key_errors
from training_trigger.overrides import RESERVED_HYPERPARAMETER_PREFIX
from training_trigger.planning import TrainingJobSpec
from training_trigger.settings import Settings
from training_trigger.tuning import ParameterRange, TuningJob, grid_combinations

WHERE = "tuning"
SECONDS_PER_HOUR = 3600


def tuning_errors(tuning: TuningJob, spec: TrainingJobSpec, settings: Settings) -> list[str]:
    errors = _strategy_errors(tuning) + _cost_errors(tuning, spec, settings)
    errors += _warm_start_errors(tuning, settings.job_name_prefix)
    # The API allows 30 ranges in all (each kind's list says 30; the API reference: the total, too).
    most = api_shape("ContinuousParameterRanges").metadata["max"]
    if len(tuning.ranges) > most:
        errors.append(f"{WHERE}.ranges: {len(tuning.ranges)} ranges exceed SageMaker's {most} per tuning job: tune "
                      f"fewer hyperparameters")
    checked = spec.entry_point in settings.checked_entry_points
    for found in tuning.ranges:
        errors += range_errors(found, f"{WHERE}.ranges.{found.name}")
        if checked:
            errors += range_flag_errors(found, settings.training_flags, f"{WHERE}.ranges.{found.name}")
    return errors


def range_errors(found: ParameterRange, where: str) -> list[str]:
    """SageMaker's own rules for one range (CreateHyperParameterTuningJob's ParameterRanges)."""
    errors = hyperparameter_key_errors(found.name, where)
    if found.name.startswith(RESERVED_HYPERPARAMETER_PREFIX):
        errors.append(f"{where}: {found.name!r} is set by the trigger itself and cannot be tuned: remove it")
    if found.type == "categorical":
        most = api_shape("ParameterValues").metadata["max"]
        if len(found.values) > most:
            errors.append(f"{where}.values: {len(found.values)} values exceed SageMaker's {most}: list fewer")
        return errors
    low, high = found.minimum, found.maximum
    if not all(isinstance(bound, (int, float)) and math.isfinite(bound) for bound in (low, high)):
        return errors + [f"{where}: min={low!r} and max={high!r} must be finite numbers"]
    if low >= high:
        errors.append(f"{where}: min={low!r} is not below max={high!r}: give min < max (a fixed value belongs in "
                      f"hyperparameters)")
    if found.scaling == "Logarithmic" and low <= 0:
        errors.append(f"{where}: scaling 'Logarithmic' needs min > 0, not min={low!r}: raise min or use 'Linear'")
    if found.scaling == "ReverseLogarithmic":
        if found.type == "integer":
            errors.append(f"{where}: scaling 'ReverseLogarithmic' is for continuous ranges only: use 'Linear' or "
                          f"'Logarithmic'")
        elif low < 0 or high >= 1:
            errors.append(f"{where}: scaling 'ReverseLogarithmic' needs 0 <= min and max < 1, not [{low!r}, "
                          f"{high!r}]: use 'Linear' or 'Logarithmic'")
    return errors


def range_flag_errors(found: ParameterRange, definitions: Mapping[str, Any], where: str) -> list[str]:
    """The project's scripts' flag rules for every value the range can give: its bounds, or each of its values."""
    kind = flag_kind(found.name, definitions)
    if kind is None:
        return [f"{where}{flag_problem(found.name, None, definitions)}"]
    if found.type == "categorical":
        return [f"{where}.values{problem}" for value in found.values
                if (problem := flag_problem(found.name, value, definitions))]
    if kind not in ("int", "float"):
        return [f"{where}: --{found.name.replace('_', '-')} takes {kind} values, not numbers from a {found.type} "
                f"range: use a categorical range"]
    if kind == "int" and found.type == "continuous":
        return [f"{where}: --{found.name.replace('_', '-')} takes whole numbers, and a continuous range gives "
                f"fractions: use an integer range"]
    return [f"{where}.{bound}{problem}" for bound, value in (("min", found.minimum), ("max", found.maximum))
            if (problem := flag_problem(found.name, value, definitions))]


def _strategy_errors(tuning: TuningJob) -> list[str]:
    errors = []
    if tuning.max_parallel_jobs > tuning.max_jobs:
        errors.append(f"{WHERE}.max_parallel_jobs={tuning.max_parallel_jobs} exceeds max_jobs={tuning.max_jobs}: "
                      f"lower it")
    if tuning.strategy == HYPERBAND and tuning.early_stopping != "Off":
        errors.append(f"{WHERE}.early_stopping={tuning.early_stopping!r} with strategy 'Hyperband', which stops "
                      f"trials itself: set early_stopping 'Off'")
    if tuning.hyperband is not None:
        errors += hyperband_resource_errors(tuning.hyperband, WHERE)
    if tuning.strategy == "Grid":
        combinations = grid_combinations(tuning.ranges)
        if combinations is None:
            errors.append(f"{WHERE}.strategy='Grid' searches categorical ranges only: make every range "
                          f"categorical, or use 'Bayesian' or 'Random'")
        elif tuning.max_jobs != combinations:
            # SageMaker's Grid search runs every combination once, and MaxNumberOfTrainingJobs, when given, must
            # equal their number (automatic-model-tuning-how-it-works.html, "Grid search").
            errors.append(f"{WHERE}.max_jobs={tuning.max_jobs} is not the {combinations} combinations a Grid search "
                          f"runs, each once: leave max_jobs out, or set it to {combinations}")
    return errors


def _cost_errors(tuning: TuningJob, spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """Every trial may run on all its instances for its whole max_runtime: that is what the ceiling bounds."""
    hours = tuning.max_jobs * spec.instance_count * spec.max_runtime / SECONDS_PER_HOUR
    if hours <= settings.max_tuning_instance_hours:
        return []
    affordable = int(settings.max_tuning_instance_hours * SECONDS_PER_HOUR // (spec.instance_count * spec.max_runtime))
    return [f"{WHERE}.max_jobs={tuning.max_jobs} x instance_count={spec.instance_count} x max_runtime="
            f"{spec.max_runtime} s may use {hours:g} instance-hours, over the pipeline's ceiling "
            f"max_tuning_instance_hours={settings.max_tuning_instance_hours}: ask for at most {affordable} jobs, "
            f"lower max_runtime or instance_count, or raise max_tuning_instance_hours in the pipeline configuration "
            f"and redeploy"]


def _warm_start_errors(tuning: TuningJob, prefix: str) -> list[str]:
    """How many parents, and names the trigger may touch; whether each is of this dataset is read from SageMaker
    (warm_start.py)."""
    if not tuning.warm_start_parents:
        return []
    errors = []
    most = api_shape("ParentHyperParameterTuningJobs").metadata["max"]
    if len(tuning.warm_start_parents) > most:
        errors.append(f"{WHERE}.warm_start.parents: {len(tuning.warm_start_parents)} jobs exceed SageMaker's "
                      f"{most}: keep the best ones")
    for parent in tuning.warm_start_parents:
        errors += [f"{WHERE}.warm_start.parents: {error}" for error in job_name_errors(parent, prefix, tuning=True)]
    return errors
