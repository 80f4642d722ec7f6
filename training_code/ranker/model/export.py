"""What a finished run leaves in the model folder, and how to load it back for scoring.

- `model.safetensors`: the weights and the input encoding's fitted bin edges (`encoding.*`, ranker.model.encoding);
- `model_config.json`: the architecture, the encoding's settings and the `log1p` flag;
- `model.pt`: a TorchScript export (log1p and the encoding included) that serves without this package;
- `metrics.json`: final `train_loss`, `val_ndcg@k` and, with a test channel, `test_ndcg@k` of the exported weights,
  `exported_step` / `exported_epoch`: the optimizer steps and epochs done when those weights were validated best, and
  `defaults`: the devices the run's defaults were sized for (`cpu` or `gpu`, ranker.config.HARDWARE_DEFAULTS).

Beside them the training session writes `model.pt2` (ranker.model.portable) and the inference handler's `code/`
(ranker.serving.package); docs/scoring.md says how each is used.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ranker.config import ModelConfig
from ranker.model.mlp import RankingMLP

WEIGHTS, CONFIG, TORCHSCRIPT, METRICS = "model.safetensors", "model_config.json", "model.pt", "metrics.json"


class Scorer(nn.Module):
    """Scores a float32 `[documents, features]` matrix of raw features with the same preprocessing training used:
    log1p where the run applied it to the data, then the model, whose input encoding is part of it."""

    def __init__(self, model: RankingMLP, log1p: bool):
        super().__init__()
        self.model, self.log1p = model, log1p

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.log1p:
            features = torch.log1p(features.clamp(min=0))
        return self.model(features)


def save_model(model_dir: Path, model: RankingMLP, config: ModelConfig, log1p: bool,
               metrics: dict[str, float | str]) -> Scorer:
    """Writes the files above; returns the scorer the TorchScript file holds, built from the files written (what
    `load_scorer` gives), for further exports to take without building it again."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    save_file(state, model_dir / WEIGHTS)
    (model_dir / CONFIG).write_text(json.dumps({**dataclasses.asdict(config), "log1p": log1p}, indent=2))
    scorer = load_scorer(model_dir)
    torch.jit.save(torch.jit.script(scorer), model_dir / TORCHSCRIPT)
    (model_dir / METRICS).write_text(json.dumps(metrics, indent=2, sort_keys=True))
    return scorer


def _build_scorer(model_dir: Path) -> Scorer:
    settings = json.loads((Path(model_dir) / CONFIG).read_text())
    log1p = settings.pop("log1p")
    # A config that names no encoding holds a model of the raw (or log1p) features, one that names no embedding
    # width a model without per-feature embeddings.
    settings.setdefault("encoding", "none")
    settings.setdefault("embedding_width", 0)
    model = RankingMLP(ModelConfig(**settings))
    model.load_state_dict(load_file(Path(model_dir) / WEIGHTS))
    return Scorer(model, log1p)


def load_scorer(model_dir: Path) -> Scorer:
    """The trained scorer in eval mode on the CPU: `load_scorer(dir)(features_float32) -> scores`."""
    return _build_scorer(Path(model_dir)).eval()
