"""The scorer: an MLP that maps each document's features to one relevance score."""

from __future__ import annotations

import torch
from torch import nn

from ranker.config import ModelConfig
from ranker.fused_linear import available, fused_linear


class RankingMLP(nn.Module):
    """`num_layers` dense layers: `num_layers - 1` hidden ones (ReLU, optional LayerNorm, dropout) and a scoring
    output layer. Scores any leading shape: `[..., features] -> [...]`."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.num_features < 1:
            raise ValueError(f"num_features: {config.num_features} is not a feature count; set it from the data")
        layers: list[nn.Module] = []
        width_in = config.num_features
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
        self.fused = True
        """Under bf16 autocast on GPU, run each Linear (with the ReLU right after it) as one `fused_linear`; the
        parameters and state_dict are the same either way. False: plain modules (an ablation's switch)."""
        # (module, whether the ReLU right after it runs in its GEMM): that ReLU is then left out of the plan
        self._fused_plan: list[tuple[nn.Module, bool]] = []
        index = 0
        while index < len(layers):
            relu = (isinstance(layers[index], nn.Linear) and index + 1 < len(layers)
                    and isinstance(layers[index + 1], nn.ReLU))
            self._fused_plan.append((layers[index], relu))
            index += 2 if relu else 1

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if torch.jit.is_scripting():  # the exported scorer (ranker.export) is plain modules
            return self.layers(features).squeeze(-1)
        if self.fused and available(features):
            return self.fused_forward(features)
        return self.layers(features).squeeze(-1)

    @torch.jit.unused
    def fused_forward(self, features: torch.Tensor, gradient_slots=None) -> torch.Tensor:
        """The forward pass through `fused_linear` layers; `gradient_slots` (a Linear -> LayerGradients mapping, from
        ranker.fused_data_parallel) take each layer's gradients instead of autograd."""
        for module, relu in self._fused_plan:
            if isinstance(module, nn.Linear):
                slot = gradient_slots[module] if gradient_slots is not None else None
                features = fused_linear(features, module, relu, slot)
            else:
                features = module(features)
        return features.squeeze(-1)
