"""Dense layers of its own for each feature (a deeper form of the "-LR" in Gorishniy et al.'s PLE-LR, "On Embeddings
for Numerical Features in Tabular Deep Learning", NeurIPS 2022): each feature's encoded values (its piecewise-linear
bins, ranker.model.encoding) go through `layers` layers of `width` ReLU units that see that feature only, and the
features' embeddings, side by side, are what the first shared dense layer takes.

Why: a relevance rule of the form "count above t" is a step in one feature. The first shared layer can only add up
ramps of every feature; units of its own per feature can shape that feature's step first. What depth and width
are worth on the search-like benchmark: docs/benchmarks.md, ranking quality.

The layers are not `nn.Linear`s: those are the shared dense layers, which the fused GPU paths (ranker.gpu) run their
own way. These modules are the embedding's reference and portable form (CPU runs, inference, exports, torch 2.2);
where ranker.gpu.fast_paths allows, training runs the same parameters through ranker.gpu.fused_embedding's kernels.
"""

from __future__ import annotations

import torch
from torch import nn


class PerFeatureDense(nn.Module):
    """`[features, documents, inputs] -> [features, documents, width]`: feature `f`'s inputs times its own
    `weight[f]`, plus `bias[f]`, as one batched product over the features."""

    def __init__(self, num_features: int, inputs: int, width: int):
        super().__init__()
        # Unit-variance weights over each unit's inputs, as a fan-in initialisation gives.
        self.weight = nn.Parameter(torch.randn(num_features, inputs, width) / inputs**0.5)
        self.bias = nn.Parameter(torch.zeros(num_features, width))

    def forward(self, per_feature: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias.unsqueeze(1), per_feature, self.weight)


class FeatureEmbedding(nn.Module):
    """`[..., num_features * inputs_per_feature] -> [..., num_features * width]`: feature `f`'s `inputs_per_feature`
    values through its own `layers` ReLU layers of `width` units."""

    def __init__(self, num_features: int, inputs_per_feature: int, width: int, layers: int):
        super().__init__()
        if width < 1:
            raise ValueError(f"embedding_width: {width} is not a unit count; use at least 1, or 0 for no embedding")
        if layers < 1:
            raise ValueError(f"embedding_layers: {layers} is not a layer count; use at least 1")
        self.num_features, self.inputs_per_feature = num_features, inputs_per_feature
        stack: list[nn.Module] = []
        for inputs in [inputs_per_feature] + [width] * (layers - 1):
            stack += [PerFeatureDense(num_features, inputs, width), nn.ReLU()]
        self.layers = nn.Sequential(*stack)

    def forward(self, encoded: torch.Tensor) -> torch.Tensor:
        # Features first through the whole stack: each layer is then one batched product, with no copies between
        # layers (docs/benchmarks.md, the per-feature embedding: several times faster on a CPU than an einsum per
        # layer over the documents-first layout).
        per_feature = encoded.unflatten(-1, (self.num_features, self.inputs_per_feature))
        embedded = self.layers(per_feature.flatten(0, -3).transpose(0, 1)).transpose(0, 1).flatten(1)
        return embedded.unflatten(0, per_feature.shape[:-2])
