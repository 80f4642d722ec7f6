"""What a completed hyperparameter tuning job tells the registrar: how many trials ran, which one won, and its
objective value, read from DescribeHyperParameterTuningJob. Pure: no AWS calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TuningOutcome:
    tuning_job: str
    trials: dict[str, int]  # SageMaker's TrainingJobStatusCounters, plus their total
    best_training_job: str | None
    objective_metric: str
    objective_type: str
    objective_value: float | None

    def summary(self) -> dict[str, Any]:
        """The notification's `tuning` object."""
        return {"tuning_job": self.tuning_job, "trials": self.trials, "best_training_job": self.best_training_job,
                "objective": {"metric": self.objective_metric, "type": self.objective_type,
                              "value": self.objective_value}}

    def note(self) -> str:
        """One line for the model package: the winner among the trials, by its objective."""
        value = "not reported" if self.objective_value is None else f"{self.objective_value:.4f}"
        return (f"best of {self.trials['total']} trials of tuning job {self.tuning_job}: {self.objective_metric}="
                f"{value} ({self.objective_type})")


def tuning_outcome(description: Mapping[str, Any]) -> TuningOutcome:
    counters = {name[0].lower() + name[1:]: int(count)
                for name, count in description.get("TrainingJobStatusCounters", {}).items()}
    objective = description.get("HyperParameterTuningJobConfig", {}).get("HyperParameterTuningJobObjective", {})
    best = description.get("BestTrainingJob") or {}
    final = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    return TuningOutcome(
        tuning_job=description["HyperParameterTuningJobName"],
        trials={**counters, "total": sum(counters.values())},
        best_training_job=best.get("TrainingJobName"),
        objective_metric=final.get("MetricName") or objective.get("MetricName", ""),
        objective_type=objective.get("Type", ""),
        objective_value=float(final["Value"]) if "Value" in final else None,
    )
