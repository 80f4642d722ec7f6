"""Structured JSON logs and EMF metrics; service name and namespace come from POWERTOOLS_* variables.

No Tracer: it imports aws-xray-sdk, ~350 ms of cold start.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger()
metrics = Metrics()

JOBS_STARTED = "JobsStarted"
JOBS_REJECTED = "JobsRejected"
DUPLICATE_EVENTS = "DuplicateEvents"


def count(metric: str) -> None:
    metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
