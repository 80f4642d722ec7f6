"""One training job's record: the request, its status history and what its logs reported.

Status follows the service: TrainingJobStatus InProgress, then Completed, Failed or Stopped; SecondaryStatus
walks Starting, Downloading, Training, Uploading and ends with the final state, each step recorded in
SecondaryStatusTransitions. FinalMetricDataList holds the last value each MetricDefinitions regex captured.
"""

from __future__ import annotations

import copy
import re
import threading
from datetime import datetime, timezone
from typing import Any

TERMINAL_STATUSES = ("Completed", "Failed", "Stopped")

# What the service writes into SecondaryStatusTransitions[].StatusMessage for each step.
STATUS_MESSAGES = {
    "Starting": "Preparing the instances for training",
    "Downloading": "Downloading input data",
    "Training": "Training image download completed. Training in progress.",
    "Uploading": "Uploading generated training model",
    "Stopping": "Stopping the training job",
    "Completed": "Training job completed",
    "Failed": "Training job failed",
    "Stopped": "Training job stopped",
    "MaxRuntimeExceeded": "Training job stopped: it ran longer than StoppingCondition.MaxRuntimeInSeconds",
}


def now() -> datetime:
    return datetime.now(timezone.utc)


class TrainingJob:
    """Thread-safe: the runner thread updates it while API calls read it."""

    def __init__(self, request: dict[str, Any], arn: str, tuning_job_arn: str | None = None) -> None:
        """`tuning_job_arn`: the tuning job that launched this one, if any (DescribeTrainingJob's TuningJobArn)."""
        self.request = copy.deepcopy(request)
        self.name: str = request["TrainingJobName"]
        self.arn = arn
        self.tuning_job_arn = tuning_job_arn
        self.creation_time = now()
        self.last_modified_time = self.creation_time
        self.status = "InProgress"
        self.secondary_status = "Starting"
        self.transitions: list[dict[str, Any]] = [
            {"Status": "Starting", "StartTime": self.creation_time, "StatusMessage": STATUS_MESSAGES["Starting"]}]
        self.training_start_time: datetime | None = None
        self.training_end_time: datetime | None = None
        self.failure_reason: str | None = None
        self.model_artifacts: str | None = None
        self.final_metrics: dict[str, tuple[float, datetime]] = {}
        self.mlflow_details: dict[str, str] | None = None
        self.stop_requested = threading.Event()
        self.finished = threading.Event()
        self._metric_patterns = [(definition["Name"], re.compile(definition["Regex"]))
                                 for definition in request.get("AlgorithmSpecification", {}).get(
                                     "MetricDefinitions", [])]
        self._lock = threading.Lock()

    def advance(self, secondary_status: str) -> None:
        """Close the current secondary status and open `secondary_status`."""
        with self._lock:
            self._advance(secondary_status)

    def _advance(self, secondary_status: str) -> None:
        timestamp = now()
        self.transitions[-1]["EndTime"] = timestamp
        self.transitions.append({"Status": secondary_status, "StartTime": timestamp,
                                 "StatusMessage": STATUS_MESSAGES[secondary_status]})
        self.secondary_status = secondary_status
        self.last_modified_time = timestamp
        if secondary_status == "Training":
            self.training_start_time = timestamp

    def request_stop(self) -> None:
        """StopTrainingJob: the status reads Stopping until the processes are gone and the artifacts are up."""
        with self._lock:
            self.status = "Stopping"
            self._advance("Stopping")
        self.stop_requested.set()

    def finish(self, status: str, *, secondary_status: str | None = None, failure_reason: str | None = None) -> None:
        """End the job in `status` (Completed, Failed, Stopped); the final transition is closed at once."""
        with self._lock:
            self._advance(secondary_status or status)
            self.transitions[-1]["EndTime"] = self.last_modified_time
            self.status = status
            self.failure_reason = failure_reason
            self.training_end_time = self.last_modified_time
        self.finished.set()

    def set_model_artifacts(self, uri: str) -> None:
        with self._lock:
            self.model_artifacts = uri

    def set_mlflow_details(self, details: dict[str, str] | None) -> None:
        """The MLflow run the job logged to (DescribeTrainingJob's MlflowDetails), when it logged to one."""
        with self._lock:
            self.mlflow_details = details

    def observe_log_line(self, line: str) -> None:
        """Apply every MetricDefinitions regex to a log line; the first group is the value, as the service reads it."""
        for name, pattern in self._metric_patterns:
            match = pattern.search(line)
            if match:
                try:
                    value = float(match.group(1))
                except (IndexError, ValueError):
                    continue
                with self._lock:
                    self.final_metrics[name] = (value, now())

    def describe(self) -> dict[str, Any]:
        """The DescribeTrainingJob response."""
        with self._lock:
            request = self.request
            response: dict[str, Any] = {
                "TrainingJobName": self.name,
                "TrainingJobArn": self.arn,
                "TrainingJobStatus": self.status,
                "SecondaryStatus": self.secondary_status,
                "HyperParameters": request.get("HyperParameters", {}),
                "AlgorithmSpecification": request["AlgorithmSpecification"],
                "RoleArn": request["RoleArn"],
                "InputDataConfig": request.get("InputDataConfig", []),
                "OutputDataConfig": request["OutputDataConfig"],
                "ResourceConfig": request["ResourceConfig"],
                "StoppingCondition": request["StoppingCondition"],
                "CreationTime": self.creation_time,
                "LastModifiedTime": self.last_modified_time,
                "SecondaryStatusTransitions": copy.deepcopy(self.transitions),
                "FinalMetricDataList": [{"MetricName": name, "Value": value, "Timestamp": timestamp}
                                        for name, (value, timestamp) in self.final_metrics.items()],
                "ModelArtifacts": {"S3ModelArtifacts": self.model_artifacts or ""},
                "EnableNetworkIsolation": request.get("EnableNetworkIsolation", False),
                "EnableInterContainerTrafficEncryption": request.get("EnableInterContainerTrafficEncryption", False),
                "EnableManagedSpotTraining": request.get("EnableManagedSpotTraining", False),
            }
            for optional in ("VpcConfig", "CheckpointConfig", "Environment", "RetryStrategy", "DebugHookConfig",
                             "InfraCheckConfig", "MlflowConfig"):
                if optional in request:
                    response[optional] = request[optional]
            if self.mlflow_details:
                response["MlflowDetails"] = dict(self.mlflow_details)
            if self.failure_reason:
                response["FailureReason"] = self.failure_reason
            if self.tuning_job_arn:
                response["TuningJobArn"] = self.tuning_job_arn
            if self.training_start_time:
                response["TrainingStartTime"] = self.training_start_time
            if self.training_end_time:
                response["TrainingEndTime"] = self.training_end_time
                started = self.training_start_time or self.creation_time
                seconds = int((self.training_end_time - started).total_seconds())
                response["TrainingTimeInSeconds"] = response["BillableTimeInSeconds"] = max(seconds, 1)
            return response

    def summary(self) -> dict[str, Any]:
        """One ListTrainingJobs entry."""
        with self._lock:
            entry = {"TrainingJobName": self.name, "TrainingJobArn": self.arn, "CreationTime": self.creation_time,
                     "LastModifiedTime": self.last_modified_time, "TrainingJobStatus": self.status,
                     "SecondaryStatus": self.secondary_status}
            if self.training_end_time:
                entry["TrainingEndTime"] = self.training_end_time
            return entry
