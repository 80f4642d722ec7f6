"""Tells people about input the trigger refused: nobody reads a Lambda's return value after an S3 event."""

from __future__ import annotations

import json
from typing import Any

from training_trigger.aws_clients import sns_client

SUBJECT_LIMIT = 100  # SNS rejects longer subjects


def publish_rejection(topic_arn: str, result: dict[str, Any], event: Any) -> None:
    subject = f"Training job rejected: {result.get('job_name') or 'no job name'}"[:SUBJECT_LIMIT]
    message = {**result, "event": event}
    sns_client().publish(TopicArn=topic_arn, Subject=subject, Message=json.dumps(message, indent=2, default=str))
