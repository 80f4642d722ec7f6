"""The demo's tuning parts: a `--tune NAME=SPEC` range as a range of the manifest's `tuning` section (the trigger
reads the section, checks it and builds the tuning job; docs/tuning.md), and the summary of a finished tuning job (its
trials, its best job unpacked as a single job's summary shows it, what local mode did differently, and the
registrar's answer).

A range SPEC is `continuous:MIN:MAX[:log]`, `integer:MIN:MAX[:log]` or `categorical:VALUE,VALUE,...`; without `:log`
a numeric range is `Linear`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from local_mode.job_summary import DemoResult
from local_mode.sagemaker_api.tuning_search import emulation_notes

SPEC_HELP = "write NAME=continuous:MIN:MAX[:log], NAME=integer:MIN:MAX[:log] or NAME=categorical:A,B,..."


def section_range(spec: str) -> dict[str, Any]:
    """One range of the `tuning` section's `ranges` from a SPEC; ValueError when the SPEC is not written as one.
    Whether the range suits the flag, SageMaker and the strategy is the trigger's to say."""
    kind, _, rest = spec.partition(":")
    if kind == "categorical" and rest:
        return {"type": kind, "values": rest.split(",")}
    bounds = rest.split(":")
    if kind not in ("continuous", "integer") or len(bounds) not in (2, 3) or bounds[2:] not in ([], ["log"]):
        raise ValueError(SPEC_HELP)
    return {"type": kind, "min": _number(bounds[0]), "max": _number(bounds[1]),
            "scaling": "Logarithmic" if bounds[2:] else "Linear"}


def _number(text: str) -> int | float:
    """A bound as the manifest would hold it: a whole number where written as one (an integer range needs those)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number: {SPEC_HELP}") from None


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
    best_trial: DemoResult | None = None
    """The best trial's own summary: its model and plots, unpacked."""


def summarize_tuning(description: dict[str, Any], trials: list[dict[str, Any]],
                     registration: dict[str, Any] | None, best_trial: DemoResult | None = None) -> TuningResult:
    """The summary of a finished tuning job from its Describe answer, its trial summaries, the registrar's answer to
    its final state change (None when no rule sent it to the registrar) and the best trial's own summary."""
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
        model_package_arn=(registration or {}).get("model_package_arn"), not_registered_reason=not_registered,
        best_trial=best_trial)
