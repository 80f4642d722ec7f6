"""What the training-job and tuning-job APIs answer alike: an operation dispatched by its X-Amz-Target name after the
service model's checks, and the Stop* calls' rule (a job stops only while it runs), with the stop of every running job
when local mode shuts down."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from local_mode.sagemaker_api.request_validation import validate_request
from local_mode.sagemaker_api.service_errors import ServiceError, validation_error

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def dispatch(handlers: dict[str, Handler], operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """Answer one API call by its X-Amz-Target operation name, after the service model's checks."""
    if operation not in handlers:
        raise ServiceError("UnknownOperationException",
                           f"local SageMaker serves {sorted(handlers)}; {operation!r} is not one of them")
    validate_request(operation, params)
    return handlers[operation](params)


class StoppableJob(Protocol):
    """What the Stop* calls and shutdown need of a training or tuning job."""

    status: str
    finished: threading.Event

    def request_stop(self) -> None: ...


def request_stop(job: StoppableJob, kind: str) -> dict[str, Any]:
    """A Stop* call on `job` (a training or tuning job, `kind` naming it as SageMaker does): refused unless it is
    running, as the service refuses it."""
    if job.status != "InProgress":
        raise validation_error(f"The request was rejected because the {kind} is in status {job.status}.")
    job.request_stop()
    return {}


def stop_and_wait(jobs: list[StoppableJob], timeout_s: float) -> None:
    """Asks every running job of `jobs` to stop, then waits up to `timeout_s` for each to finish."""
    running = [job for job in jobs if job.status == "InProgress"]
    for job in running:
        job.request_stop()
    for job in running:
        job.finished.wait(timeout_s)
