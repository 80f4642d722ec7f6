"""The SageMaker training-job API, locally: CreateTrainingJob, DescribeTrainingJob, ListTrainingJobs,
StopTrainingJob and ListTags of a training job, with the service's validation and errors. Each job runs on a thread
of its own."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from local_mode.job_runtime.job_runner import RunnerSettings, run_job
from local_mode.aws.local_clients import LOCAL_REGION, local_client
from local_mode.aws.mlflow_server import LocalMlflowServer
from local_mode.sagemaker_api.operations import Handler, dispatch, request_stop, stop_and_wait
from local_mode.sagemaker_api.service_errors import ServiceError, validation_error
from local_mode.job_runtime.training_job import TrainingJob

_LIST_SORT_KEYS: dict[str, Callable[[TrainingJob], Any]] = {
    "CreationTime": lambda job: job.creation_time,
    "Name": lambda job: job.name,
    "Status": lambda job: job.status,
}


JobLogSink = Callable[[str, str, str], None]  # (job name, host, line)


def ignore_log_line(job_name: str, host: str, line: str) -> None:
    """The default log sink: each host's log file already holds every line."""


class TrainingJobService:
    def __init__(self, *, s3_endpoint_url: str, account_id: str, settings: RunnerSettings,
                 on_log_line: JobLogSink = ignore_log_line, logs_endpoint_url: str | None = None,
                 tracking: LocalMlflowServer | None = None) -> None:
        """`logs_endpoint_url`: a CloudWatch Logs endpoint (moto's server) that receives each host's log stream, as
        SageMaker's /aws/sagemaker/TrainingJobs does; without it the hosts' training.log files hold the logs alone.
        `tracking`: the MLflow tracking server standing in for the managed one a job's `MlflowConfig` names."""
        self._s3_endpoint_url = s3_endpoint_url
        self._logs_endpoint_url = logs_endpoint_url
        self._account_id = account_id
        self._settings = settings
        self._on_log_line = on_log_line
        self._tracking = tracking
        self._jobs: dict[str, TrainingJob] = {}
        self._lock = threading.Lock()

    def handlers(self) -> dict[str, Handler]:
        """Each operation this service answers, by its X-Amz-Target name."""
        return {"CreateTrainingJob": self.create_training_job, "DescribeTrainingJob": self.describe_training_job,
                "ListTrainingJobs": self.list_training_jobs, "StopTrainingJob": self.stop_training_job,
                "ListTags": self.list_tags}

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return dispatch(self.handlers(), operation, params)

    def create_training_job(self, params: dict[str, Any], *, tuning_job_arn: str | None = None) -> dict[str, Any]:
        """`tuning_job_arn`: the tuning job launching this job as one of its trials."""
        check_training_request(params)
        check_tracking(params, self._tracking)
        name = params["TrainingJobName"]
        arn = f"arn:aws:sagemaker:{LOCAL_REGION}:{self._account_id}:training-job/{name.lower()}"
        with self._lock:
            if name in self._jobs:
                raise ServiceError("ResourceInUse", f"Training job names must be unique within an AWS account and "
                                                    f"region, and a training job with this name already exists ({arn})")
            job = self._jobs[name] = TrainingJob(params, arn, tuning_job_arn)
        # One client of each per job: boto3 clients are thread-safe, sessions are not.
        s3 = local_client("s3", self._s3_endpoint_url)
        logs = local_client("logs", self._logs_endpoint_url) if self._logs_endpoint_url else None
        threading.Thread(target=run_job, kwargs={"job": job, "s3": s3, "logs": logs, "settings": self._settings,
                                                 "on_log_line": functools.partial(self._on_log_line, name),
                                                 "tracking": self._tracking},
                         name=f"training-job-{name}", daemon=True).start()
        return {"TrainingJobArn": arn}

    def describe_training_job(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.job(params["TrainingJobName"]).describe()

    def list_training_jobs(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            jobs = list(self._jobs.values())
        jobs = [job for job in jobs if _matches(job, params)]
        jobs.sort(key=_LIST_SORT_KEYS[params.get("SortBy", "CreationTime")],
                  reverse=params.get("SortOrder", "Descending") == "Descending")
        start = int(params.get("NextToken", "0"))
        end = start + params.get("MaxResults", 10)
        response: dict[str, Any] = {"TrainingJobSummaries": [job.summary() for job in jobs[start:end]]}
        if end < len(jobs):
            response["NextToken"] = str(end)
        return response

    def list_tags(self, params: dict[str, Any]) -> dict[str, Any]:
        """A training job's tags, as CreateTrainingJob set them (in one page: a job holds at most 50)."""
        with self._lock:
            job = next((job for job in self._jobs.values() if job.arn == params["ResourceArn"]), None)
        if job is None:
            raise validation_error(f"local SageMaker holds no training job with ARN {params['ResourceArn']!r}")
        return {"Tags": list(job.request.get("Tags", []))}

    def stop_training_job(self, params: dict[str, Any]) -> dict[str, Any]:
        return request_stop(self.job(params["TrainingJobName"]), "training job")

    def stop_all(self) -> None:
        """Stop every running job and wait for them (local mode is shutting down)."""
        with self._lock:
            jobs = list(self._jobs.values())
        stop_and_wait(jobs, self._settings.stop_grace_seconds + 30)

    def job(self, name: str) -> TrainingJob:
        with self._lock:
            if name not in self._jobs:
                # The service's answer for an unknown training job name.
                raise validation_error("Requested resource not found.")
            return self._jobs[name]


def check_training_request(params: dict[str, Any]) -> None:
    """Rules the service enforces beyond the model's shapes (the model allows 0 instances for instance groups)."""
    resources = params["ResourceConfig"]
    if "InstanceGroups" in resources:
        raise validation_error("ResourceConfig.InstanceGroups: local mode runs homogeneous clusters only; "
                               "set ResourceConfig.InstanceType and InstanceCount instead")
    if resources.get("InstanceCount", 0) < 1 or "InstanceType" not in resources:
        raise validation_error(f"ResourceConfig.InstanceCount must be at least 1 with an InstanceType, got "
                               f"InstanceCount={resources.get('InstanceCount')!r}: set it to the number of hosts")


def check_tracking(params: dict[str, Any], tracking: LocalMlflowServer | None) -> None:
    """`MlflowConfig` names a tracking server this machine runs: the managed ones are out of a local job's reach."""
    arn = params.get("MlflowConfig", {}).get("MlflowResourceArn")
    if arn is None or (tracking is not None and arn == tracking.resource_arn):
        return
    if tracking is None:
        raise validation_error(f"MlflowConfig.MlflowResourceArn={arn!r}: local mode runs no MLflow tracking server; "
                               f"run the demo with --track (LocalPipeline(tracking=LocalMlflowServer(...)))")
    raise validation_error(f"MlflowConfig.MlflowResourceArn={arn!r} is not local mode's tracking server "
                           f"{tracking.resource_arn!r}: a local job logs to that one only; synthesize the stack with "
                           f"mlflow_resource_arn={tracking.resource_arn}")


def _matches(job: TrainingJob, params: dict[str, Any]) -> bool:
    if params.get("NameContains", "").lower() not in job.name.lower():
        return False
    if "StatusEquals" in params and job.status != params["StatusEquals"]:
        return False
    for field, before in (("CreationTimeAfter", False), ("CreationTimeBefore", True)):
        if field in params:
            bound = datetime.fromtimestamp(float(params[field]), timezone.utc)
            if (job.creation_time >= bound) if before else (job.creation_time <= bound):
                return False
    return True
