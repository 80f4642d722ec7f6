"""A job's model artifact, as SageMaker uploads it (`model.tar.gz`) or unpacked, loaded for scoring."""

from __future__ import annotations

import contextlib
import json
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ranker.model import export

# Rows scored per forward pass: bounds the activations' memory (width x rows floats per layer) on large inputs.
ROWS_PER_PASS = 65_536


@dataclass(frozen=True)
class ArtifactScorer:
    """The trained scorer (its preprocessing included) and the feature count it takes."""

    scorer: nn.Module
    num_features: int

    @classmethod
    def load(cls, model_dir: Path) -> ArtifactScorer:
        """Through ranker.model.export, so whatever the model carries (preprocessing, weights) is applied."""
        model_dir = Path(model_dir)
        missing = [name for name in (export.WEIGHTS, export.CONFIG) if not (model_dir / name).is_file()]
        if missing:
            raise ValueError(f"model: {model_dir} lacks {', '.join(missing)}; point --model at a job's model.tar.gz "
                             "or the folder it unpacks to")
        num_features = json.loads((model_dir / export.CONFIG).read_text())["num_features"]
        return cls(export.load_scorer(model_dir), int(num_features))

    def score(self, features: np.ndarray, source: str) -> np.ndarray:
        """float32 `[rows]` scores of `[rows, features]` raw features; rows narrower than the model's input are
        widened with zeros (absent LETOR features are 0), wider ones refused naming `source`."""
        features = self.fit_width(features, source)
        scores = np.empty(len(features), np.float32)
        with torch.inference_mode():
            for first in range(0, len(features), ROWS_PER_PASS):
                part = torch.from_numpy(features[first:first + ROWS_PER_PASS])
                scores[first:first + len(part)] = self.scorer(part).float().numpy()
        return scores

    def fit_width(self, features: np.ndarray, source: str) -> np.ndarray:
        features = np.ascontiguousarray(features, dtype=np.float32)
        if features.ndim != 2:
            raise ValueError(f"{source}: expected rows of features, got an array of shape {features.shape}")
        width = features.shape[1]
        if width > self.num_features:
            raise ValueError(f"{source}: rows have {width} features but the model was trained on "
                             f"{self.num_features}; send at most {self.num_features} (LETOR indices 1.."
                             f"{self.num_features})")
        if width < self.num_features:
            features = np.pad(features, ((0, 0), (0, self.num_features - width)))
        return features


@contextlib.contextmanager
def unpacked(model: Path) -> Iterator[Path]:
    """The model folder of `model`: the folder itself, or `model.tar.gz` unpacked into a temporary folder that is
    removed afterwards."""
    model = Path(model)
    if model.is_dir():
        yield model
        return
    if not model.is_file() or not tarfile.is_tarfile(model):
        raise ValueError(f"model: {model} is neither a model folder nor a model.tar.gz; pass the job's "
                         "model.tar.gz (s3://<artifacts bucket>/models/<job>/output/model.tar.gz, copied locally)")
    with tempfile.TemporaryDirectory(prefix="ranker-model-") as folder, tarfile.open(model) as archive:
        # The "data" filter refuses members that would land outside the folder (absolute paths, `..`, links out).
        archive.extractall(folder, filter="data")
        yield Path(folder)
