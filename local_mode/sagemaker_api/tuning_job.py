"""One hyperparameter tuning job's record: its request, the trials it launched, and what the service reports of them.

Each trial is an ordinary training job built from the TrainingJobDefinition: the definition's fields (its
ResourceConfig, or the instances its HyperParameterTuningResourceConfig names), its StaticHyperParameters with the trial's tuned values over them, the `_tuning_objective_metric` hyperparameter the
service adds (the container toolkit keeps it from the script), and the tuning job's tags. A trial's objective is the
final value its log gave the objective metric's MetricDefinitions regex; the best trial is the one with the highest
(Maximize) or lowest (Minimize) objective, the earlier trial on a tie.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any

from local_mode.container.container_environment import TUNING_OBJECTIVE_HYPERPARAMETER
from local_mode.job_runtime.training_job import TrainingJob, now

TERMINAL_TUNING_STATUSES = ("Completed", "Failed", "Stopped")
FAILURE_REASON_LIMIT = 1024
# HyperParameterTrainingJobDefinition members that CreateTrainingJob takes under the same name.
_COPIED_DEFINITION_FIELDS = ("RoleArn", "InputDataConfig", "VpcConfig", "OutputDataConfig", "ResourceConfig",
                             "StoppingCondition", "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",
                             "EnableManagedSpotTraining", "CheckpointConfig", "RetryStrategy", "Environment")


def trial_training_request(definition: dict[str, Any], *, name: str, tuned: dict[str, str], objective_metric: str,
                           tags: list[dict[str, str]]) -> dict[str, Any]:
    """The CreateTrainingJob request of one trial."""
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": copy.deepcopy(definition["AlgorithmSpecification"]),
        "HyperParameters": {**definition.get("StaticHyperParameters", {}), **tuned,
                            TUNING_OBJECTIVE_HYPERPARAMETER: objective_metric},
    }
    request.update({field: copy.deepcopy(definition[field]) for field in _COPIED_DEFINITION_FIELDS
                    if field in definition})
    if "HyperParameterTuningResourceConfig" in definition:
        request["ResourceConfig"] = tuning_resources(definition["HyperParameterTuningResourceConfig"])
    if tags:
        request["Tags"] = copy.deepcopy(tags)
    return request


def tuning_resources(config: dict[str, Any]) -> dict[str, Any]:
    """A trial's ResourceConfig from the tuning API's HyperParameterTuningResourceConfig: its instance type, count
    and volume, or with InstanceConfigs the first of them (locally every instance type is this machine, so the
    service's fallback to the next type never happens)."""
    chosen = config["InstanceConfigs"][0] if config.get("InstanceConfigs") else config
    resources = {key: chosen[key] for key in ("InstanceType", "InstanceCount", "VolumeSizeInGB") if key in chosen}
    if "VolumeKmsKeyId" in config:
        resources["VolumeKmsKeyId"] = config["VolumeKmsKeyId"]
    return resources


@dataclass(frozen=True)
class Trial:
    tuned: dict[str, str]
    job: TrainingJob

    @property
    def name(self) -> str:
        return self.job.name


class TuningJob:
    """Thread-safe: the scheduler thread adds trials and ends the job while API calls read it."""

    def __init__(self, request: dict[str, Any], arn: str, objective: dict[str, str], notes: list[str]) -> None:
        self.request = copy.deepcopy(request)
        self.name: str = request["HyperParameterTuningJobName"]
        self.arn = arn
        self.objective = objective  # {"Type": "Maximize" | "Minimize", "MetricName": ...}
        self.notes = notes
        """Where this job behaves differently here than in the cloud (tuning_search.emulation_notes)."""
        self.creation_time = now()
        self.last_modified_time = self.creation_time
        self.end_time = None
        self.status = "InProgress"
        self.failure_reason: str | None = None
        self.stop_requested = threading.Event()
        self.finished = threading.Event()
        self._trials: list[Trial] = []
        self._lock = threading.Lock()

    @property
    def trials(self) -> list[Trial]:
        with self._lock:
            return list(self._trials)

    def add_trial(self, trial: Trial) -> None:
        with self._lock:
            self._trials.append(trial)
            self.last_modified_time = now()

    def request_stop(self) -> None:
        with self._lock:
            self.status = "Stopping"
            self.last_modified_time = now()
        self.stop_requested.set()

    def finish(self) -> None:
        """End the job: Stopped when asked to stop, else Completed when a trial reported its objective, else
        Failed with the reason."""
        trials = self.trials
        with self._lock:
            if self.stop_requested.is_set():
                self.status = "Stopped"
            elif any(self._objective_status(trial) == "Succeeded" for trial in trials):
                self.status = "Completed"
            else:
                self.status = "Failed"
                self.failure_reason = _failure_reason(trials, self.objective["MetricName"])[:FAILURE_REASON_LIMIT]
            self.end_time = self.last_modified_time = now()
        self.finished.set()

    def fail(self, reason: str) -> None:
        """End the job Failed for a reason of local SageMaker's own (a trial it could not launch)."""
        with self._lock:
            self.status, self.failure_reason = "Failed", reason[:FAILURE_REASON_LIMIT]
            self.end_time = self.last_modified_time = now()
        self.finished.set()

    def objective_value(self, trial: Trial) -> float | None:
        """The trial's final objective value, once it ended (a stopped trial keeps the last value it reported)."""
        if trial.job.status not in ("Completed", "Stopped"):
            return None
        reported = trial.job.final_metrics.get(self.objective["MetricName"])
        return reported[0] if reported else None

    def _objective_status(self, trial: Trial) -> str:
        if trial.job.status in ("InProgress", "Stopping"):
            return "Pending"
        return "Succeeded" if self.objective_value(trial) is not None else "Failed"

    def best_trial(self) -> Trial | None:
        scored = [(value, index, trial) for index, trial in enumerate(self.trials)
                  if (value := self.objective_value(trial)) is not None]
        if not scored:
            return None
        sign = -1 if self.objective["Type"] == "Maximize" else 1
        return min(scored, key=lambda item: (sign * item[0], item[1]))[2]

    def trial_summary(self, trial: Trial) -> dict[str, Any]:
        """One HyperParameterTrainingJobSummary (ListTrainingJobsForHyperParameterTuningJob, BestTrainingJob)."""
        description = trial.job.describe()
        summary: dict[str, Any] = {
            "TrainingJobName": trial.name, "TrainingJobArn": trial.job.arn, "TuningJobName": self.name,
            "CreationTime": description["CreationTime"], "TrainingJobStatus": description["TrainingJobStatus"],
            "TunedHyperParameters": dict(trial.tuned), "ObjectiveStatus": self._objective_status(trial),
        }
        for optional in ("TrainingStartTime", "TrainingEndTime", "FailureReason"):
            if optional in description:
                summary[optional] = description[optional]
        value = self.objective_value(trial)
        if value is not None:
            summary["FinalHyperParameterTuningJobObjectiveMetric"] = {**self.objective, "Value": value}
        return summary

    def describe(self) -> dict[str, Any]:
        """The DescribeHyperParameterTuningJob response."""
        trials = self.trials
        statuses = [trial.job.status for trial in trials]
        objectives = [self._objective_status(trial) for trial in trials]
        definition = copy.deepcopy(self.request["TrainingJobDefinition"])
        definition.setdefault("StaticHyperParameters", {})[TUNING_OBJECTIVE_HYPERPARAMETER] = (
            self.objective["MetricName"])
        with self._lock:
            response: dict[str, Any] = {
                "HyperParameterTuningJobName": self.name,
                "HyperParameterTuningJobArn": self.arn,
                "HyperParameterTuningJobConfig": copy.deepcopy(self.request["HyperParameterTuningJobConfig"]),
                "TrainingJobDefinition": definition,
                "HyperParameterTuningJobStatus": self.status,
                "CreationTime": self.creation_time,
                "LastModifiedTime": self.last_modified_time,
                "TrainingJobStatusCounters": {
                    "Completed": statuses.count("Completed"),
                    "InProgress": statuses.count("InProgress") + statuses.count("Stopping"),
                    "RetryableError": 0, "NonRetryableError": statuses.count("Failed"),
                    "Stopped": statuses.count("Stopped")},
                "ObjectiveStatusCounters": {status: objectives.count(status)
                                            for status in ("Succeeded", "Pending", "Failed")},
            }
            if self.end_time:
                response["HyperParameterTuningEndTime"] = self.end_time
                response["ConsumedResources"] = {
                    "RuntimeInSeconds": int((self.end_time - self.creation_time).total_seconds())}
            if self.failure_reason:
                response["FailureReason"] = self.failure_reason
            if "WarmStartConfig" in self.request:
                response["WarmStartConfig"] = copy.deepcopy(self.request["WarmStartConfig"])
        best = self.best_trial()
        if best is not None:
            response["BestTrainingJob"] = self.trial_summary(best)
        return response


def _failure_reason(trials: list[Trial], metric: str) -> str:
    failed = [trial for trial in trials if trial.job.status == "Failed"]
    if len(failed) == len(trials):
        first = failed[0].job.failure_reason if failed else "no training job was launched"
        return f"All {len(trials)} training jobs failed. The first failure ({failed[0].name if failed else '-'}): {first}"
    return (f"No training job reported the objective metric {metric!r}: make the definition's MetricDefinitions regex "
            f"for it match a line the training script prints ({len(failed)} of {len(trials)} training jobs failed)")
