"""The pipeline's configuration: one frozen, validated object built from CDK context by app.py.

Defaults live in cdk.json (`context.pipeline`), named environments (`context.environments.<env>`) override
them, and `-c key=value` on the command line overrides both. Every error names the key, the bad value and
what is allowed, so a typo fails synthesis instead of a training job hours later. Which container, distribution
and instance go together comes from the training code's table of container profiles, which the trigger's
preflight also reads; left unset, framework_version, python_version and instance_type follow the distribution.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stacks.training_code_modules import ranker_module

profiles = ranker_module("container_profiles")

# SageMaker's managed spot and warm pools cap a job at 28 days.
_MAX_JOB_SECONDS = 28 * 24 * 3600
# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                       3288, 3653)


class ConfigError(ValueError):
    """A configuration value that synthesis refuses; the message names key, value and what is allowed."""


class PipelineConfig(BaseModel):
    """Everything the stacks need to know; see the configuration reference in README.md."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    env_name: Literal["dev", "prod"] = Field(description="named environment selected with -c env=...")
    project_prefix: str = Field(pattern=r"^[a-z][a-z0-9-]{1,30}[a-z0-9]$",
                                description="prefix of training job names and resource names")
    region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$", description="AWS region the stacks deploy to")
    dataset_prefix: str = Field(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/$",
                                description="key prefix of datasets in the data bucket, ends with '/'")
    marker_names: tuple[str, ...] = Field(min_length=1, description="file names that mark a dataset version complete")
    entry_point: Literal["train_lightning.py", "train_ddp.py"]
    distribution: str
    instance_type: str = Field(pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
    instance_count: int = Field(ge=1, le=100)
    framework_version: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$")
    python_version: str = Field(pattern=r"^py3\d{1,2}$")
    default_hyperparameters: dict[str, str | int | float | bool] = Field(default_factory=dict)
    image_source: Literal["dlc", "custom"]
    custom_image_tag: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    input_mode: Literal["File", "FastFile"]
    volume_size_gb: int = Field(ge=1, le=16384)
    max_runtime_seconds: int = Field(ge=60, le=_MAX_JOB_SECONDS)
    use_spot: bool
    max_wait_seconds: int = Field(ge=0, le=_MAX_JOB_SECONDS)
    keep_alive_seconds: int = Field(ge=0, le=3600)
    job_retry_attempts: int = Field(ge=0, le=30)
    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    enable_kms: bool
    enable_network_isolation: bool
    enable_inter_container_encryption: bool
    notification_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    retrain_schedule: str | None = Field(default=None, pattern=r"^(rate|cron)\(.+\)$")
    removal_policy: Literal["destroy", "retain"]
    trigger_reserved_concurrency: int = Field(ge=1, le=100)
    trigger_timeout_seconds: int = Field(ge=10, le=900)
    trigger_retry_attempts: int = Field(ge=0, le=2)
    trigger_max_event_age_seconds: int = Field(ge=60, le=21600)
    log_retention_days: int
    noncurrent_version_expiration_days: int = Field(ge=1, le=3650)
    ecr_images_to_keep: int = Field(ge=1, le=1000)

    @model_validator(mode="before")
    @classmethod
    def _container_defaults(cls, data: Any) -> Any:
        """Unset framework_version, python_version and instance_type follow the distribution."""
        if not isinstance(data, dict) or data.get("distribution") not in profiles.DISTRIBUTIONS:
            return data
        distribution = data["distribution"]
        filled = dict(data)
        if filled.get("framework_version") is None:
            filled["framework_version"] = profiles.default_profile(distribution).framework_version
        profile = profiles.profile_named(str(filled["framework_version"]))
        if profile is None:
            raise ValueError("; ".join(profiles.framework_errors(str(filled["framework_version"]), "")))
        if filled.get("python_version") is None:
            filled["python_version"] = profile.python_version
        if filled.get("instance_type") is None:
            filled["instance_type"] = profiles.DEFAULT_INSTANCE_TYPES[distribution]
        return filled

    @field_validator("distribution")
    @classmethod
    def _known_distribution(cls, distribution: str) -> str:
        if distribution not in profiles.DISTRIBUTIONS:
            raise ValueError(f"use one of {list(profiles.DISTRIBUTIONS)}")
        return distribution

    @field_validator("marker_names", mode="before")
    @classmethod
    def _split_marker_names(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("subnet_ids", "security_group_ids", mode="before")
    @classmethod
    def _split_ids(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("default_hyperparameters", mode="before")
    @classmethod
    def _parse_json_object(cls, value: Any) -> Any:
        """`-c default_hyperparameters='{"epochs": 3}'` arrives as a JSON string."""
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("marker_names")
    @classmethod
    def _plain_file_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"{name!r} is not a plain file name (letters, digits, '_', '.', '-')")
        return names

    @field_validator("subnet_ids")
    @classmethod
    def _subnet_ids(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        return _ids_with_prefix(ids, "subnet-")

    @field_validator("security_group_ids")
    @classmethod
    def _security_group_ids(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        return _ids_with_prefix(ids, "sg-")

    @field_validator("default_hyperparameters")
    @classmethod
    def _no_reserved_hyperparameters(cls, hyperparameters: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(key for key in hyperparameters if key.startswith("sagemaker_"))
        if reserved:
            raise ValueError(f"{reserved} are set by the pipeline itself; remove the 'sagemaker_' keys")
        return hyperparameters

    @field_validator("log_retention_days")
    @classmethod
    def _known_retention(cls, days: int) -> int:
        if days not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs allows only {list(LOG_RETENTION_DAYS)}")
        return days

    @model_validator(mode="after")
    def _consistent(self) -> PipelineConfig:
        _require(not self.use_spot or self.max_wait_seconds >= self.max_runtime_seconds, "max_wait_seconds",
                 self.max_wait_seconds, f"with use_spot, at least max_runtime_seconds ({self.max_runtime_seconds})")
        _require(not (self.use_spot and self.keep_alive_seconds), "keep_alive_seconds", self.keep_alive_seconds,
                 "0 with use_spot: SageMaker warm pools do not work with managed spot training")
        _require(bool(self.subnet_ids) == bool(self.security_group_ids), "subnet_ids/security_group_ids",
                 f"{list(self.subnet_ids)}/{list(self.security_group_ids)}", "both set (VPC) or both empty (no VPC)")
        _require(self.image_source != "custom" or self.custom_image_tag is not None, "custom_image_tag",
                 self.custom_image_tag, "a tag pushed to the project's ECR repository when image_source is 'custom'")
        container_errors = profiles.framework_errors(self.framework_version, self.python_version)
        container_errors += profiles.distribution_errors(
            distribution=self.distribution, instance_type=self.instance_type,
            framework_version=self.framework_version, image_source=self.image_source)
        if container_errors:
            raise ValueError("; ".join(container_errors))
        return self

    @property
    def uses_vpc(self) -> bool:
        return bool(self.subnet_ids)

    @property
    def is_production(self) -> bool:
        return self.env_name == "prod"


def build_config(*, env_name: str, defaults: Mapping[str, Any], environments: Mapping[str, Mapping[str, Any]],
                 overrides: Mapping[str, Any]) -> PipelineConfig:
    """Merge cdk.json defaults, the named environment and command-line overrides, then validate."""
    if env_name not in environments:
        raise ConfigError(f"env={env_name!r} is not a named environment: use one of {sorted(environments)}")
    merged = {**defaults, **environments[env_name], **overrides, "env_name": env_name}
    try:
        return PipelineConfig(**merged)
    except ValidationError as error:
        raise ConfigError(_describe(error)) from None


def _describe(error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        message = problem["msg"].removeprefix("Value error, ")
        if problem["loc"]:
            key = ".".join(str(part) for part in problem["loc"])
            message = f"{key}={problem.get('input')!r}: {message}"
        lines.append(message)
    return "invalid pipeline configuration (cdk.json context or -c key=value):\n  " + "\n  ".join(lines)


def _require(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{key}={value!r} is not allowed: use {allowed}")


def _split_csv(value: Any) -> Any:
    """`-c key=a,b` arrives as one string; cdk.json holds a list."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _ids_with_prefix(ids: tuple[str, ...], prefix: str) -> tuple[str, ...]:
    for resource_id in ids:
        if not re.fullmatch(re.escape(prefix) + r"[0-9a-f]{8,17}", resource_id):
            raise ValueError(f"{resource_id!r} is not an id like '{prefix}0123456789abcdef0'")
    return ids
