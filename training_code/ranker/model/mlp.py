"""The scorer: an MLP that maps each document's features to one relevance score."""

from __future__ import annotations

import torch
from torch import nn

from ranker.config import ModelConfig
from ranker.model.embedding import FeatureEmbedding
from ranker.model.encoding import PiecewiseLinearEncoding


class RankingMLP(nn.Module):
    """The input encoding (ranker.model.encoding, fitted on the training channel; identity with `encoding="none"`),
    each feature's embedding (ranker.model.embedding; identity with `embedding_width=0`), then `num_layers` dense
    layers: `num_layers - 1` hidden ones (ReLU, optional LayerNorm, dropout) and a scoring output layer. Scores any
    leading shape: `[..., features] -> [...]`.

    `layers` maps `inputs(features)` `[..., width]` to `[..., 1]`, and the score is its one unit: what a wrapper that
    runs the layers its own way (ranker.gpu.fused_linear.FusedLayers) relies on, after calling `inputs` itself."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.num_features < 1:
            raise ValueError(f"num_features: {config.num_features} is not a feature count; set it from the data")
        self.encoding: nn.Module = (PiecewiseLinearEncoding(config.num_features, config.bins)
                                    if config.encoding == "piecewise" else nn.Identity())
        per_feature = config.bins if config.encoding == "piecewise" else 1
        self.embedding: nn.Module = (FeatureEmbedding(config.num_features, per_feature, config.embedding_width,
                                                      config.embedding_layers)
                                     if config.embedding_width else nn.Identity())
        layers: list[nn.Module] = []
        width_in = config.num_features * (config.embedding_width or per_feature)
        for _ in range(config.num_layers - 1):
            layers.append(nn.Linear(width_in, config.width))
            if config.norm == "layer":
                layers.append(nn.LayerNorm(config.width))
            layers.append(nn.ReLU())
            if config.dropout > 0:
                layers.append(nn.Dropout(config.dropout))
            width_in = config.width
        layers.append(nn.Linear(width_in, 1, bias=config.output_bias))
        self.layers = nn.Sequential(*layers)

    def inputs(self, features: torch.Tensor) -> torch.Tensor:
        """What the dense layers take: the encoded, embedded features."""
        return self.embedding(self.encoding(features))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(self.inputs(features)).squeeze(-1)
