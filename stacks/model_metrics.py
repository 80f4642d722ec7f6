"""Which of a job's metrics describe the trained model: all its `MetricDefinitions` but the run's progress counters."""

from __future__ import annotations

from collections.abc import Iterable

from stacks.training_code_modules import training_code_module

RUN_PROGRESS_METRICS = frozenset({"epoch", "step", "learning_rate", "samples_per_second"})


def project_metric_names() -> tuple[str, ...]:
    """What the project's training code prints (`ranker/log_format.py`), when `metric_definitions` is unset."""
    return training_code_module("ranker/log_format.py").METRIC_NAMES


def model_quality_metrics(metric_names: Iterable[str]) -> tuple[str, ...]:
    return tuple(name for name in metric_names if name not in RUN_PROGRESS_METRICS)
