"""The watchdog's unit tests: Powertools reads its service name and namespace when the modules are imported."""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "stalled-job-watchdog")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RankerTraining")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
