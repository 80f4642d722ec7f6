"""The SageMaker hyperparameter tuning API, locally: CreateHyperParameterTuningJob,
DescribeHyperParameterTuningJob, ListTrainingJobsForHyperParameterTuningJob and StopHyperParameterTuningJob, in
front of the training-job API (every other operation goes to it unchanged).

Each tuning job runs on a thread of its own that launches its trials through CreateTrainingJob of the same
TrainingJobService, so they run exactly as single jobs do, with at most MaxParallelTrainingJobs in flight. Trials are
named as the service names them: `<tuning job name>-<3-digit index>-<8 hex digits>`. When the tuning job starts
and when it ends, `on_state_change` receives its DescribeHyperParameterTuningJob answer (the detail of the
`SageMaker HyperParameter Tuning Job State Change` event).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from typing import Any

from local_mode.aws.local_clients import LOCAL_REGION
from local_mode.sagemaker_api.request_validation import validate_request
from local_mode.sagemaker_api.service_errors import ServiceError, validation_error
from local_mode.sagemaker_api.operations import Handler, dispatch, request_stop, stop_and_wait
from local_mode.sagemaker_api.training_job_service import TrainingJobService, check_training_request
from local_mode.sagemaker_api.tuning_job import Trial, TuningJob, trial_training_request
from local_mode.sagemaker_api.tuning_search import emulation_notes, parse_ranges, trial_hyperparameters

POLL_SECONDS = 0.1
# The service's answer when an objective names no metric definition (what CreateHyperParameterTuningJob says).
MISSING_OBJECTIVE_METRIC = ("A metric is required for this hyperparameter tuning job objective. Provide a metric in "
                            "the metric definitions.")
_SUMMARY_SORT_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "Name": lambda summary: summary["TrainingJobName"],
    "CreationTime": lambda summary: summary["CreationTime"],
    "Status": lambda summary: summary["TrainingJobStatus"],
    # Trials without an objective value sort after those with one, in either order (as the service lists them).
    "FinalObjectiveMetricValue": lambda summary: summary.get(
        "FinalHyperParameterTuningJobObjectiveMetric", {}).get("Value", float("nan")),
}

StateChangeListener = Callable[[dict[str, Any], list[dict[str, str]]], None]


def _no_listener(description: dict[str, Any], tags: list[dict[str, str]]) -> None:
    """By default nobody listens to tuning job state changes."""


class TuningJobService:
    def __init__(self, training: TrainingJobService, *, account_id: str,
                 on_state_change: StateChangeListener = _no_listener) -> None:
        """`on_state_change(description, tags)`: called from the tuning job's thread when it starts and ends; what it
        raises is kept in `listener_errors` (EventBridge delivery never fails the job)."""
        self.training = training
        self._account_id = account_id
        self._on_state_change = on_state_change
        self._jobs: dict[str, TuningJob] = {}
        self._lock = threading.Lock()
        self.listener_errors: list[str] = []

    def handlers(self) -> dict[str, Handler]:
        """Each operation this service answers (the training jobs' too), by its X-Amz-Target name."""
        return {**self.training.handlers(), "CreateHyperParameterTuningJob": self.create_tuning_job,
                "DescribeHyperParameterTuningJob": self.describe_tuning_job,
                "ListTrainingJobsForHyperParameterTuningJob": self.list_trials,
                "StopHyperParameterTuningJob": self.stop_tuning_job}

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return dispatch(self.handlers(), operation, params)

    def create_tuning_job(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["HyperParameterTuningJobName"]
        config = params["HyperParameterTuningJobConfig"]
        definition = _single_definition(params)
        objective = _objective(config, definition)
        ranges = parse_ranges(config.get("ParameterRanges", {}), set(definition.get("StaticHyperParameters", {})))
        planned = trial_hyperparameters(config, ranges)
        # A definition CreateTrainingJob would refuse is refused now, before any trial starts.
        first = trial_training_request(definition, name=_trial_name(name, 1), tuned=planned[0],
                                       objective_metric=objective["MetricName"], tags=params.get("Tags", []))
        validate_request("CreateTrainingJob", first)
        check_training_request(first)
        arn = f"arn:aws:sagemaker:{LOCAL_REGION}:{self._account_id}:hyper-parameter-tuning-job/{name.lower()}"
        with self._lock:
            self._check_warm_start(params.get("WarmStartConfig"))
            if name in self._jobs:
                raise ServiceError("ResourceInUse", f"Hyperparameter tuning job names must be unique within an AWS "
                                                    f"account and region, and {arn} already exists")
            job = self._jobs[name] = TuningJob(params, arn, objective, emulation_notes(config))
        threading.Thread(target=self._run, args=(job, planned), name=f"tuning-job-{name}", daemon=True).start()
        return {"HyperParameterTuningJobArn": arn}

    def describe_tuning_job(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.job(params["HyperParameterTuningJobName"]).describe()

    def list_trials(self, params: dict[str, Any]) -> dict[str, Any]:
        job = self.job(params["HyperParameterTuningJobName"])
        summaries = [job.trial_summary(trial) for trial in job.trials]
        if "StatusEquals" in params:
            summaries = [summary for summary in summaries if summary["TrainingJobStatus"] == params["StatusEquals"]]
        sort_by = params.get("SortBy", "Name")
        descending = params.get("SortOrder", "Descending") == "Descending"
        if sort_by == "FinalObjectiveMetricValue":
            scored = [summary for summary in summaries if "FinalHyperParameterTuningJobObjectiveMetric" in summary]
            unscored = [summary for summary in summaries if summary not in scored]
            summaries = sorted(scored, key=_SUMMARY_SORT_KEYS[sort_by], reverse=descending) + unscored
        else:
            summaries.sort(key=_SUMMARY_SORT_KEYS[sort_by], reverse=descending)
        start = int(params.get("NextToken", "0"))
        end = start + params.get("MaxResults", 10)
        response: dict[str, Any] = {"TrainingJobSummaries": summaries[start:end]}
        if end < len(summaries):
            response["NextToken"] = str(end)
        return response

    def stop_tuning_job(self, params: dict[str, Any]) -> dict[str, Any]:
        return request_stop(self.job(params["HyperParameterTuningJobName"]), "hyperparameter tuning job")

    def stop_all(self) -> None:
        """Stop every tuning job and training job and wait for them (local mode is shutting down)."""
        with self._lock:
            jobs = list(self._jobs.values())
        stop_and_wait(jobs, 60)
        self.training.stop_all()

    def job(self, name: str) -> TuningJob:
        with self._lock:
            if name not in self._jobs:
                raise ServiceError("ResourceNotFound", f"Amazon SageMaker can't find a tuning job named {name!r}")
            return self._jobs[name]

    def _check_warm_start(self, warm_start: dict[str, Any] | None) -> None:
        """Parents must exist; locally their trials do not steer the search (random draws ignore history)."""
        for parent in (warm_start or {}).get("ParentHyperParameterTuningJobs", []):
            parent_name = parent.get("HyperParameterTuningJobName", "")
            if parent_name not in self._jobs:
                raise validation_error(f"WarmStartConfig.ParentHyperParameterTuningJobs: local SageMaker holds no "
                                       f"tuning job named {parent_name!r}; name one this endpoint ran")

    def _run(self, job: TuningJob, planned: list[dict[str, str]]) -> None:
        self._announce(job)
        try:
            self._launch_trials(job, planned)
        except ServiceError as error:  # a trial CreateTrainingJob refused: the job cannot go on
            self._stop_trials(job)
            job.fail(f"local SageMaker could not start a training job: {error.code}: {error.message}")
            self._announce(job)
            return
        while not all(trial.job.finished.wait(POLL_SECONDS) for trial in job.trials):
            if job.stop_requested.is_set():
                self._stop_trials(job)
        job.finish()
        self._announce(job)

    def _launch_trials(self, job: TuningJob, planned: list[dict[str, str]]) -> None:
        parallel = job.request["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxParallelTrainingJobs"]
        definition = job.request["TrainingJobDefinition"]
        for index, tuned in enumerate(planned, start=1):
            while sum(not trial.job.finished.is_set() for trial in job.trials) >= parallel:
                if job.stop_requested.wait(POLL_SECONDS):
                    return
            if job.stop_requested.is_set():
                return
            request = trial_training_request(definition, name=_trial_name(job.name, index), tuned=tuned,
                                             objective_metric=job.objective["MetricName"],
                                             tags=job.request.get("Tags", []))
            validate_request("CreateTrainingJob", request)
            self.training.create_training_job(request, tuning_job_arn=job.arn)
            job.add_trial(Trial(tuned=tuned, job=self.training.job(request["TrainingJobName"])))

    def _stop_trials(self, job: TuningJob) -> None:
        for trial in job.trials:
            if trial.job.status == "InProgress":
                trial.job.request_stop()

    def _announce(self, job: TuningJob) -> None:
        try:
            self._on_state_change(job.describe(), list(job.request.get("Tags", [])))
        except Exception as error:  # a listener's fault is the listener's: the tuning job goes on
            self.listener_errors.append(f"{job.name} {job.status}: {type(error).__name__}: {error}")


def _trial_name(tuning_job_name: str, index: int) -> str:
    return f"{tuning_job_name}-{index:03d}-{uuid.uuid4().hex[:8]}"


_TRIAL_NAME_END = re.compile(r"-(?P<index>[0-9]{3})-[0-9a-f]{8}$")


def trial_number(training_job_name: str) -> str | None:
    """The 3-digit index in a trial's name (`<tuning job>-<index>-<8 hex>`, as _trial_name writes it); None for a
    name of any other shape."""
    match = _TRIAL_NAME_END.search(training_job_name)
    return match["index"] if match else None


def _single_definition(params: dict[str, Any]) -> dict[str, Any]:
    if "TrainingJobDefinitions" in params or "Autotune" in params:
        raise validation_error("TrainingJobDefinitions / Autotune: local mode runs tuning jobs of one "
                               "TrainingJobDefinition; give TrainingJobDefinition instead")
    if "TrainingJobDefinition" not in params:
        raise validation_error("TrainingJobDefinition is required: it is the training job each trial runs")
    definition = params["TrainingJobDefinition"]
    if ("ResourceConfig" in definition) == ("HyperParameterTuningResourceConfig" in definition):
        raise validation_error("TrainingJobDefinition: give exactly one of ResourceConfig and "
                               "HyperParameterTuningResourceConfig (the instances each trial runs on)")
    return definition


def _objective(config: dict[str, Any], definition: dict[str, Any]) -> dict[str, str]:
    objective = config.get("HyperParameterTuningJobObjective") or definition.get("TuningObjective")
    if objective is None:
        raise validation_error("HyperParameterTuningJobConfig.HyperParameterTuningJobObjective is required: name the "
                               "metric to optimise and its Type (Maximize or Minimize)")
    defined = [metric["Name"] for metric in definition["AlgorithmSpecification"].get("MetricDefinitions", [])]
    if objective["MetricName"] not in defined:
        raise validation_error(f"{MISSING_OBJECTIVE_METRIC} The objective {objective['MetricName']!r} is not among "
                               f"TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions {defined}")
    return {"Type": objective["Type"], "MetricName": objective["MetricName"]}
