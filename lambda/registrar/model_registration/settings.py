"""The environment the stack sets (stacks/model_registration.py), read once into a frozen, validated `Settings`."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass


class SettingsError(ValueError):
    def __init__(self, errors: list[str]):
        super().__init__("invalid registrar environment: " + "; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Threshold:
    """A model whose `metric` is below `minimum` (or missing) is not registered."""

    metric: str
    minimum: float


@dataclass(frozen=True)
class Serving:
    """Where a registered model runs: the PyTorch inference image the stack resolved at synthesis."""

    image_uri: str
    framework_version: str
    instance_type: str  # the CPU or GPU type the image is for
    region: str  # the function's own region, which the container's SDK clients use


@dataclass(frozen=True)
class Settings:
    project_prefix: str  # training jobs `<prefix>-*` are the project's; package groups are `<prefix>-<dataset>`
    quality_metrics: tuple[str, ...]  # the final metrics that describe the model (not epoch, step, throughput)
    threshold: Threshold | None
    serving: Serving
    notification_topic_arn: str


def settings_from_environ(environ: Mapping[str, str]) -> Settings:
    errors = []

    def required(name: str) -> str:
        value = environ.get(name, "")
        if not value:
            errors.append(f"{name} is missing: set it in the stack's Lambda environment")
        return value

    # Present but possibly empty: a script of the user's own may report no metric about the model itself.
    if "MODEL_QUALITY_METRICS" not in environ:
        errors.append("MODEL_QUALITY_METRICS is missing: set it in the stack's Lambda environment")
    quality_metrics = tuple(name for name in environ.get("MODEL_QUALITY_METRICS", "").split(",") if name)
    threshold_metric = environ.get("THRESHOLD_METRIC", "")
    threshold_minimum = environ.get("THRESHOLD_MINIMUM", "")
    threshold = None
    if bool(threshold_metric) != bool(threshold_minimum):
        errors.append(f"THRESHOLD_METRIC={threshold_metric!r} and THRESHOLD_MINIMUM={threshold_minimum!r}: set both "
                      "(a threshold) or neither (no threshold)")
    elif threshold_metric:
        try:
            minimum = float(threshold_minimum)
        except ValueError:
            minimum = math.nan
        if not math.isfinite(minimum):
            errors.append(f"THRESHOLD_MINIMUM={threshold_minimum!r} is not a finite number: set e.g. 0.75")
        if threshold_metric not in quality_metrics:
            errors.append(f"THRESHOLD_METRIC={threshold_metric!r} is not one of MODEL_QUALITY_METRICS "
                          f"{list(quality_metrics)}: name one of them")
        threshold = Threshold(threshold_metric, minimum)
    serving = Serving(image_uri=required("INFERENCE_IMAGE_URI"),
                      framework_version=required("INFERENCE_FRAMEWORK_VERSION"),
                      instance_type=required("INFERENCE_INSTANCE_TYPE"), region=required("AWS_REGION"))
    settings = Settings(project_prefix=required("PROJECT_PREFIX"), quality_metrics=quality_metrics,
                        threshold=threshold, serving=serving,
                        notification_topic_arn=required("NOTIFICATION_TOPIC_ARN"))
    if errors:
        raise SettingsError(errors)
    return settings


@functools.cache
def load_settings() -> Settings:
    """The running function's settings, read once per execution environment."""
    return settings_from_environ(os.environ)
