"""The input encoding and the per-feature embedding of a RankingMLP in one Triton kernel per pass, for training on GPU.

Why: the embedding is cheap in arithmetic (each feature's few small layers: under 6% of a width-1024 MLP's
multiply-adds) but dear in memory. Run as PyTorch ops, the encoding writes each document's features as `bins` floats
each, and every layer of every feature writes its activations and reads them back, forward and backward, so the
embedding cost several times the shared dense layers' step. Fused, a document's feature goes from its raw value to its
last embedding layer in registers: the forward pass reads the raw features and writes the embedding's output, and the
backward pass reads them and the output's gradient, recomputing the layers' activations instead of storing them.
What that is worth: docs/benchmarks.md, the GPU tables.

The arithmetic is autocast's: bf16 operands with float32 accumulation, float32 biases and weight gradients, so the
fused and the PyTorch embedding agree to bf16 round-off (tests/training/test_fused_embedding.py runs these kernels in
Triton's interpreter on the CPU against the PyTorch embedding, and benchmarks.gpu.gpu_checks on a GPU). Inference,
exports and every path ranker.gpu.fast_paths does not take keep the PyTorch modules (ranker.model.embedding), which hold
the same parameters: the wrapper below changes how a step runs, never what the model is.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import torch
from torch import nn

from ranker.model.embedding import FeatureEmbedding, PerFeatureDense
from ranker.model.encoding import PiecewiseLinearEncoding

BF16 = torch.bfloat16
BLOCK_DOCUMENTS = 64
"""Documents per program: each program holds every layer's activations of its tile in registers (what other sizes
give: docs/benchmarks.md, the per-feature embedding's cost)."""
PROGRAMS_PER_MULTIPROCESSOR = 4
"""The backward pass's chunks of tiles: enough programs to fill the GPU, few enough that adding up each chunk's
weight-gradient sums is a small pass."""


def fusable(model: nn.Module) -> bool:
    """Whether `model` (a RankingMLP) has the piecewise-linear encoding and per-feature embedding these kernels run."""
    return (isinstance(getattr(model, "encoding", None), PiecewiseLinearEncoding)
            and isinstance(getattr(model, "embedding", None), FeatureEmbedding))


class FusedEmbedding(nn.Module):
    """Runs `module` (a RankingMLP for which `fusable` holds) with its encoding and embedding fused, its dense layers as
    they are. Exposes `layers` and `inputs` as the model does, so the other wrappers (ranker.gpu.fused_linear's
    FusedLayers, FusedDataParallel, DDP) take it in the model's place. The module and its state_dict stay as they are."""

    def __init__(self, module: nn.Module, precision: str = "bf16"):
        super().__init__()
        if not fusable(module):
            raise ValueError("FusedEmbedding: the model needs encoding='piecewise' and embedding_width > 0")
        self.module, self.precision = module, precision

    @property
    def layers(self) -> nn.Sequential:
        return self.module.layers

    def inputs(self, features: torch.Tensor) -> torch.Tensor:
        return fused_feature_embedding(features, self.module.encoding, self.module.embedding, self.precision)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(self.inputs(features)).squeeze(-1)


def fused_feature_embedding(features: torch.Tensor, encoding: PiecewiseLinearEncoding, embedding: FeatureEmbedding,
                            precision: str = "bf16", block_documents: int = BLOCK_DOCUMENTS) -> torch.Tensor:
    """`embedding(encoding(features))` as `[..., num_features * width]` through the Triton kernels: bf16 with
    autocast's arithmetic, or with `precision="fp32"` float32 exactly as the modules compute it; `block_documents`
    documents a program (a power of two, at least 16)."""
    if precision not in ("bf16", "fp32"):
        raise ValueError(f"precision: bad value {precision!r}: use bf16 or fp32")
    dense = [module for module in embedding.layers if isinstance(module, PerFeatureDense)]
    parameters = [tensor for layer in dense for tensor in (layer.weight, layer.bias)]
    with torch.autocast(features.device.type, enabled=False):  # the kernels choose their dtypes themselves
        return _FusedEmbedding.apply(features, encoding.lower_edges, encoding.inverse_widths, precision == "fp32",
                                     block_documents, *parameters)


class _FusedEmbedding(torch.autograd.Function):
    """Inputs: raw features `[..., F]`, the encoding's `[F, B]` edges and inverse widths, whether to compute in float32,
    the documents a program takes, then each layer's weight `[F, inputs, W]` and bias `[F, W]`. Gradients flow to the weights and biases only: the encoding is fitted, not
    trained, and the raw features are data."""

    @staticmethod
    def forward(ctx, features: torch.Tensor, lower: torch.Tensor, inverse: torch.Tensor, fp32: bool, block: int,
                *parameters: torch.Tensor) -> torch.Tensor:
        leading, num_features = features.shape[:-1], features.shape[-1]
        bins, width, layers = lower.shape[1], parameters[0].shape[-1], len(parameters) // 2
        transposed = features.reshape(-1, num_features).t().contiguous().float()
        documents = transposed.shape[1]
        kernels = _kernels()
        operands = torch.float32 if fp32 else BF16
        first_weight, first_bias = parameters[0].to(operands).contiguous(), parameters[1].float().contiguous()
        rest_weights, rest_biases = _stacked(parameters[2:], operands, features.device)
        out = torch.empty(documents, num_features * width, dtype=operands, device=features.device)
        shape = dict(N=documents, F=num_features, B=bins, W=width, BP=kernels.padded(bins), WP=kernels.padded(width),
                     LAYERS=layers, BLOCK_N=block, FP32=fp32)
        if documents:
            grid = (num_features, -(-documents // block))
            kernels.embedding_forward_kernel[grid](transposed, lower, inverse, first_weight, first_bias, rest_weights,
                                                   rest_biases, out, **shape)
        ctx.save_for_backward(transposed, lower, inverse, first_weight, first_bias, rest_weights, rest_biases)
        ctx.shape = shape
        return out.view(*leading, num_features * width)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        transposed, lower, inverse, first_weight, first_bias, rest_weights, rest_biases = ctx.saved_tensors
        shape, kernels = ctx.shape, _kernels()
        documents, num_features, bins, width, layers, block = (shape[key]
                                                                for key in ("N", "F", "B", "W", "LAYERS", "BLOCK_N"))
        device = transposed.device
        tiles = -(-documents // block)
        wanted_chunks = max(1, -(-PROGRAMS_PER_MULTIPROCESSOR * _multiprocessors(device) // num_features))
        tiles_per_chunk = max(1, -(-tiles // wanted_chunks))
        chunks = max(1, -(-tiles // tiles_per_chunk))

        def sums(*per_chunk_shape: int) -> torch.Tensor:
            return torch.zeros(chunks, *per_chunk_shape, dtype=torch.float32, device=device)

        grad_first, grad_first_bias = sums(num_features, bins, width), sums(num_features, width)
        grad_rest, grad_rest_bias = sums(layers - 1, num_features, width, width), sums(layers - 1, num_features, width)
        if documents:
            kernels.embedding_backward_kernel[(num_features, chunks)](
                transposed, lower, inverse, first_weight, first_bias, rest_weights, rest_biases,
                grad_output.reshape(documents, num_features * width).contiguous(), grad_first, grad_first_bias,
                grad_rest, grad_rest_bias, tiles_per_chunk=tiles_per_chunk, **shape)
        grads = [grad_first.sum(0), grad_first_bias.sum(0)]
        for weight, bias in zip(grad_rest.sum(0).unbind(0), grad_rest_bias.sum(0).unbind(0)):
            grads += [weight, bias]
        return None, None, None, None, None, *grads


def _stacked(parameters: tuple[torch.Tensor, ...], operands: torch.dtype,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The layers after the first as `[L - 1, F, W, W]` weights in the operands' dtype and `[L - 1, F, W]` float32
    biases (one placeholder element each for a one-layer embedding: a kernel argument must point somewhere)."""
    if not parameters:
        return torch.zeros(1, dtype=operands, device=device), torch.zeros(1, dtype=torch.float32, device=device)
    return (torch.stack(parameters[0::2]).to(operands).contiguous(),
            torch.stack(parameters[1::2]).float().contiguous())


def _kernels() -> ModuleType:
    """ranker.gpu.embedding_kernels, imported when first run: Triton comes with CUDA builds of torch only, and the
    rest of this module (FusedEmbedding, fusable) must import without it."""
    return importlib.import_module("ranker.gpu.embedding_kernels")


@functools.lru_cache(maxsize=None)
def _multiprocessors(device: torch.device) -> int:
    # Triton's interpreter runs on the CPU (the tests): any count sizes the chunks there.
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
