"""SageMaker's job state change events, as EventBridge hands them to the stack's rule targets: `Training Job State
Change` for a training job, `HyperParameter Tuning Job State Change` for a tuning job.

An event's detail is the part of the job's Describe answer that AWS documents for the event, with timestamps in
epoch milliseconds, plus its tags as a map. The fields are those of AWS's sample events ("Events that Amazon SageMaker
AI sends to Amazon EventBridge"), which EventBridge's schemas of the events repeat; the training job's schema adds
ModelArtifacts, and a failed job's event carries FailureReason. The Describe answer's other fields are left out, so
that nothing local can come to rely on them: a trial's event has no TuningJobArn (its HyperParameters mark it).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from local_mode.aws.local_clients import LOCAL_REGION

DETAIL_TYPE = "SageMaker Training Job State Change"
TUNING_DETAIL_TYPE = "SageMaker HyperParameter Tuning Job State Change"
TRAINING_DETAIL_FIELDS = (
    "TrainingJobName", "TrainingJobArn", "TrainingJobStatus", "SecondaryStatus", "FailureReason", "HyperParameters",
    "AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig", "ResourceConfig", "VpcConfig",
    "StoppingCondition", "CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime",
    "SecondaryStatusTransitions", "ModelArtifacts")
TUNING_DETAIL_FIELDS = (
    "HyperParameterTuningJobName", "HyperParameterTuningJobArn", "TrainingJobDefinition",
    "HyperParameterTuningJobStatus", "CreationTime", "LastModifiedTime", "TrainingJobStatusCounters",
    "ObjectiveStatusCounters")


def training_job_state_change_event(description: dict[str, Any], tags: list[dict[str, str]], *,
                                    account: str) -> dict[str, Any]:
    return _state_change_event(DETAIL_TYPE, description["TrainingJobArn"], description, TRAINING_DETAIL_FIELDS,
                               tags, account)


def tuning_job_state_change_event(description: dict[str, Any], tags: list[dict[str, str]], *,
                                  account: str) -> dict[str, Any]:
    return _state_change_event(TUNING_DETAIL_TYPE, description["HyperParameterTuningJobArn"], description,
                               TUNING_DETAIL_FIELDS, tags, account)


def _state_change_event(detail_type: str, arn: str, description: dict[str, Any], fields: tuple[str, ...],
                        tags: list[dict[str, str]], account: str) -> dict[str, Any]:
    documented = {field: description[field] for field in fields if field in description}
    detail = {**_epoch_milliseconds(documented), "Tags": {tag["Key"]: tag["Value"] for tag in tags}}
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
        return {key: _epoch_milliseconds(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_epoch_milliseconds(item) for item in value]
    return value
