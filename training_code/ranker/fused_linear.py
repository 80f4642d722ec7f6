"""A dense layer for bf16 training on GPU that saves two memory passes per layer over autocast's `Linear` + `ReLU`.

Autocast runs a layer as: matrix product with the bias (one GEMM), ReLU (a pass over the activations), and in the
backward pass the weight gradient comes out of its GEMM in bf16 and is then cast to the float32 parameter's dtype (a
pass over the gradient). Here ReLU runs in the GEMM's epilogue (cuBLASLt, `torch._addmm_activation`) and the weight
gradient's GEMM writes float32 directly (`torch.mm(..., out_dtype=torch.float32)`), as does the bias gradient's sum.
At width 4096 that is ~0.45 ms of a ~7 ms step (docs/benchmarks.md). Same arithmetic as autocast: bf16 inputs,
float32 accumulation, float32 gradients for the float32 parameters.
"""

from __future__ import annotations

import torch

BF16 = torch.bfloat16


def available(features: torch.Tensor) -> bool:
    """Where this layer applies: CUDA under bf16 autocast, eager (elsewhere the model runs plain `Linear` + `ReLU`,
    and under torch.compile Inductor does its own fusing)."""
    return (features.is_cuda and not torch.compiler.is_compiling() and torch.is_autocast_enabled("cuda")
            and torch.get_autocast_dtype("cuda") == BF16)


class _FusedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                relu: bool) -> torch.Tensor:
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
        ctx.relu, ctx.has_bias, ctx.input_dtype = relu, bias is not None, inputs.dtype
        return out.reshape(*leading, weight.shape[0])

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        x, w, out = ctx.saved_tensors
        grad = grad_output.reshape(-1, grad_output.shape[-1]).to(BF16)
        if ctx.relu:
            grad = torch.ops.aten.threshold_backward(grad, out, 0)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = torch.mm(grad, w).to(ctx.input_dtype).reshape(*grad_output.shape[:-1], w.shape[1])
        if ctx.needs_input_grad[1]:  # (the float32-output GEMM exists on CUDA only; the CPU branch serves tests)
            grad_weight = (torch.mm(grad.t(), x, out_dtype=torch.float32) if grad.is_cuda
                           else torch.mm(grad.t().float(), x.float()))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.sum(0, dtype=torch.float32)
        return grad_input, grad_weight, grad_bias, None


def fused_linear(inputs: torch.Tensor, layer: torch.nn.Linear, relu: bool) -> torch.Tensor:
    """`relu(layer(inputs))` (or `layer(inputs)`) in bf16 with float32 gradients; see the module docstring."""
    with torch.autocast("cuda", enabled=False):  # the dtypes are chosen explicitly above
        return _FusedLinear.apply(inputs, layer.weight, layer.bias, relu)
