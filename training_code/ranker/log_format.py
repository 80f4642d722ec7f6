"""How training reports metrics in its logs: the one source of truth.

SageMaker reads metrics out of a job's log stream with the regexes in the request's `MetricDefinitions`.
The training loops print every metric through `format_metrics`, and the stack turns `metric_definitions()`
into the trigger's configuration, so the printed names and the scraped names cannot drift apart.

This module imports nothing beyond the standard library: the CDK app loads it at synthesis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

# Every metric a training script may print, in the order it prints them.
METRIC_NAMES: tuple[str, ...] = (
    "epoch",
    "step",
    "train_loss",
    "learning_rate",
    "samples_per_second",
    "val_loss",
    "val_ndcg@1",
    "val_ndcg@3",
    "val_ndcg@5",
    "val_ndcg@10",
    "test_ndcg@1",
    "test_ndcg@3",
    "test_ndcg@5",
    "test_ndcg@10",
)

_NUMBER = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"


def format_metrics(metrics: Mapping[str, float]) -> str:
    """One log line, `name=value` pairs separated by spaces, e.g. `epoch=2 train_loss=0.4182`."""
    unknown = sorted(set(metrics) - set(METRIC_NAMES))
    if unknown:
        raise ValueError(f"unknown metric name(s) {unknown}: add them to METRIC_NAMES in {__name__}")
    parts = []
    for name in METRIC_NAMES:
        if name in metrics:
            value = float(metrics[name])
            parts.append(f"{name}={int(value)}" if name in ("epoch", "step") else f"{name}={_format_float(value)}")
    return " ".join(parts)


def _format_float(value: float) -> str:
    return repr(value) if not math.isfinite(value) else f"{value:.6g}"


def metric_pattern(name: str) -> str:
    """The regex SageMaker applies to each log line to capture `name`'s value."""
    return rf"(?:^|\s){re.escape(name)}=({_NUMBER})(?:\s|$)"


def metric_definitions() -> list[dict[str, str]]:
    """`MetricDefinitions` for CreateTrainingJob, one per metric name."""
    return [{"Name": name, "Regex": metric_pattern(name)} for name in METRIC_NAMES]


def parse_metrics(line: str) -> dict[str, float]:
    """The metrics a log line carries, read with the same regexes SageMaker uses."""
    found = {}
    for name in METRIC_NAMES:
        match = re.search(metric_pattern(name), line)
        if match:
            found[name] = float(match.group(1))
    return found
