"""The stack's environment and the stored sample events, as the trigger's tests use them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ranker.config import flag_definitions
from ranker.log_format import metric_definitions
from stacks.trigger_environment import RANKER_TUNING_OBJECTIVE
from training_trigger.planning import TrainingJobSpec
from training_trigger.settings import Settings, settings_from

EVENTS_DIR = Path(__file__).parent / "events"
DATA_BUCKET = "ranker-data-example"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ranker-training-rejections"


# Files of a training code bundle like the project's: its entry points, its package and the generic dependency.
BUNDLE_FILES = ("requirements.txt", "train_ddp.py", "train_lightning.py", "ranker/__init__.py", "ranker/config.py",
                "sagemaker_distributed/__init__.py")
STATIC_SETTINGS_NAME = "stack_settings.json"
# The model_trainer launch's files as synthesis describes them (stacks/model_trainer_files.py), for the bundle above.
MODEL_TRAINER_FILES = {
    "prefix": "model-trainer/5e2b0c8f9d1a4e7b6c3f2a1d0e9b8c7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c/",
    "container_entrypoint": ["/bin/bash"],
    "container_arguments": ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && "
                                  "/opt/ml/input/data/sm_drivers/sm_train.sh"],
}


def stack_environ(**changes: str) -> dict[str, str]:
    """The resolved environment the stack gives the function (the contract: stacks/trigger_environment.py)."""
    environ = {
        "AWS_REGION": "eu-west-1",
        "DATA_BUCKET": DATA_BUCKET,
        "ARTIFACTS_BUCKET": "ranker-artifacts-example",
        "ROLE_ARN": "arn:aws:iam::123456789012:role/ranker-sagemaker-execution",
        "TRAINING_IMAGE_URI": "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.2.0-gpu-py310",
        "SOURCE_BUNDLE_URI": "s3://ranker-artifacts-example/code/3f9c2a1b/sourcedir.tar.gz",
        "OUTPUT_S3_URI": "s3://ranker-artifacts-example/models/",
        "CHECKPOINT_S3_URI": "s3://ranker-artifacts-example/checkpoints/",
        "KMS_KEY_ARN": "",
        "NOTIFICATION_TOPIC_ARN": TOPIC_ARN,
        "STATIC_SETTINGS_FILE": STATIC_SETTINGS_NAME,
        "POWERTOOLS_SERVICE_NAME": "training-trigger",
        "POWERTOOLS_METRICS_NAMESPACE": "RankerTraining",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    return {**environ, **changes}


def stack_static_settings(**changes: Any) -> dict[str, Any]:
    """The settings file the stack writes into the bundle, for the project's own training code."""
    static = {
        "dataset_prefix": "datasets/",
        "marker_names": ["_SUCCESS", "manifest.json"],
        "job_name_prefix": "ranker",
        "image_source": "dlc",
        "framework_version": "2.2.0",
        "python_version": "py310",
        "default_entry_point": "train_lightning.py",
        "default_distribution": "pytorchddp",
        "default_launch": "toolkit",
        "default_instance_type": "ml.p4d.24xlarge",
        "default_instance_count": 1,
        "max_instance_count": 4,
        "max_runtime_ceiling_seconds": 259200,
        "extra_data_buckets": ["ranker-shared-corpora"],
        "default_hyperparameters": {"epochs": 10, "loss": "listwise"},
        "default_environment": {},
        "train_data_distribution": "FullyReplicated",
        "input_mode": "File",
        "volume_size_gb": 30,
        "max_runtime_seconds": 86400,
        "use_spot": False,
        "tensorboard": False,
        "max_wait_seconds": 172800,
        "keep_alive_seconds": 0,
        "job_retry_attempts": 0,
        "subnet_ids": [],
        "security_group_ids": [],
        "enable_network_isolation": False,
        "enable_inter_container_encryption": False,
        "metric_definitions": metric_definitions(),
        "container_log_level": "20",
        "bundle_files": list(BUNDLE_FILES),
        "checked_entry_points": ["train_ddp.py", "train_lightning.py"],
        "training_flags": flag_definitions(),
        "default_tuning_objective": dict(RANKER_TUNING_OBJECTIVE),
        "tuning_strategy": "Bayesian",
        "tuning_max_jobs": 10,
        "tuning_max_parallel_jobs": 2,
        "tuning_early_stopping": "Off",
        "max_tuning_instance_hours": 960,
        "mlflow_resource_arn": "",
        "infra_check": "multi_instance",
        "model_trainer": MODEL_TRAINER_FILES,
    }
    return {**static, **changes}


def stack_settings(**changes: Any) -> Settings:
    """Settings with `changes`: UPPER_CASE names change the environment, lower_case ones the settings file."""
    environ = stack_environ(**{name: value for name, value in changes.items() if name.isupper()})
    static = stack_static_settings(**{name: value for name, value in changes.items() if not name.isupper()})
    return settings_from(environ, static, STATIC_SETTINGS_NAME)


def write_stack_settings(folder: Path, **changes: Any) -> dict[str, str]:
    """Writes the settings file into `folder`; returns the environment that names it, as the deployed function
    has it."""
    path = folder / STATIC_SETTINGS_NAME
    path.write_text(json.dumps(stack_static_settings(**changes)))
    return stack_environ(STATIC_SETTINGS_FILE=str(path))


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS_DIR / name).read_text())


def job_spec(**changes: Any) -> TrainingJobSpec:
    """A planned job on the sample dataset; `changes` replaces fields."""
    spec = TrainingJobSpec(
        job_name="ranker-web-search-2026-11-01-5d0c2e7f1a",
        channels={"train": f"s3://{DATA_BUCKET}/datasets/web search/2026-11-01/train/",
                  "validation": f"s3://{DATA_BUCKET}/datasets/web search/2026-11-01/validation/"},
        entry_point="train_ddp.py",
        distribution="none",
        instance_type="ml.g5.2xlarge",
        instance_count=1,
        hyperparameters={"epochs": 10, "loss": "listnet", "batch-size": 512},
        spot=False,
        max_runtime=86400,
        tags={"trigger-source": "s3-eventbridge", "dataset": "web search"},
    )
    return replace(spec, **changes)
