"""Starts the training job or the tuning job. The one place that calls CreateTrainingJob and
CreateHyperParameterTuningJob."""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import ClientError

from training_trigger.aws_clients import sagemaker_client

# Same job name: this dataset version already started a job (idempotency), so it must not be retried.
# Throttling, quota (ResourceLimitExceeded) and service errors propagate: the asynchronous invocation retries and
# the dead-letter queue keep the event until capacity returns.
DUPLICATE_ERROR = "ResourceInUse"


def submit_training_job(request: dict[str, Any]) -> Literal["started", "duplicate"]:
    return _submit(sagemaker_client().create_training_job, request)


def submit_tuning_job(request: dict[str, Any]) -> Literal["started", "duplicate"]:
    """A tuning job's name is as deterministic as a training job's, and SageMaker refuses a name twice alike."""
    return _submit(sagemaker_client().create_hyper_parameter_tuning_job, request)


def _submit(create: Any, request: dict[str, Any]) -> Literal["started", "duplicate"]:
    try:
        create(**request)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == DUPLICATE_ERROR:
            return "duplicate"
        raise
    return "started"
