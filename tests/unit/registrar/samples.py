"""The registrar's sample inputs: stored events and API answers, and the environment the stack sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENTS_DIR = Path(__file__).parent / "events"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ranker-training-jobs"
# The stack's choice for jobs trained in the 2.8.0/py312 training image: serving has 2.6.0 as its newest py312.
INFERENCE_IMAGE_URI = "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
QUALITY_METRICS = ("train_loss", "val_loss", "val_ndcg@1", "val_ndcg@3", "val_ndcg@5", "val_ndcg@10",
                   "test_ndcg@1", "test_ndcg@3", "test_ndcg@5", "test_ndcg@10")


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS_DIR / name).read_text())


def stack_environ(**overrides: str) -> dict[str, str]:
    """What stacks/model_registration.py sets, without a threshold unless asked."""
    return {"PROJECT_PREFIX": "ranker", "MODEL_QUALITY_METRICS": ",".join(QUALITY_METRICS),
            "INFERENCE_IMAGE_URI": INFERENCE_IMAGE_URI, "INFERENCE_FRAMEWORK_VERSION": "2.6.0",
            "INFERENCE_INSTANCE_TYPE": "ml.m5.large", "AWS_REGION": "eu-west-1",
            "NOTIFICATION_TOPIC_ARN": TOPIC_ARN, **overrides}
