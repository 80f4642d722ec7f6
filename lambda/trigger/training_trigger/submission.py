"""Starts the training job. The one place that calls CreateTrainingJob."""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import ClientError

from training_trigger.aws_clients import sagemaker_client

# Same job name: this dataset version already started a job (idempotency), so it must not be retried.
# Throttling, quota (ResourceLimitExceeded) and service errors propagate: the asynchronous invocation retries and
# the dead-letter queue keep the event until capacity returns.
DUPLICATE_ERROR = "ResourceInUse"


def submit_training_job(request: dict[str, Any]) -> Literal["started", "duplicate"]:
    try:
        sagemaker_client().create_training_job(**request)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == DUPLICATE_ERROR:
            return "duplicate"
        raise
    return "started"
