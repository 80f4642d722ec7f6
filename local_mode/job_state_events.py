"""SageMaker's job state change events, as EventBridge hands them to the stack's rule targets: `Training Job State
Change` for a training job, `HyperParameter Tuning Job State Change` for a tuning job.

An event's detail is the job's Describe answer with timestamps in epoch milliseconds, plus its tags as a map.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from local_mode.local_clients import LOCAL_REGION

DETAIL_TYPE = "SageMaker Training Job State Change"
TUNING_DETAIL_TYPE = "SageMaker HyperParameter Tuning Job State Change"


def training_job_state_change_event(description: dict[str, Any], tags: list[dict[str, str]], *,
                                    account: str) -> dict[str, Any]:
    return _state_change_event(DETAIL_TYPE, description["TrainingJobArn"], description, tags, account)


def tuning_job_state_change_event(description: dict[str, Any], tags: list[dict[str, str]], *,
                                  account: str) -> dict[str, Any]:
    return _state_change_event(TUNING_DETAIL_TYPE, description["HyperParameterTuningJobArn"], description, tags,
                               account)


def _state_change_event(detail_type: str, arn: str, description: dict[str, Any], tags: list[dict[str, str]],
                        account: str) -> dict[str, Any]:
    detail = {**_epoch_milliseconds(description), "Tags": {tag["Key"]: tag["Value"] for tag in tags}}
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.sagemaker",
        "account": account,
        "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": LOCAL_REGION,
        "resources": [arn],
        "detail": detail,
    }


def _epoch_milliseconds(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, dict):
        return {key: _epoch_milliseconds(item) for key, item in value.items() if key != "ResponseMetadata"}
    if isinstance(value, list):
        return [_epoch_milliseconds(item) for item in value]
    return value
