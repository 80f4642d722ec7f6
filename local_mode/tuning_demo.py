"""The demo's tuning parts: `--tune NAME=SPEC` ranges, the manifest's `tuning` section they make, the
CreateHyperParameterTuningJob request around the training request the trigger builds and checks (for a trigger that
does not start tuning jobs itself), and the summary of a finished tuning job (its trials, its best job, what local
mode did differently, and the registrar's answer).

A range SPEC is `continuous:MIN:MAX[:log]`, `integer:MIN:MAX[:log]` or `categorical:VALUE,VALUE,...`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.model import Shape

from local_mode.request_validation import operation_model
from local_mode.tuning_search import emulation_notes

_KINDS = {"continuous": "ContinuousParameterRanges", "integer": "IntegerParameterRanges",
          "categorical": "CategoricalParameterRanges"}
_SPEC_HELP = "write NAME=continuous:MIN:MAX[:log], NAME=integer:MIN:MAX[:log] or NAME=categorical:A,B,..."


@dataclass(frozen=True)
class TuningOptions:
    """What `--tune` and its companions ask for; the trials run the demo's training job with these values."""

    ranges: tuple[tuple[str, str], ...]
    """(hyperparameter name, range spec) pairs, as `--tune NAME=SPEC` gives them."""
    strategy: str = "Random"
    max_jobs: int | None = 4
    """MaxNumberOfTrainingJobs; None for a Grid, whose size is its number of combinations."""
    max_parallel_jobs: int = 2
    objective_metric: str = "val_ndcg@10"
    objective_type: str = "Maximize"
    random_seed: int | None = None
    early_stopping: str = "Off"


def parameter_ranges(ranges: tuple[tuple[str, str], ...]) -> dict[str, list[dict[str, Any]]]:
    """ParameterRanges from `--tune` specs; ValueError naming the spec and the fix."""
    parsed: dict[str, list[dict[str, Any]]] = {}
    for name, spec in ranges:
        kind, _, rest = spec.partition(":")
        if kind not in _KINDS or not rest:
            raise ValueError(f"--tune {name}={spec}: {_SPEC_HELP}")
        if kind == "categorical":
            entry: dict[str, Any] = {"Name": name, "Values": rest.split(",")}
        else:
            bounds = rest.split(":")
            if len(bounds) not in (2, 3) or (len(bounds) == 3 and bounds[2] != "log"):
                raise ValueError(f"--tune {name}={spec}: {_SPEC_HELP}")
            entry = {"Name": name, "MinValue": bounds[0], "MaxValue": bounds[1],
                     "ScalingType": "Logarithmic" if len(bounds) == 3 else "Linear"}
        parsed.setdefault(_KINDS[kind], []).append(entry)
    return parsed


def manifest_section(options: TuningOptions) -> dict[str, Any]:
    """The manifest's `tuning` section (docs/tuning.md) asking for this tuning job."""
    ranges: dict[str, dict[str, Any]] = {}
    for kind, entries in parameter_ranges(options.ranges).items():
        for entry in entries:
            if kind == "CategoricalParameterRanges":
                ranges[entry["Name"]] = {"type": "categorical", "values": entry["Values"]}
                continue
            number = int if kind == "IntegerParameterRanges" else float
            ranges[entry["Name"]] = {"type": "integer" if number is int else "continuous",
                                     "min": number(entry["MinValue"]), "max": number(entry["MaxValue"]),
                                     "scaling": entry["ScalingType"]}
    section: dict[str, Any] = {"objective_metric": options.objective_metric, "objective_type": options.objective_type,
                               "strategy": options.strategy, "max_parallel_jobs": options.max_parallel_jobs,
                               "early_stopping": options.early_stopping, "ranges": ranges}
    if options.max_jobs is not None:
        section["max_jobs"] = options.max_jobs
    if options.random_seed is not None:
        section["random_seed"] = options.random_seed
    return section


def tuning_job_request(training_request: dict[str, Any], *, name: str, options: TuningOptions) -> dict[str, Any]:
    """The tuning job whose TrainingJobDefinition is `training_request` (CreateTrainingJob), its tuned
    hyperparameters taken out of the static ones, its checkpoints left out and its tags moved to the tuning job."""
    ranges = parameter_ranges(options.ranges)
    tuned = {entry["Name"] for entries in ranges.values() for entry in entries}
    definition = _within(training_request, operation_model("CreateHyperParameterTuningJob").input_shape.members[
        "TrainingJobDefinition"])
    # Every trial gets the definition's CheckpointConfig unchanged: trials sharing one checkpoint prefix would each
    # resume from another trial's snapshot, so the tuning job's trials keep no checkpoints.
    definition.pop("CheckpointConfig", None)
    definition["StaticHyperParameters"] = {key: value for key, value in training_request.get(
        "HyperParameters", {}).items() if key not in tuned}
    limits: dict[str, int] = {"MaxParallelTrainingJobs": options.max_parallel_jobs}
    if options.max_jobs is not None:
        limits["MaxNumberOfTrainingJobs"] = options.max_jobs
    config: dict[str, Any] = {
        "Strategy": options.strategy, "ResourceLimits": limits, "ParameterRanges": ranges,
        "HyperParameterTuningJobObjective": {"Type": options.objective_type, "MetricName": options.objective_metric},
        "TrainingJobEarlyStoppingType": options.early_stopping}
    if options.random_seed is not None:
        config["RandomSeed"] = options.random_seed
    request = {"HyperParameterTuningJobName": name, "HyperParameterTuningJobConfig": config,
               "TrainingJobDefinition": definition}
    if training_request.get("Tags"):
        request["Tags"] = training_request["Tags"]
    return request


def _within(value: Any, shape: Shape) -> Any:
    """`value` less the members `shape` does not have, at every depth (a tuning job's training job definition holds
    fewer fields than CreateTrainingJob, e.g. no Debugger or Profiler settings and a smaller AlgorithmSpecification)."""
    if shape.type_name == "structure" and isinstance(value, dict):
        return {name: _within(item, shape.members[name]) for name, item in value.items() if name in shape.members}
    if shape.type_name == "list" and isinstance(value, list):
        return [_within(item, shape.member) for item in value]
    return value


@dataclass(frozen=True)
class TrialRow:
    name: str
    hyperparameters: dict[str, str]
    objective: float | None
    status: str


@dataclass(frozen=True)
class TuningResult:
    """What the tuning summary shows."""

    tuning_job_name: str
    status: str
    strategy: str
    objective: str  # "Maximize val_ndcg@10"
    trials: list[TrialRow]
    best_job: str | None
    best_objective: float | None
    notes: list[str]
    """Where local mode behaved differently from the cloud."""
    failure_reason: str | None
    model_package_arn: str | None
    not_registered_reason: str | None


def summarize_tuning(description: dict[str, Any], trials: list[dict[str, Any]],
                     registration: dict[str, Any] | None) -> TuningResult:
    """The summary of a finished tuning job from its Describe answer, its trial summaries and the registrar's
    answer to its final state change (None when no rule sent it to the registrar)."""
    config = description["HyperParameterTuningJobConfig"]
    objective = config["HyperParameterTuningJobObjective"]
    rows = [TrialRow(name=trial["TrainingJobName"], hyperparameters=trial["TunedHyperParameters"],
                     objective=trial.get("FinalHyperParameterTuningJobObjectiveMetric", {}).get("Value"),
                     status=trial["TrainingJobStatus"]) for trial in trials]
    best = description.get("BestTrainingJob")
    if registration is None:
        not_registered = "no rule of the stacks sends tuning job state changes to the registrar"
    else:
        not_registered = registration.get("reason")
    return TuningResult(
        tuning_job_name=description["HyperParameterTuningJobName"],
        status=description["HyperParameterTuningJobStatus"], strategy=config["Strategy"],
        objective=f"{objective['Type']} {objective['MetricName']}", trials=rows,
        best_job=best["TrainingJobName"] if best else None,
        best_objective=best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] if best else None,
        notes=emulation_notes(config), failure_reason=description.get("FailureReason"),
        model_package_arn=(registration or {}).get("model_package_arn"), not_registered_reason=not_registered)


def render_tuning_summary(result: TuningResult) -> str:
    names = sorted({name for row in result.trials for name in row.hyperparameters})
    header = ["trial", *names, "objective", "status"]
    rows = [[row.name, *(row.hyperparameters.get(name, "") for name in names),
             "-" if row.objective is None else f"{row.objective:.4f}", row.status] for row in result.trials]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    table = [" | ".join(str(cell).ljust(width) for cell, width in zip(line, widths)) for line in [header, *rows]]
    table.insert(1, "-+-".join("-" * width for width in widths))
    best = "-" if result.best_job is None else f"{result.best_job} ({result.best_objective:.4f})"
    package = result.model_package_arn or f"not registered: {result.not_registered_reason or '-'}"
    lines = [f"tuning job: {result.tuning_job_name}", f"status:     {result.status}",
             f"strategy:   {result.strategy}", f"objective:  {result.objective}", "", *table, "",
             f"best:       {best}", f"package:    {package}"]
    lines += [f"local mode: {note}" for note in result.notes]
    if result.failure_reason:
        lines.append(f"reason:     {result.failure_reason}")
    return "\n".join(lines)
