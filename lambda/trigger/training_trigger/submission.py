"""Starts the training job or the tuning job. The one place that calls CreateTrainingJob and
CreateHyperParameterTuningJob.

What SageMaker answers decides what happens to the event:
- `ResourceInUse`: this name already started a job (idempotency): `duplicate`, never retried.
- an error no retry can fix, which SageMaker gives for the request itself (REFUSED_ERROR_CODES): InvalidInput
  carrying SageMaker's code and message, so the handler reports the event `rejected` on the topic (which carries
  the event, to send again once fixed) instead of raising; a retry would only send the same request again.
- anything else (throttling, which the client has already retried with backoff, 5xx, a timeout): raised, so
  Lambda's asynchronous retries run the invocation again and the dead-letter queue keeps the event after them.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from botocore.exceptions import ClientError

from training_trigger.aws_clients import sagemaker_client
from training_trigger.errors import InvalidInput

DUPLICATE_ERROR = "ResourceInUse"
STARTING_OPERATIONS = ("CreateTrainingJob", "CreateHyperParameterTuningJob")
# SageMaker's error for input it refuses: "ValidationError" in its API reference's Common Errors (HTTP 400, "the
# input fails to satisfy the constraints specified by an AWS service"); the service answers it as
# "ValidationException".
VALIDATION_ERROR_CODES = ("ValidationException", "ValidationError")
WHAT_TO_DO = {
    "ResourceLimitExceeded": "raise the quota it names in Service Quotas, or wait for the account's running jobs to "
                             "end, then send the event again",
}
DEFAULT_WHAT_TO_DO = "fix what it names, then send the event again"


@functools.cache
def refused_error_codes() -> frozenset[str]:
    """The validation errors, and the errors botocore's SageMaker model declares for the starting operations
    (`ResourceLimitExceeded`; `ResourceNotFound` for CreateTrainingJob) but ResourceInUse. None of those carries
    botocore's `retryable` trait: each describes the request or the account, which the same request sent again
    does not change."""
    model = sagemaker_client().meta.service_model
    declared = {shape.name for operation in STARTING_OPERATIONS
                for shape in model.operation_model(operation).error_shapes if not shape.metadata.get("retryable")}
    return frozenset(declared - {DUPLICATE_ERROR}) | frozenset(VALIDATION_ERROR_CODES)


def submit_training_job(request: dict[str, Any]) -> Literal["started", "duplicate"]:
    return _submit(sagemaker_client().create_training_job, request, "CreateTrainingJob")


def submit_tuning_job(request: dict[str, Any]) -> Literal["started", "duplicate"]:
    """A tuning job's name is as deterministic as a training job's, and SageMaker refuses a name twice alike."""
    return _submit(sagemaker_client().create_hyper_parameter_tuning_job, request, "CreateHyperParameterTuningJob")


def _submit(create: Any, request: dict[str, Any], operation: str) -> Literal["started", "duplicate"]:
    try:
        create(**request)
    except ClientError as error:
        details = error.response.get("Error", {})
        code = details.get("Code")
        if code == DUPLICATE_ERROR:
            return "duplicate"
        if code in refused_error_codes():
            message = details.get("Message") or "(no message)"
            raise InvalidInput([f"SageMaker refused {operation} with {code}: {message} -- "
                                f"{WHAT_TO_DO.get(code, DEFAULT_WHAT_TO_DO)}"])
        raise
    return "started"
