"""The environment the stack sets, read once into a frozen, validated `Settings`.

The variable names are the contract with stacks/ (stacks/trigger_environment.py). A bad value is a
deployment error, so `load_settings` raises `SettingsError` listing every bad field rather than the first.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from training_trigger.container_profiles import DISTRIBUTIONS

ENTRY_POINTS = ("train_lightning.py", "train_ddp.py")
IMAGE_SOURCES = ("dlc", "custom")
INPUT_MODES = ("File", "FastFile")


class SettingsError(ValueError):
    def __init__(self, errors: list[str]):
        super().__init__("invalid trigger environment: " + "; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Settings:
    region: str
    data_bucket: str
    artifacts_bucket: str
    dataset_prefix: str
    marker_names: tuple[str, ...]
    job_name_prefix: str
    role_arn: str
    training_image_uri: str
    image_source: str
    framework_version: str
    python_version: str
    source_bundle_uri: str
    output_s3_uri: str
    checkpoint_s3_uri: str
    default_entry_point: str
    default_distribution: str
    default_instance_type: str
    default_instance_count: int
    max_instance_count: int  # cost ceiling: no job may ask for more instances
    max_runtime_ceiling_seconds: int  # cost ceiling: no job may ask for a longer max_runtime
    extra_data_buckets: tuple[str, ...]  # buckets besides data_bucket that training jobs may read channels from
    default_hyperparameters: Mapping[str, Any]
    input_mode: str
    volume_size_gb: int
    max_runtime_seconds: int
    use_spot: bool
    tensorboard: bool  # default for jobs that do not say: upload their TensorBoard logs
    max_wait_seconds: int
    keep_alive_seconds: int
    job_retry_attempts: int
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    kms_key_arn: str | None
    enable_network_isolation: bool
    enable_inter_container_encryption: bool
    metric_definitions: tuple[Mapping[str, str], ...]
    container_log_level: str
    notification_topic_arn: str


class _Reader:
    """Reads variables from one environment, collecting every error instead of stopping at the first."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.errors: list[str] = []

    def text(self, name: str, default: str | None = None, *, choices: tuple[str, ...] = (), allow_empty=False) -> str:
        value = self.environ.get(name, default)
        if value is None or (value == "" and not allow_empty):
            self.errors.append(f"{name} is missing: set it in the stack's Lambda environment")
            return ""
        if choices and value not in choices:
            self.errors.append(f"{name}={value!r} is not one of {list(choices)}: set one of them")
        return value

    def s3_uri(self, name: str) -> str:
        value = self.text(name)
        if value and not value.startswith("s3://"):
            self.errors.append(f"{name}={value!r} is not an S3 URI: use the form s3://bucket/prefix")
        return value

    def integer(self, name: str, default: str | None = None, *, minimum: int = 0) -> int:
        value = self.text(name, default)
        try:
            number = int(value)
        except ValueError:
            if value:
                self.errors.append(f"{name}={value!r} is not an integer: set a whole number >= {minimum}")
            return minimum
        if number < minimum:
            self.errors.append(f"{name}={value!r} is below {minimum}: set a whole number >= {minimum}")
        return number

    def flag(self, name: str) -> bool:
        return self.text(name, choices=("true", "false")) == "true"

    def csv(self, name: str, default: str | None = None) -> tuple[str, ...]:
        return tuple(item.strip() for item in self.text(name, default, allow_empty=True).split(",") if item.strip())

    def json(self, name: str, expected: type) -> Any:
        value = self.text(name)
        try:
            parsed = json.loads(value) if value else expected()
        except json.JSONDecodeError as error:
            self.errors.append(f"{name} is not valid JSON ({error}): set a JSON {expected.__name__}")
            return expected()
        if not isinstance(parsed, expected):
            self.errors.append(f"{name}={value!r} is not a JSON {expected.__name__}: set a JSON {expected.__name__}")
            return expected()
        return parsed


def settings_from_environ(environ: Mapping[str, str]) -> Settings:
    read = _Reader(environ)
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or ""
    if not region:
        read.errors.append("AWS_REGION is missing: the Lambda runtime sets it; set AWS_DEFAULT_REGION when testing")
    use_spot = read.flag("USE_SPOT")
    max_runtime_seconds = read.integer("MAX_RUNTIME_SECONDS", minimum=1)
    # Without spot the stack sends MAX_WAIT_SECONDS="0" (no wait); with spot SageMaker needs wait >= runtime.
    max_wait_seconds = read.integer("MAX_WAIT_SECONDS")
    if use_spot and max_wait_seconds < max_runtime_seconds:
        read.errors.append(f"MAX_WAIT_SECONDS={max_wait_seconds} is below MAX_RUNTIME_SECONDS={max_runtime_seconds} "
                           f"with USE_SPOT=true: SageMaker requires the spot wait to cover the runtime; raise "
                           f"MAX_WAIT_SECONDS or set USE_SPOT=false")
    default_instance_count = read.integer("DEFAULT_INSTANCE_COUNT", minimum=1)
    max_instance_count = read.integer("MAX_INSTANCE_COUNT", minimum=1)
    max_runtime_ceiling_seconds = read.integer("MAX_RUNTIME_CEILING_SECONDS", minimum=1)
    for name, value, ceiling_name, ceiling in (
            ("DEFAULT_INSTANCE_COUNT", default_instance_count, "MAX_INSTANCE_COUNT", max_instance_count),
            ("MAX_RUNTIME_SECONDS", max_runtime_seconds, "MAX_RUNTIME_CEILING_SECONDS", max_runtime_ceiling_seconds)):
        if value > ceiling:
            read.errors.append(f"{name}={value} exceeds {ceiling_name}={ceiling}: the defaults must sit under the "
                               f"cost ceilings; lower {name} or raise {ceiling_name}")
    dataset_prefix = read.text("DATASET_PREFIX", "datasets/")
    if dataset_prefix and not dataset_prefix.endswith("/"):
        read.errors.append(f"DATASET_PREFIX={dataset_prefix!r} must end with '/': e.g. 'datasets/'")
    settings = Settings(
        region=region,
        data_bucket=read.text("DATA_BUCKET"),
        artifacts_bucket=read.text("ARTIFACTS_BUCKET"),
        dataset_prefix=dataset_prefix,
        marker_names=read.csv("MARKER_NAMES", "_SUCCESS,manifest.json"),
        job_name_prefix=read.text("JOB_NAME_PREFIX"),
        role_arn=read.text("ROLE_ARN"),
        training_image_uri=read.text("TRAINING_IMAGE_URI"),
        image_source=read.text("IMAGE_SOURCE", choices=IMAGE_SOURCES),
        framework_version=read.text("FRAMEWORK_VERSION"),
        python_version=read.text("PYTHON_VERSION"),
        source_bundle_uri=read.s3_uri("SOURCE_BUNDLE_URI"),
        output_s3_uri=read.s3_uri("OUTPUT_S3_URI"),
        checkpoint_s3_uri=read.s3_uri("CHECKPOINT_S3_URI"),
        default_entry_point=read.text("DEFAULT_ENTRY_POINT", choices=ENTRY_POINTS),
        default_distribution=read.text("DEFAULT_DISTRIBUTION", choices=DISTRIBUTIONS),
        default_instance_type=read.text("DEFAULT_INSTANCE_TYPE"),
        default_instance_count=default_instance_count,
        max_instance_count=max_instance_count,
        max_runtime_ceiling_seconds=max_runtime_ceiling_seconds,
        extra_data_buckets=read.csv("EXTRA_DATA_BUCKETS", ""),
        default_hyperparameters=read.json("DEFAULT_HYPERPARAMETERS", dict),
        input_mode=read.text("INPUT_MODE", choices=INPUT_MODES),
        volume_size_gb=read.integer("VOLUME_SIZE_GB", minimum=1),
        max_runtime_seconds=max_runtime_seconds,
        use_spot=use_spot,
        tensorboard=read.flag("TENSORBOARD"),
        max_wait_seconds=max_wait_seconds,
        keep_alive_seconds=read.integer("KEEP_ALIVE_SECONDS", "0"),
        job_retry_attempts=read.integer("JOB_RETRY_ATTEMPTS", "0"),
        subnet_ids=read.csv("SUBNET_IDS", ""),
        security_group_ids=read.csv("SECURITY_GROUP_IDS", ""),
        kms_key_arn=read.text("KMS_KEY_ARN", "", allow_empty=True) or None,
        enable_network_isolation=read.flag("ENABLE_NETWORK_ISOLATION"),
        enable_inter_container_encryption=read.flag("ENABLE_INTER_CONTAINER_ENCRYPTION"),
        metric_definitions=tuple(read.json("METRIC_DEFINITIONS", list)),
        container_log_level=read.text("CONTAINER_LOG_LEVEL", "20"),
        notification_topic_arn=read.text("NOTIFICATION_TOPIC_ARN"),
    )
    if bool(settings.subnet_ids) != bool(settings.security_group_ids):
        read.errors.append("SUBNET_IDS and SECURITY_GROUP_IDS must be both set (VPC) or both empty (no VPC)")
    if read.errors:
        raise SettingsError(read.errors)
    return settings


@functools.cache
def load_settings() -> Settings:
    """The running function's settings, read once per execution environment."""
    return settings_from_environ(os.environ)
