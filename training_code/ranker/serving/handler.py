"""The SageMaker PyTorch inference handler. A job's artifact carries this file as `code/inference.py`, beside copies
of the packages it imports (ranker.serving.package), so the serving container needs only the artifact.

The sagemaker-pytorch-inference toolkit puts `code/` on the path, imports `inference`, calls `model_fn(model_dir)`
once, then per request `input_fn(body, content_type)`, `predict_fn(features, model)` and `output_fn(scores, accept)`.
Request and response formats: ranker.serving.payloads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ranker.serving import payloads
from ranker.serving.artifact import ArtifactScorer


def model_fn(model_dir: str) -> ArtifactScorer:
    return ArtifactScorer.load(Path(model_dir))


def input_fn(request_body: str | bytes, request_content_type: str | None) -> np.ndarray:
    return payloads.decode(request_body, request_content_type)


def predict_fn(input_data: np.ndarray, model: ArtifactScorer) -> np.ndarray:
    return model.score(input_data, payloads.REQUEST)


def output_fn(prediction: np.ndarray, accept: str | None) -> str:
    return payloads.encode(prediction, accept)
