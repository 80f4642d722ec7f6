"""The `tuning` section of a manual payload or a dataset's manifest.json: the job becomes a hyperparameter tuning
job (CreateHyperParameterTuningJob) whose trials are the training job the trigger would otherwise start.

Parsed field by field like the overrides (every bad field named at once); the rules that need the whole job (the
scripts' flags, the strategy's rules, the cost ceiling, SageMaker's limits) are in tuning_guards.py.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from training_trigger.errors import InvalidInput
from training_trigger.hyperband import HYPERBAND, HyperbandResource, hyperband_resource
from training_trigger.limits import api_shape, shown
from training_trigger.settings import Settings

TUNING_KEY = "tuning"
RANGE_TYPES = ("continuous", "integer", "categorical")
RANGE_FIELDS = {"continuous": ("type", "min", "max", "scaling"), "integer": ("type", "min", "max", "scaling"),
                "categorical": ("type", "values")}
WARM_START_FIELDS = ("parents", "type")
# A warm start from earlier tuning jobs of the same dataset, whose data may be a newer version: TransferLearning
# lets the data, the ranges and the static hyperparameters differ (IdenticalDataAndAlgorithm lets none of them).
DEFAULT_WARM_START_TYPE = "TransferLearning"


@dataclass(frozen=True)
class ParameterRange:
    """One tuned hyperparameter: `continuous` and `integer` between `minimum` and `maximum` (SageMaker's
    ScalingType `scaling`), `categorical` one of `values`."""

    name: str
    type: str
    minimum: float | int | None = None
    maximum: float | int | None = None
    scaling: str = "Auto"
    values: tuple[str | int | float | bool, ...] = ()


@dataclass(frozen=True)
class TuningSection:
    """Each field None (or empty) means "the stack's default" (or, for the objective, the entry point's)."""

    objective_metric: str | None = None
    """The metric the tuning job optimises: the `Name` of one of the jobs' metric definitions; default for the
    project's `train_ddp.py` and `train_lightning.py`: `val_ndcg@10`; required for other scripts."""
    objective_type: str | None = None
    """`Maximize` or `Minimize`; default `Maximize` with the default objective, required with any other."""
    strategy: str | None = None
    """`Bayesian`, `Random`, `Hyperband` or `Grid`; default: the stack's `tuning_strategy`."""
    max_jobs: int | None = None
    """Most training jobs (trials) the tuning job starts; default: the stack's `tuning_max_jobs`. With `Grid`, the
    number of combinations of the categorical values, each tried once (given, it must equal that number)."""
    max_parallel_jobs: int | None = None
    """Most trials running at once, at most `max_jobs`; default: the stack's `tuning_max_parallel_jobs`, or `max_jobs`
    where that is fewer."""
    early_stopping: str | None = None
    """`Off` or `Auto` (SageMaker stops trials unlikely to beat the best so far); default: the stack's
    `tuning_early_stopping` (with `Hyperband`, which stops trials itself: `Off`, the only value it allows)."""
    min_resource: int | None = None
    """With `Hyperband`: the epochs a trial trains before Hyperband may stop it (`MinResource`); default 1."""
    max_resource: int | None = None
    """With `Hyperband`: the most epochs a trial may train (`MaxResource`, at most 20000); default: the job's static
    `epochs` (or `numepochs`, `n-epochs`, `n_epochs`, `num_epochs`) hyperparameter, else the project's scripts'
    `--epochs` default (30); required when neither is there, e.g. when `epochs` is tuned."""
    ranges: tuple[ParameterRange, ...] = ()
    """Tuned hyperparameters by flag name: `{"type": "continuous" | "integer", "min": ..., "max": ..., "scaling":
    "Auto" | "Linear" | "Logarithmic" | "ReverseLogarithmic"}` or `{"type": "categorical", "values": [...]}`;
    required, at most 30 in all; each is removed from the static hyperparameters. For the project's scripts each
    range must lie within what its flag accepts."""
    warm_start_parents: tuple[str, ...] = ()
    """`warm_start.parents`: up to 5 earlier tuning jobs of the same dataset whose trials seed the search;
    `warm_start.type`: `TransferLearning` (default) or `IdenticalDataAndAlgorithm`."""
    warm_start_type: str | None = None
    random_seed: int | None = None
    """Seed of the strategy's choices, for repeatable searches; default: none."""
    given: frozenset[str] = field(default_factory=frozenset)
    """The section's keys as written, so a later layer overrides only what it names."""

    def then(self, later: TuningSection) -> TuningSection:
        """This section with the fields `later` names on top (ranges and warm start each replaced whole)."""
        merged = {name: getattr(later if _key(name) in later.given else self, name)
                  for name in self.__dataclass_fields__ if name != "given"}
        return TuningSection(**merged, given=self.given | later.given)


def _key(field_name: str) -> str:
    """The section key a field comes from."""
    return "warm_start" if field_name.startswith("warm_start") else field_name


SECTION_FIELDS = tuple(dict.fromkeys(_key(name) for name in TuningSection.__dataclass_fields__ if name != "given"))


@dataclass(frozen=True)
class TuningJob:
    """A resolved tuning section: every field set, from the section, the entry point and the stack's defaults."""

    objective_metric: str
    objective_type: str
    strategy: str
    max_jobs: int
    max_parallel_jobs: int
    early_stopping: str
    ranges: tuple[ParameterRange, ...]
    warm_start_parents: tuple[str, ...] = ()
    warm_start_type: str = DEFAULT_WARM_START_TYPE
    random_seed: int | None = None
    hyperband: HyperbandResource | None = None
    """With strategy `Hyperband` only: the resource sent as `StrategyConfig.HyperbandStrategyConfig`."""


def _enum(shape_name: str) -> tuple[str, ...]:
    return tuple(api_shape(shape_name).enum)


def parse_tuning_section(section: Any, where: str) -> TuningSection:
    """The section's fields, each checked for its type and allowed values; raises InvalidInput naming each."""
    if not isinstance(section, Mapping):
        raise InvalidInput([f"{where}={shown(section)} is not an object: e.g. {{\"ranges\": {{\"epochs\": "
                            f"{{\"type\": \"integer\", \"min\": 2, \"max\": 8}}}}}}"])
    errors = [f"{where}.{name} is not a tuning field: use one of {list(SECTION_FIELDS)}"
              for name in section if name not in SECTION_FIELDS]

    def choice(name: str, shape_name: str) -> str | None:
        value, choices = section.get(name), _enum(shape_name)
        if value is not None and value not in choices:
            errors.append(f"{where}.{name}={shown(value)} is not one of {list(choices)}: pick one of them")
            return None
        return value

    def whole(name: str, minimum: int) -> int | None:
        value = section.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
            errors.append(f"{where}.{name}={shown(value)} is not a whole number >= {minimum}: e.g. {name}: 4")
            return None
        return value

    metric = section.get("objective_metric")
    if metric is not None and not (isinstance(metric, str) and metric):
        errors.append(f"{where}.objective_metric={shown(metric)} is not a metric name: give the Name of one of the "
                      f"jobs' metric definitions")
        metric = None
    parents, warm_start_type = (_warm_start(section["warm_start"], f"{where}.warm_start", errors)
                                if "warm_start" in section else ((), None))
    parsed = TuningSection(
        objective_metric=metric,
        objective_type=choice("objective_type", "HyperParameterTuningJobObjectiveType"),
        strategy=choice("strategy", "HyperParameterTuningJobStrategyType"),
        max_jobs=whole("max_jobs", 1),
        max_parallel_jobs=whole("max_parallel_jobs", 1),
        early_stopping=choice("early_stopping", "TrainingJobEarlyStoppingType"),
        min_resource=whole("min_resource", 1),
        max_resource=whole("max_resource", 1),
        ranges=_ranges(section.get("ranges"), f"{where}.ranges", errors) if "ranges" in section else (),
        warm_start_parents=parents, warm_start_type=warm_start_type,
        random_seed=whole("random_seed", 0),
        given=frozenset(name for name in section if name in SECTION_FIELDS),
    )
    if errors:
        raise InvalidInput(errors)
    return parsed


def _ranges(value: Any, where: str, errors: list[str]) -> tuple[ParameterRange, ...]:
    if not isinstance(value, Mapping) or not value:
        errors.append(f"{where}={shown(value)} is not an object of ranges by hyperparameter name: e.g. "
                      f"{{\"learning-rate\": {{\"type\": \"continuous\", \"min\": 0.0001, \"max\": 0.01, "
                      f"\"scaling\": \"Logarithmic\"}}}}")
        return ()
    return tuple(found for name, spec in value.items()
                 if (found := _range(str(name), spec, f"{where}.{name}", errors)) is not None)


def _range(name: str, spec: Any, where: str, errors: list[str]) -> ParameterRange | None:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if kind not in RANGE_TYPES:
        errors.append(f"{where}={shown(spec)} is not a range: give an object whose type is one of "
                      f"{list(RANGE_TYPES)}")
        return None
    unknown = [key for key in spec if key not in RANGE_FIELDS[kind]]
    if unknown:
        errors.append(f"{where}: {unknown} are not fields of a {kind} range: use {list(RANGE_FIELDS[kind])}")
        return None
    if kind == "categorical":
        values = spec.get("values")
        if not (isinstance(values, list) and values and all(isinstance(item, (str, int, float, bool))
                                                            for item in values)):
            errors.append(f"{where}.values={shown(values)} is not a non-empty list of strings, numbers or booleans")
            return None
        if len(set(map(str, values))) != len(values):
            errors.append(f"{where}.values={shown(values)} repeats a value: list each once")
        return ParameterRange(name=name, type=kind, values=tuple(values))
    number = int if kind == "integer" else (int, float)
    bounds = {}
    for key in ("min", "max"):
        bound = spec.get(key)
        if isinstance(bound, bool) or not isinstance(bound, number):
            errors.append(f"{where}.{key}={shown(bound)} is not {'a whole number' if kind == 'integer' else 'a number'}"
                          f": give both min and max")
        bounds[key] = bound
    scaling = spec.get("scaling", "Auto")
    if scaling not in _enum("HyperParameterScalingType"):
        errors.append(f"{where}.scaling={shown(scaling)} is not one of {list(_enum('HyperParameterScalingType'))}")
    return ParameterRange(name=name, type=kind, minimum=bounds["min"], maximum=bounds["max"], scaling=scaling)


def _warm_start(value: Any, where: str, errors: list[str]) -> tuple[tuple[str, ...], str | None]:
    if not isinstance(value, Mapping) or any(key not in WARM_START_FIELDS for key in value):
        errors.append(f"{where}={shown(value)} is not an object with {list(WARM_START_FIELDS)}: e.g. "
                      f"{{\"parents\": [\"<an earlier tuning job of this dataset>\"]}}")
        return (), None
    parents = value.get("parents")
    if not (isinstance(parents, list) and parents and all(isinstance(name, str) for name in parents)):
        errors.append(f"{where}.parents={shown(parents)} is not a non-empty list of tuning job names")
        parents = []
    kind = value.get("type")
    if kind is not None and kind not in _enum("HyperParameterTuningJobWarmStartType"):
        errors.append(f"{where}.type={shown(kind)} is not one of "
                      f"{list(_enum('HyperParameterTuningJobWarmStartType'))}")
        kind = None
    return tuple(parents), kind


def resolve_tuning(section: TuningSection, *, entry_point: str, settings: Settings, where: str,
                   hyperparameters: Mapping[str, Any]) -> TuningJob:
    """Every field set: the section's, else the entry point's objective (and, for Hyperband, the job's epochs in
    `hyperparameters`, the merged ones), else the stack's defaults. Raises InvalidInput when a required field is
    missing."""
    errors = []
    default_objective = settings.default_tuning_objective if entry_point in settings.checked_entry_points else {}
    metric = section.objective_metric or default_objective.get("MetricName")
    kind = section.objective_type or (default_objective.get("Type")
                                      if metric == default_objective.get("MetricName") else None)
    if not metric:
        errors.append(f"{where}.objective_metric is missing: entry_point={entry_point!r} has no default objective; "
                      f"name one of the jobs' metrics {_metric_names(settings)}")
    elif metric not in _metric_names(settings):
        # Before its direction: a misspelt default objective would otherwise be asked for objective_type first.
        errors.append(_unknown_objective(metric, settings, where))
    elif not kind:
        errors.append(f"{where}.objective_type is missing for objective_metric={metric!r}: give Maximize or Minimize")
    if not section.ranges:
        errors.append(f"{where}.ranges is missing: name at least one hyperparameter to tune, e.g. {{\"epochs\": "
                      f"{{\"type\": \"integer\", \"min\": 2, \"max\": 8}}}}")
    strategy = section.strategy or settings.tuning_strategy
    hyperband = None
    if strategy == HYPERBAND:
        checked = entry_point in settings.checked_entry_points
        hyperband, missing = hyperband_resource(
            min_resource=section.min_resource, max_resource=section.max_resource, hyperparameters=hyperparameters,
            tuned=[found.name for found in section.ranges], where=where,
            default_epochs=settings.training_flags.get("flags", {}).get("epochs", {}).get("default") if checked else None)
        errors += missing
    else:
        # StrategyConfig is for Hyperband only (CreateHyperParameterTuningJob's HyperbandStrategyConfig reference).
        errors += [f"{where}.{name} is for strategy 'Hyperband' only, not {strategy!r}: remove it, or set "
                   f"strategy 'Hyperband'" for name in ("min_resource", "max_resource")
                   if getattr(section, name) is not None]
    if errors:
        raise InvalidInput(errors)
    # Grid tries every combination once: that count is its natural number of trials.
    grid_default = grid_combinations(section.ranges) if strategy == "Grid" else None
    max_jobs = section.max_jobs or grid_default or settings.tuning_max_jobs
    return TuningJob(
        objective_metric=metric, objective_type=kind, strategy=strategy, max_jobs=max_jobs,
        # Defaults bend to what the section asks: no more parallel trials than trials, and Hyperband stops trials
        # itself (SageMaker refuses early stopping with it).
        max_parallel_jobs=section.max_parallel_jobs or min(settings.tuning_max_parallel_jobs, max_jobs),
        early_stopping=section.early_stopping or ("Off" if strategy == HYPERBAND else settings.tuning_early_stopping),
        ranges=section.ranges, warm_start_parents=section.warm_start_parents,
        warm_start_type=section.warm_start_type or DEFAULT_WARM_START_TYPE, random_seed=section.random_seed,
        hyperband=hyperband,
    )


def _metric_names(settings: Settings) -> list[str]:
    return [definition["Name"] for definition in settings.metric_definitions]


def _unknown_objective(metric: str, settings: Settings, where: str) -> str:
    names = _metric_names(settings)
    close = difflib.get_close_matches(metric, names, n=3)
    meant = f" (did you mean {close}?)" if close else ""
    return (f"{where}.objective_metric={metric!r} is not one of the jobs' metric definitions {names}{meant}: "
            f"SageMaker reads the objective from the training log with one of them; name one, or add it to "
            f"metric_definitions in the pipeline configuration")


def grid_combinations(ranges: tuple[ParameterRange, ...]) -> int | None:
    """How many trials a Grid search over `ranges` has, or None when a range is not categorical."""
    count = 1
    for found in ranges:
        if found.type != "categorical":
            return None
        count *= len(found.values)
    return count
