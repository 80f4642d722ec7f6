"""The bf16 dense layer that fuses ReLU into the GEMM and writes float32 gradients (ranker.gpu.fused_linear) computes
what autocast's Linear + ReLU computes, forward and backward. On CPU here (bf16 arithmetic, the same code path but
the float32-output GEMM); the GPU run of benchmarks.gpu.gpu_checks covers the CUDA kernels."""

from __future__ import annotations

import pytest
import torch
from ranker.config import ModelConfig
from ranker.gpu.fused_linear import fused_linear, fused_plan
from ranker.model.mlp import RankingMLP
from torch import nn


def reference(inputs: torch.Tensor, layer: nn.Linear, relu: bool) -> torch.Tensor:
    """Autocast's arithmetic spelled out: bf16 operands, the float32 parameters' gradients cast back."""
    bias = layer.bias.to(torch.bfloat16) if layer.bias is not None else None
    out = nn.functional.linear(inputs.to(torch.bfloat16), layer.weight.to(torch.bfloat16), bias)
    return torch.relu(out) if relu else out


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_layer_matches_autocast_linear_and_relu(relu, bias):
    torch.manual_seed(0)
    layer = nn.Linear(48, 32, bias=bias)
    inputs = torch.randn(4, 8, 48, requires_grad=True)  # [queries, documents, features], as the model sees it
    upstream = torch.randn(4, 8, 32)

    outputs = {}
    for name, function in (("fused", fused_linear), ("reference", reference)):
        layer.zero_grad(set_to_none=True)
        inputs.grad = None
        out = function(inputs, layer, relu)
        (out.float() * upstream).sum().backward()
        outputs[name] = (out.float(), inputs.grad.clone(), layer.weight.grad.clone(),
                         layer.bias.grad.clone() if bias else None)

    for fused, expected, what in zip(outputs["fused"], outputs["reference"], ("output", "input grad",
                                                                             "weight grad", "bias grad")):
        if expected is None:
            continue
        assert fused.dtype == expected.dtype, what
        # bf16 operands either way; the fused layer accumulates the gradients' sums in float32, autocast in bf16
        torch.testing.assert_close(fused, expected, atol=0.05, rtol=0.02, msg=what)
    if relu:  # the ReLU's mask reached the gradient: no input gradient where every unit of a row was cut off
        assert (outputs["fused"][0] == 0).any()


def test_the_fused_plan_pairs_each_linear_with_the_relu_right_after_it_with_and_without_norm():
    for norm in ("none", "layer"):
        model = RankingMLP(ModelConfig(num_features=12, width=16, num_layers=4, norm=norm, dropout=0.1,
                                       embedding_layers=2))
        plan = [(type(module).__name__, relu) for module, relu in fused_plan(model.layers)]
        if norm == "none":  # every hidden Linear takes its ReLU along; dropout stays a module of its own
            assert plan == [("Linear", True), ("Dropout", False)] * 3 + [("Linear", False)]
        else:  # LayerNorm sits between: nothing to fuse
            assert plan == [("Linear", False), ("LayerNorm", False), ("ReLU", False), ("Dropout", False)] * 3 + [
                ("Linear", False)]
        # the keys checkpoints and exported models hold: the dense layers' keep their places whatever the input
        # encoding (a model of raw features without embeddings has no others); the fitted encoding adds its edges,
        # the per-feature embedding its weights
        dense = [0, 4, 8, 12] if norm == "layer" else [0, 3, 6, 9]
        norms = [1, 5, 9] if norm == "layer" else []
        layer_keys = [f"layers.{index}.{kind}" for index in dense + norms for kind in ("weight", "bias")]
        assert sorted(model.state_dict()) == sorted(layer_keys + ["encoding.inverse_widths", "encoding.lower_edges",
                                                                  "embedding.layers.0.weight", "embedding.layers.0.bias",
                                                                  "embedding.layers.2.weight", "embedding.layers.2.bias"])
        raw = RankingMLP(ModelConfig(num_features=12, width=16, num_layers=4, norm=norm, dropout=0.1, encoding="none",
                                     embedding_width=0))
        assert sorted(raw.state_dict()) == sorted(layer_keys)
