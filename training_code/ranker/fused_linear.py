"""A dense layer for bf16 training on GPU that saves two memory passes per layer over autocast's `Linear` + `ReLU`.

Autocast runs a layer as: matrix product with the bias (one GEMM), ReLU (a pass over the activations), and in the
backward pass the weight gradient comes out of its GEMM in bf16 and is then cast to the float32 parameter's dtype (a
pass over the gradient). Here ReLU runs in the GEMM's epilogue (cuBLASLt, `torch._addmm_activation`) and the weight
gradient's GEMM writes float32 directly (`torch.mm(..., out_dtype=torch.float32)`), as does the bias gradient's sum.
At width 4096 that is ~0.45 ms of a ~7 ms step (docs/benchmarks.md). Same arithmetic as autocast: bf16 inputs,
float32 accumulation, float32 gradients for the float32 parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ranker.fused_data_parallel import LayerGradients

BF16 = torch.bfloat16


def available(features: torch.Tensor) -> bool:
    """Where this layer applies: CUDA under bf16 autocast, eager (elsewhere the model runs plain `Linear` + `ReLU`,
    and under torch.compile Inductor does its own fusing)."""
    return (features.is_cuda and not torch.compiler.is_compiling() and torch.is_autocast_enabled("cuda")
            and torch.get_autocast_dtype("cuda") == BF16)


class _FusedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, relu: bool,
                slot: LayerGradients | None) -> torch.Tensor:
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


def fused_linear(inputs: torch.Tensor, layer: torch.nn.Linear, relu: bool,
                 slot: LayerGradients | None = None) -> torch.Tensor:
    """`relu(layer(inputs))` (or `layer(inputs)`) in bf16 with float32 gradients; see the module docstring. With a
    `slot`, the layer's gradients go there (and its all-reduce starts) instead of to autograd."""
    with torch.autocast("cuda", enabled=False):  # the dtypes are chosen explicitly above
        return _FusedLinear.apply(inputs, layer.weight, layer.bias, relu, slot)
