"""The contract between the stack and lambda/trigger: the Lambda environment and the settings file in its bundle.

Only what deployment resolves (bucket names, ARNs, URIs) and what the runtime's libraries read at import go into the
environment, which Lambda caps at 4 KB for all variables together; everything the configuration fixes at synthesis
goes into `STATIC_SETTINGS_FILE` inside the function's bundle (lambda/trigger/training_trigger/settings.py reads
both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stacks.buckets import CHECKPOINT_PREFIX, MODEL_PREFIX
from stacks.config import PROJECT_ENTRY_POINTS, PipelineConfig
from stacks.source_layout import project_path
from stacks.training_code_modules import TRAINING_CODE_DIR, training_code_module

POWERTOOLS_SERVICE_NAME = "training-trigger"
STATIC_SETTINGS_FILE = "stack_settings.json"
# The objective a tuning job of the project's own entry points optimises unless its section names another: the
# metric both loops select their exported weights by (ranker.training.selection.SELECTION_METRIC, which imports
# torch, so synthesis cannot load it; a test holds the two equal).
RANKER_TUNING_OBJECTIVE = {"MetricName": "val_ndcg@10", "Type": "Maximize"}


def metric_definitions(config: PipelineConfig) -> list[dict[str, str]]:
    """The configured `MetricDefinitions`, else the project's training code's own."""
    if config.metric_definitions is not None:
        return [definition.model_dump() for definition in config.metric_definitions]
    return training_code_module("ranker/log_format.py").metric_definitions()


def trigger_environment(config: PipelineConfig, *, data_bucket: str, artifacts_bucket: str, role_arn: str,
                        image_uri: str, source_bundle_uri: str, kms_key_arn: str | None,
                        notification_topic_arn: str) -> dict[str, str]:
    """Every variable the trigger and Powertools read, and nothing else."""
    return {
        "DATA_BUCKET": data_bucket,
        "ARTIFACTS_BUCKET": artifacts_bucket,
        "ROLE_ARN": role_arn,
        "TRAINING_IMAGE_URI": image_uri,
        "SOURCE_BUNDLE_URI": source_bundle_uri,
        "OUTPUT_S3_URI": f"s3://{artifacts_bucket}/{MODEL_PREFIX}",
        "CHECKPOINT_S3_URI": f"s3://{artifacts_bucket}/{CHECKPOINT_PREFIX}",
        "KMS_KEY_ARN": kms_key_arn or "",
        "NOTIFICATION_TOPIC_ARN": notification_topic_arn,
        "STATIC_SETTINGS_FILE": STATIC_SETTINGS_FILE,
        "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": config.project_prefix,
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }


def trigger_static_settings(config: PipelineConfig, *, bundle_files: Iterable[str],
                            model_trainer: Mapping[str, Any]) -> dict[str, Any]:
    """The settings file's object: the configuration as the trigger needs it, the bundle's file list, the training
    code's flag definitions for the project's own entry points, and the `model_trainer` launch's files
    (stacks/model_trainer_files.py's `model_trainer_settings`)."""
    # The project's own training code: the trigger checks its entry points' hyperparameters against their flags.
    runs_project_code = project_path(config.source_dir) == TRAINING_CODE_DIR
    return {
        "dataset_prefix": config.dataset_prefix,
        "marker_names": list(config.marker_names),
        "job_name_prefix": config.project_prefix,
        "image_source": config.image_source,
        "framework_version": config.framework_version,
        "python_version": config.python_version,
        "default_entry_point": config.entry_point,
        "default_distribution": config.distribution,
        "default_launch": config.launch,
        "default_instance_type": config.instance_type,
        "default_instance_count": config.instance_count,
        "max_instance_count": config.max_instance_count,
        "max_runtime_ceiling_seconds": config.max_runtime_ceiling_seconds,
        "extra_data_buckets": list(config.extra_data_buckets),
        "default_hyperparameters": dict(sorted(config.default_hyperparameters.items())),
        "default_environment": dict(sorted(config.default_environment.items())),
        "train_data_distribution": config.train_data_distribution,
        "input_mode": config.input_mode,
        "volume_size_gb": config.volume_size_gb,
        "max_runtime_seconds": config.max_runtime_seconds,
        "use_spot": config.use_spot,
        "tensorboard": config.tensorboard,
        "max_wait_seconds": config.max_wait_seconds,
        "keep_alive_seconds": config.keep_alive_seconds,
        "job_retry_attempts": config.job_retry_attempts,
        "subnet_ids": list(config.subnet_ids),
        "security_group_ids": list(config.security_group_ids),
        "enable_network_isolation": config.enable_network_isolation,
        "enable_inter_container_encryption": config.enable_inter_container_encryption,
        "metric_definitions": metric_definitions(config),
        "container_log_level": "20",
        "bundle_files": sorted(bundle_files),
        "checked_entry_points": list(PROJECT_ENTRY_POINTS) if runs_project_code else [],
        "training_flags": training_code_module("ranker/config.py").flag_definitions() if runs_project_code else {},
        "default_tuning_objective": dict(RANKER_TUNING_OBJECTIVE) if runs_project_code else {},
        "tuning_strategy": config.tuning_strategy,
        "tuning_max_jobs": config.tuning_max_jobs,
        "tuning_max_parallel_jobs": config.tuning_max_parallel_jobs,
        "tuning_early_stopping": config.tuning_early_stopping,
        "max_tuning_instance_hours": config.max_tuning_instance_hours,
        "mlflow_resource_arn": config.mlflow_resource_arn or "",
        "infra_check": config.infra_check,
        "model_trainer": dict(model_trainer),
    }
