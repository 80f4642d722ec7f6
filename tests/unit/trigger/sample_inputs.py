"""The stack's environment and the stored sample events, as the trigger's tests use them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ranker.log_format import metric_definitions
from training_trigger.planning import TrainingJobSpec
from training_trigger.settings import Settings, settings_from_environ

EVENTS_DIR = Path(__file__).parent / "events"
DATA_BUCKET = "ranker-data-example"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ranker-training-rejections"


def stack_environ(**changes: str) -> dict[str, str]:
    """The environment the stack gives the function (the contract: stacks/trigger_environment.py)."""
    environ = {
        "AWS_REGION": "eu-west-1",
        "DATA_BUCKET": DATA_BUCKET,
        "ARTIFACTS_BUCKET": "ranker-artifacts-example",
        "DATASET_PREFIX": "datasets/",
        "MARKER_NAMES": "_SUCCESS,manifest.json",
        "JOB_NAME_PREFIX": "ranker",
        "ROLE_ARN": "arn:aws:iam::123456789012:role/ranker-sagemaker-execution",
        "TRAINING_IMAGE_URI": "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.2.0-gpu-py310",
        "IMAGE_SOURCE": "dlc",
        "FRAMEWORK_VERSION": "2.2.0",
        "PYTHON_VERSION": "py310",
        "SOURCE_BUNDLE_URI": "s3://ranker-artifacts-example/code/3f9c2a1b/sourcedir.tar.gz",
        "OUTPUT_S3_URI": "s3://ranker-artifacts-example/models/",
        "CHECKPOINT_S3_URI": "s3://ranker-artifacts-example/checkpoints/",
        "DEFAULT_ENTRY_POINT": "train_lightning.py",
        "DEFAULT_DISTRIBUTION": "pytorchddp",
        "DEFAULT_INSTANCE_TYPE": "ml.p4d.24xlarge",
        "DEFAULT_INSTANCE_COUNT": "1",
        "MAX_INSTANCE_COUNT": "4",
        "MAX_RUNTIME_CEILING_SECONDS": "259200",
        "EXTRA_DATA_BUCKETS": "ranker-shared-corpora",
        "DEFAULT_HYPERPARAMETERS": json.dumps({"epochs": 10, "loss": "listnet"}),
        "INPUT_MODE": "File",
        "VOLUME_SIZE_GB": "30",
        "MAX_RUNTIME_SECONDS": "86400",
        "USE_SPOT": "false",
        "TENSORBOARD": "false",
        "MAX_WAIT_SECONDS": "172800",
        "KEEP_ALIVE_SECONDS": "0",
        "JOB_RETRY_ATTEMPTS": "0",
        "SUBNET_IDS": "",
        "SECURITY_GROUP_IDS": "",
        "KMS_KEY_ARN": "",
        "ENABLE_NETWORK_ISOLATION": "false",
        "ENABLE_INTER_CONTAINER_ENCRYPTION": "false",
        "METRIC_DEFINITIONS": json.dumps(metric_definitions()),
        "CONTAINER_LOG_LEVEL": "20",
        "NOTIFICATION_TOPIC_ARN": TOPIC_ARN,
        "POWERTOOLS_SERVICE_NAME": "training-trigger",
        "POWERTOOLS_METRICS_NAMESPACE": "RankerTraining",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    return {**environ, **changes}


def stack_settings(**changes: str) -> Settings:
    return settings_from_environ(stack_environ(**changes))


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
