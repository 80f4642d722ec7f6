"""The stack's settings, read once into a frozen, validated `Settings`.

Two parts, both written by stacks/trigger_environment.py: the values only deployment resolves (bucket names, ARNs,
URIs) in the Lambda environment, and everything the configuration fixes at synthesis in a JSON file of the bundle
(`STATIC_SETTINGS_FILE`, relative to the bundle root), which keeps the environment far below Lambda's 4 KB. A bad
value is a deployment error, so `load_settings` raises `SettingsError` listing every bad field rather than the first.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training_trigger import experiment_tracking, health_check
from training_trigger.container_profiles import DISTRIBUTIONS, LAUNCHES
from training_trigger.job_environment import environment_type_errors
from training_trigger.limits import api_shape, s3_data_distributions

BUNDLE_ROOT = Path(__file__).resolve().parents[1]
IMAGE_SOURCES = ("dlc", "custom")
INPUT_MODES = ("File", "FastFile")


class SettingsError(ValueError):
    def __init__(self, errors: list[str]):
        super().__init__("invalid trigger settings: " + "; ".join(errors))
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
    default_launch: str
    default_instance_type: str
    default_instance_count: int
    max_instance_count: int  # cost ceiling: no job may ask for more instances
    max_runtime_ceiling_seconds: int  # cost ceiling: no job may ask for a longer max_runtime
    extra_data_buckets: tuple[str, ...]  # buckets besides data_bucket that training jobs may read channels from
    default_hyperparameters: Mapping[str, Any]
    default_environment: Mapping[str, str]  # every job's environment variables, under the manifest's and payload's
    train_data_distribution: str  # default S3DataDistributionType of the train channel
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
    bundle_files: frozenset[str]  # every file of the job's sourcedir.tar.gz, by its path in the archive
    checked_entry_points: tuple[str, ...]  # scripts whose hyperparameters training_flags describes
    training_flags: Mapping[str, Any]  # the training code's flag definitions (ranker.config.flag_definitions)
    # Tuning jobs (docs/tuning.md): the objective of checked_entry_points ({"MetricName", "Type"}; {} for other
    # code), the defaults of a `tuning` section, and the cost ceiling over all of a tuning job's trials.
    default_tuning_objective: Mapping[str, str]
    tuning_strategy: str
    tuning_max_jobs: int
    tuning_max_parallel_jobs: int
    tuning_early_stopping: str
    max_tuning_instance_hours: int
    mlflow_resource_arn: str  # the managed MLflow every job logs to ("": no tracking; experiment_tracking.py)
    infra_check: str  # which jobs run SageMaker's cluster health check (health_check.MODES)
    # The `model_trainer` launch's files, which synthesis deploys to the artifacts bucket (stacks/model_trainer_files.py):
    # {"prefix": key prefix, "container_entrypoint": [...], "container_arguments": [...]}, the last two as the pinned
    # SDK v3 sends them.
    model_trainer: Mapping[str, Any]


class _EnvironmentReader:
    """Reads the resolved values from the environment, collecting every error instead of stopping at the first."""

    def __init__(self, environ: Mapping[str, str], errors: list[str]):
        self.environ, self.errors = environ, errors

    def text(self, name: str, *, allow_empty=False) -> str:
        value = self.environ.get(name)
        if value is None or (value == "" and not allow_empty):
            self.errors.append(f"{name} is missing: set it in the stack's Lambda environment")
            return ""
        return value

    def s3_uri(self, name: str) -> str:
        value = self.text(name)
        if value and not value.startswith("s3://"):
            self.errors.append(f"{name}={value!r} is not an S3 URI: use the form s3://bucket/prefix")
        return value


class _StaticReader:
    """Reads the synthesized settings file, typed as JSON, collecting every error like _EnvironmentReader."""

    def __init__(self, document: Mapping[str, Any], where: str, errors: list[str]):
        self.document, self.where, self.errors = document, where, errors

    def _get(self, name: str, expected: type | tuple[type, ...], example: str) -> Any:
        value = self.document.get(name)
        # JSON true is a Python int too: a boolean counts as a number nowhere.
        if value is None or (isinstance(value, bool) and expected is not bool) or not isinstance(value, expected):
            self.errors.append(f"{self.where}: {name}={value!r} is not {example}: synthesize and deploy the stack "
                               f"again, which writes it")
            return None
        return value

    def text(self, name: str, *, choices: tuple[str, ...] = ()) -> str:
        value = self._get(name, str, "a string") or ""
        if value and choices and value not in choices:
            self.errors.append(f"{self.where}: {name}={value!r} is not one of {list(choices)}: set one of them")
        return value

    def integer(self, name: str, *, minimum: int = 0) -> int:
        value = self._get(name, int, f"a whole number >= {minimum}")
        if value is None:
            return minimum
        if value < minimum:
            self.errors.append(f"{self.where}: {name}={value} is below {minimum}: set a whole number >= {minimum}")
        return value

    def flag(self, name: str) -> bool:
        return bool(self._get(name, bool, "true or false"))

    def strings(self, name: str) -> tuple[str, ...]:
        value = self._get(name, list, "a list of strings") or []
        if not all(isinstance(item, str) for item in value):
            self.errors.append(f"{self.where}: {name}={value!r} is not a list of strings: list names")
            return ()
        return tuple(value)

    def mapping(self, name: str) -> dict[str, Any]:
        return self._get(name, dict, "an object") or {}

    def objects(self, name: str) -> tuple[Mapping[str, Any], ...]:
        value = self._get(name, list, "a list of objects") or []
        if not all(isinstance(item, dict) for item in value):
            self.errors.append(f"{self.where}: {name}={value!r} is not a list of objects: list objects")
            return ()
        return tuple(value)


def read_static_settings(path: Path) -> dict[str, Any]:
    """The settings file's object; raises SettingsError naming the file when it is missing or not a JSON object."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SettingsError([f"{path} cannot be read as JSON ({error}): it is written into the trigger's bundle at "
                             f"synthesis; deploy the stack again"]) from None
    if not isinstance(document, dict):
        raise SettingsError([f"{path} holds {type(document).__name__}, not an object: deploy the stack again"])
    return document


def settings_from(environ: Mapping[str, str], static: Mapping[str, Any], static_name: str) -> Settings:
    """Settings from the resolved environment and the synthesized settings file's object (named `static_name`)."""
    errors: list[str] = []
    env = _EnvironmentReader(environ, errors)
    read = _StaticReader(static, static_name, errors)
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or ""
    if not region:
        errors.append("AWS_REGION is missing: the Lambda runtime sets it; set AWS_DEFAULT_REGION when testing")
    use_spot = read.flag("use_spot")
    max_runtime_seconds = read.integer("max_runtime_seconds", minimum=1)
    # Without spot the stack writes max_wait_seconds 0 (no wait); with spot SageMaker needs wait >= runtime.
    max_wait_seconds = read.integer("max_wait_seconds")
    if use_spot and max_wait_seconds < max_runtime_seconds:
        errors.append(f"{static_name}: max_wait_seconds={max_wait_seconds} is below max_runtime_seconds="
                      f"{max_runtime_seconds} with use_spot: SageMaker requires the spot wait to cover the runtime; "
                      f"raise max_wait_seconds or turn use_spot off")
    default_instance_count = read.integer("default_instance_count", minimum=1)
    max_instance_count = read.integer("max_instance_count", minimum=1)
    max_runtime_ceiling_seconds = read.integer("max_runtime_ceiling_seconds", minimum=1)
    for name, value, ceiling_name, ceiling in (
            ("default_instance_count", default_instance_count, "max_instance_count", max_instance_count),
            ("max_runtime_seconds", max_runtime_seconds, "max_runtime_ceiling_seconds", max_runtime_ceiling_seconds)):
        if value > ceiling:
            errors.append(f"{static_name}: {name}={value} exceeds {ceiling_name}={ceiling}: the defaults must sit "
                          f"under the cost ceilings; lower {name} or raise {ceiling_name}")
    dataset_prefix = read.text("dataset_prefix")
    if dataset_prefix and not dataset_prefix.endswith("/"):
        errors.append(f"{static_name}: dataset_prefix={dataset_prefix!r} must end with '/': e.g. 'datasets/'")
    bundle_files = frozenset(read.strings("bundle_files"))
    default_entry_point = read.text("default_entry_point")
    if default_entry_point and default_entry_point not in bundle_files:
        errors.append(f"{static_name}: default_entry_point={default_entry_point!r} is not in bundle_files: "
                      f"synthesize and deploy the stack again")
    # What only deployment resolves: names, ARNs and URIs from the environment.
    resolved = {"region": region, "data_bucket": env.text("DATA_BUCKET"),
                "artifacts_bucket": env.text("ARTIFACTS_BUCKET"), "role_arn": env.text("ROLE_ARN"),
                "training_image_uri": env.text("TRAINING_IMAGE_URI"),
                "source_bundle_uri": env.s3_uri("SOURCE_BUNDLE_URI"), "output_s3_uri": env.s3_uri("OUTPUT_S3_URI"),
                "checkpoint_s3_uri": env.s3_uri("CHECKPOINT_S3_URI"),
                "kms_key_arn": env.text("KMS_KEY_ARN", allow_empty=True) or None,
                "notification_topic_arn": env.text("NOTIFICATION_TOPIC_ARN")}
    settings = Settings(
        **resolved,
        dataset_prefix=dataset_prefix,
        marker_names=read.strings("marker_names"),
        job_name_prefix=read.text("job_name_prefix"),
        image_source=read.text("image_source", choices=IMAGE_SOURCES),
        framework_version=read.text("framework_version"),
        python_version=read.text("python_version"),
        default_entry_point=default_entry_point,
        default_distribution=read.text("default_distribution", choices=DISTRIBUTIONS),
        default_launch=read.text("default_launch", choices=LAUNCHES),
        default_instance_type=read.text("default_instance_type"),
        default_instance_count=default_instance_count,
        max_instance_count=max_instance_count,
        max_runtime_ceiling_seconds=max_runtime_ceiling_seconds,
        extra_data_buckets=read.strings("extra_data_buckets"),
        default_hyperparameters=read.mapping("default_hyperparameters"),
        default_environment=read.mapping("default_environment"),
        train_data_distribution=read.text("train_data_distribution", choices=s3_data_distributions()),
        input_mode=read.text("input_mode", choices=INPUT_MODES),
        volume_size_gb=read.integer("volume_size_gb", minimum=1),
        max_runtime_seconds=max_runtime_seconds,
        use_spot=use_spot,
        tensorboard=read.flag("tensorboard"),
        max_wait_seconds=max_wait_seconds,
        keep_alive_seconds=read.integer("keep_alive_seconds"),
        job_retry_attempts=read.integer("job_retry_attempts"),
        subnet_ids=read.strings("subnet_ids"),
        security_group_ids=read.strings("security_group_ids"),
        enable_network_isolation=read.flag("enable_network_isolation"),
        enable_inter_container_encryption=read.flag("enable_inter_container_encryption"),
        metric_definitions=read.objects("metric_definitions"),
        container_log_level=read.text("container_log_level"),
        bundle_files=bundle_files,
        checked_entry_points=read.strings("checked_entry_points"),
        training_flags=read.mapping("training_flags"),
        default_tuning_objective=read.mapping("default_tuning_objective"),
        tuning_strategy=read.text("tuning_strategy", choices=tuple(api_shape("HyperParameterTuningJobStrategyType").enum)),
        tuning_max_jobs=read.integer("tuning_max_jobs", minimum=1),
        tuning_max_parallel_jobs=read.integer("tuning_max_parallel_jobs", minimum=1),
        tuning_early_stopping=read.text("tuning_early_stopping",
                                        choices=tuple(api_shape("TrainingJobEarlyStoppingType").enum)),
        max_tuning_instance_hours=read.integer("max_tuning_instance_hours", minimum=1),
        mlflow_resource_arn=read.text("mlflow_resource_arn"),
        infra_check=read.text("infra_check", choices=health_check.MODES),
        model_trainer=read.mapping("model_trainer"),
    )
    if settings.mlflow_resource_arn and region:
        errors += [f"{static_name}: {error}; synthesize and deploy the stack again" for error in
                   experiment_tracking.resource_arn_errors(
                       settings.mlflow_resource_arn, "mlflow_resource_arn", region=region,
                       arn_pattern=api_shape("MlflowConfig").members["MlflowResourceArn"].metadata["pattern"])]
    if settings.checked_entry_points and not {"flags", "true_texts", "false_texts"} <= set(settings.training_flags):
        errors.append(f"{static_name}: checked_entry_points={list(settings.checked_entry_points)} without the "
                      f"training code's flag definitions in training_flags: synthesize and deploy the stack again")
    errors += [f"{static_name}: {error}: synthesize and deploy the stack again"
               for error in environment_type_errors(settings.default_environment, "default_environment")]
    model_trainer = settings.model_trainer
    if not (isinstance(model_trainer.get("prefix"), str) and all(
            isinstance(model_trainer.get(name), list) and all(isinstance(item, str) for item in model_trainer[name])
            for name in ("container_entrypoint", "container_arguments"))):
        errors.append(f"{static_name}: model_trainer={dict(model_trainer)!r} lacks the launch's files (prefix, "
                      f"container_entrypoint, container_arguments): synthesize and deploy the stack again")
    if bool(settings.subnet_ids) != bool(settings.security_group_ids):
        errors.append(f"{static_name}: subnet_ids and security_group_ids must be both set (VPC) or both empty "
                      f"(no VPC)")
    if errors:
        raise SettingsError(errors)
    return settings


def settings_from_environ(environ: Mapping[str, str]) -> Settings:
    """Settings from `environ` and the settings file it names (`STATIC_SETTINGS_FILE`, relative to the bundle)."""
    name = environ.get("STATIC_SETTINGS_FILE")
    if not name:
        raise SettingsError(["STATIC_SETTINGS_FILE is missing: set it in the stack's Lambda environment"])
    path = BUNDLE_ROOT / name
    return settings_from(environ, read_static_settings(path), name)


@functools.cache
def load_settings() -> Settings:
    """The running function's settings, read once per execution environment."""
    return settings_from_environ(os.environ)
