"""A dense layer for bf16 training on GPU that saves two memory passes per layer over autocast's `Linear` + `ReLU`.

Autocast runs a layer as: matrix product with the bias (one GEMM), ReLU (a pass over the activations), and in the
backward pass the weight gradient comes out of its GEMM in bf16 and is then cast to the float32 parameter's dtype (a
pass over the gradient). Here ReLU runs in the GEMM's epilogue (cuBLASLt, `torch._addmm_activation`) and the weight
gradient's GEMM writes float32 directly (`torch.mm(..., out_dtype=torch.float32)`), as does the bias gradient's sum.
What that is worth: docs/benchmarks.md, optimisation log. Same arithmetic as autocast: bf16 inputs, float32 accumulation, float32 gradients for
the float32 parameters. ranker.gpu.fast_paths decides where these layers run (torch 2.8 and later, on GPU, bf16).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import torch
from torch import nn

BF16 = torch.bfloat16


class GradientSlot(Protocol):
    """Where a layer's backward writes its parameters' float32 gradients instead of handing them to autograd (a
    data-parallel wrapper's reduction buffer), and whom it tells once they are written."""

    weight: torch.Tensor
    bias: torch.Tensor | None

    def written(self) -> None: ...


class _FusedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, relu: bool,
                slot: GradientSlot | None) -> torch.Tensor:
        leading = inputs.shape[:-1]
        x = inputs.reshape(-1, inputs.shape[-1]).to(BF16)
        w = weight.to(BF16)
        if bias is None:
            out = torch.mm(x, w.t())
            out = out.relu_() if relu else out
        elif relu:
            out = torch._addmm_activation(bias.to(BF16), x, w.t())
        else:
            out = torch.addmm(bias.to(BF16), x, w.t())
        ctx.save_for_backward(x, w, out if relu else None)
        ctx.relu, ctx.has_bias, ctx.input_dtype, ctx.slot = relu, bias is not None, inputs.dtype, slot
        return out.reshape(*leading, weight.shape[0])

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        x, w, out = ctx.saved_tensors
        grad = grad_output.reshape(-1, grad_output.shape[-1]).to(BF16)
        if ctx.relu:
            grad = torch.ops.aten.threshold_backward(grad, out, 0)
        grad_input = grad_weight = grad_bias = None
        # The parameters' gradients first: with a slot, their all-reduce then overlaps the input gradient's GEMM.
        slot = ctx.slot
        if ctx.needs_input_grad[1]:
            grad_weight = float32_product(grad.t(), x, out=slot.weight if slot is not None else None)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = torch.sum(grad, 0, dtype=torch.float32, out=slot.bias if slot is not None else None)
        if slot is not None:
            slot.written()
            grad_weight = grad_bias = None  # already in the slot: nothing for autograd to accumulate
        if ctx.needs_input_grad[0]:
            grad_input = torch.mm(grad, w).to(ctx.input_dtype).reshape(*grad_output.shape[:-1], w.shape[1])
        return grad_input, grad_weight, grad_bias, None, None


def float32_product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """`a @ b` of bf16 operands as float32, written into `out` if given (the float32-output GEMM exists on CUDA
    only; the CPU branch serves tests)."""
    if a.is_cuda:
        return torch.mm(a, b, out_dtype=torch.float32, out=out)
    return torch.mm(a.float(), b.float(), out=out)


def fused_linear(inputs: torch.Tensor, layer: nn.Linear, relu: bool,
                 slot: GradientSlot | None = None) -> torch.Tensor:
    """`relu(layer(inputs))` (or `layer(inputs)`) in bf16 with float32 gradients; see the module docstring. With a
    `slot`, the layer's gradients go there (and its all-reduce starts) instead of to autograd."""
    with torch.autocast("cuda", enabled=False):  # the dtypes are chosen explicitly above
        return _FusedLinear.apply(inputs, layer.weight, layer.bias, relu, slot)


FusedPlan = list[tuple[nn.Module, bool]]
"""The layers in order, each with whether the ReLU right after it runs in its GEMM (that ReLU is then left out)."""


def fused_plan(layers: nn.Sequential) -> FusedPlan:
    modules = list(layers)
    plan: FusedPlan = []
    index = 0
    while index < len(modules):
        relu = (isinstance(modules[index], nn.Linear) and index + 1 < len(modules)
                and isinstance(modules[index + 1], nn.ReLU))
        plan.append((modules[index], relu))
        index += 2 if relu else 1
    return plan


def fused_scores(plan: FusedPlan, features: torch.Tensor,
                 slots: Mapping[nn.Module, GradientSlot] | None = None) -> torch.Tensor:
    """The scores of a model whose `layers` give `plan` (ranker.model.mlp.RankingMLP) for `features` as its `inputs`
    returns them, each Linear run by `fused_linear`; with `slots`, each Linear's gradients go to its slot."""
    for module, relu in plan:
        if isinstance(module, nn.Linear):
            features = fused_linear(features, module, relu, slots[module] if slots is not None else None)
        else:
            features = module(features)
    return features.squeeze(-1)


class FusedLayers(nn.Module):
    """Runs `module` (a RankingMLP) through the fused layers: what the loop trains and evaluates, on one process or
    inside DDP, where ranker.gpu.fast_paths takes them. The module and its state_dict stay as they are."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        self.plan = fused_plan(module.layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return fused_scores(self.plan, self.module.inputs(features))
