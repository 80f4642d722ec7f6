"""The trigger Lambda's environment: the contract between the stack and lambda/trigger (all strings)."""

from __future__ import annotations

import json

from stacks.buckets import CHECKPOINT_PREFIX, MODEL_PREFIX
from stacks.config import PipelineConfig
from stacks.training_code_modules import training_code_module

POWERTOOLS_SERVICE_NAME = "training-trigger"


def metric_definitions() -> list[dict[str, str]]:
    """The training code's own `MetricDefinitions`."""
    return training_code_module("ranker/log_format.py").metric_definitions()


def trigger_environment(config: PipelineConfig, *, data_bucket: str, artifacts_bucket: str, role_arn: str,
                        image_uri: str, source_bundle_uri: str, kms_key_arn: str | None,
                        notification_topic_arn: str) -> dict[str, str]:
    """Every variable the trigger reads, and nothing else."""
    return {
        "DATA_BUCKET": data_bucket,
        "ARTIFACTS_BUCKET": artifacts_bucket,
        "DATASET_PREFIX": config.dataset_prefix,
        "MARKER_NAMES": ",".join(config.marker_names),
        "JOB_NAME_PREFIX": config.project_prefix,
        "ROLE_ARN": role_arn,
        "TRAINING_IMAGE_URI": image_uri,
        "IMAGE_SOURCE": config.image_source,
        "FRAMEWORK_VERSION": config.framework_version,
        "PYTHON_VERSION": config.python_version,
        "SOURCE_BUNDLE_URI": source_bundle_uri,
        "OUTPUT_S3_URI": f"s3://{artifacts_bucket}/{MODEL_PREFIX}",
        "CHECKPOINT_S3_URI": f"s3://{artifacts_bucket}/{CHECKPOINT_PREFIX}",
        "DEFAULT_ENTRY_POINT": config.entry_point,
        "DEFAULT_DISTRIBUTION": config.distribution,
        "DEFAULT_INSTANCE_TYPE": config.instance_type,
        "DEFAULT_INSTANCE_COUNT": str(config.instance_count),
        "MAX_INSTANCE_COUNT": str(config.max_instance_count),
        "MAX_RUNTIME_CEILING_SECONDS": str(config.max_runtime_ceiling_seconds),
        "EXTRA_DATA_BUCKETS": ",".join(config.extra_data_buckets),
        "DEFAULT_HYPERPARAMETERS": json.dumps(config.default_hyperparameters, sort_keys=True),
        "INPUT_MODE": config.input_mode,
        "VOLUME_SIZE_GB": str(config.volume_size_gb),
        "MAX_RUNTIME_SECONDS": str(config.max_runtime_seconds),
        "USE_SPOT": _flag(config.use_spot),
        "TENSORBOARD": _flag(config.tensorboard),
        "MAX_WAIT_SECONDS": str(config.max_wait_seconds),
        "KEEP_ALIVE_SECONDS": str(config.keep_alive_seconds),
        "JOB_RETRY_ATTEMPTS": str(config.job_retry_attempts),
        "SUBNET_IDS": ",".join(config.subnet_ids),
        "SECURITY_GROUP_IDS": ",".join(config.security_group_ids),
        "KMS_KEY_ARN": kms_key_arn or "",
        "ENABLE_NETWORK_ISOLATION": _flag(config.enable_network_isolation),
        "ENABLE_INTER_CONTAINER_ENCRYPTION": _flag(config.enable_inter_container_encryption),
        "METRIC_DEFINITIONS": json.dumps(metric_definitions()),
        "CONTAINER_LOG_LEVEL": "20",
        "NOTIFICATION_TOPIC_ARN": notification_topic_arn,
        "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": config.project_prefix,
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }


def _flag(value: bool) -> str:
    return "true" if value else "false"
