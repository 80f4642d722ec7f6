"""The watchdog's sample inputs: a two-host job's DescribeTrainingJob answer while it trains, its log streams, and
the environment the stack sets."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

EVENTS_DIR = Path(__file__).parent / "events"
JOB = "ranker-web-search-2026-11-01-2fc0bef5c3"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ranker-training-jobs"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
# The sample job entered Training at 05:40 after a long download; each host's stream as SageMaker names it.
TRAINING_SINCE = datetime.fromisoformat("2026-11-01T05:40:00+00:00")
STREAMS = {"algo-1": f"{JOB}/algo-1-1793511600", "algo-2": f"{JOB}/algo-2-1793511601"}
ALLOWED = timedelta(minutes=60)


def stack_environ(**overrides: str) -> dict[str, str]:
    """What stacks/job_watchdog.py sets (stall_minutes=60)."""
    return {"PROJECT_PREFIX": "ranker", "STALL_SECONDS": "3600", "TRAINING_LOG_GROUP": LOG_GROUP,
            "NOTIFICATION_TOPIC_ARN": TOPIC_ARN, **overrides}


def _parsed(value: Any, key: str = "") -> Any:
    """The answer as botocore hands it over: its timestamps as datetimes."""
    if isinstance(value, dict):
        return {name: _parsed(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [_parsed(item) for item in value]
    if key.endswith("Time") and isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def training_job(**changes: Any) -> dict[str, Any]:
    """The sample job's DescribeTrainingJob answer, with top-level fields changed."""
    description = _parsed(json.loads((EVENTS_DIR / "describe_training_job_training.json").read_text()))
    return {**copy.deepcopy(description), **changes}


def at(minutes_after_training_began: float) -> datetime:
    return TRAINING_SINCE + timedelta(minutes=minutes_after_training_began)
