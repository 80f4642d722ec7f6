"""The fused per-feature embedding (ranker.gpu.fused_embedding) computes what the PyTorch modules compute.

Its Triton kernels run here in Triton's interpreter on the CPU (tests/conftest.py switches it on), in float32 (their `--precision fp32` arithmetic, IEEE
products), against the modules in float32: outputs and every parameter's gradient agree to float32 round-off, across
the shapes the kernels pad and mask (bins and widths below 16 and not powers of two, a one-layer embedding, document
counts that are no multiple of a tile, backward chunks of several tiles, a feature whose bins have zero width, values
outside the fitted edges). The bf16 kernels use the same code with bf16 operands; benchmarks.gpu.gpu_checks compares
them with autocast's modules on a GPU.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
import triton
from ranker.config import ModelConfig
from ranker.gpu import fused_embedding
from ranker.gpu.fused_embedding import FusedEmbedding, fusable, fused_feature_embedding
from ranker.gpu.fused_linear import FusedLayers
from ranker.model.mlp import RankingMLP
from ranker.training import engine


@pytest.fixture
def interpreted_kernels():
    """The kernels as Triton's interpreter runs them (a compiled kernel could not run on this CPU at all)."""
    kernels = importlib.import_module("ranker.gpu.embedding_kernels")
    assert isinstance(kernels.embedding_forward_kernel, triton.runtime.interpreter.InterpretedFunction)
    return kernels


def fitted_model(num_features: int, bins: int, width: int, layers: int, seed: int = 0) -> RankingMLP:
    """A ranker with the embedding under test, its encoding fitted on heavy-tailed rows whose first feature is a
    flag (two distinct values: most of its bins have zero width)."""
    torch.manual_seed(seed)
    model = RankingMLP(ModelConfig(num_features=num_features, bins=bins, embedding_width=width,
                                   embedding_layers=layers, width=16, num_layers=3, dropout=0.0))
    rows = np.random.default_rng(seed).lognormal(size=(4000, num_features)).astype(np.float32)
    rows[:, 0] = rows[:, 0] > 1
    model.encoding.fit(rows)
    for name, parameter in model.embedding.named_parameters():
        if name.endswith("bias"):  # zero at initialisation: give the biases' gradients something to check
            torch.nn.init.normal_(parameter, std=0.5)
    return model


def documents(*leading: int, num_features: int, seed: int = 1) -> torch.Tensor:
    """Raw features, some below every fitted edge (negative) and some far above the last."""
    values = np.random.default_rng(seed).lognormal(sigma=1.5, size=(*leading, num_features)) - 0.3
    return torch.from_numpy(values.astype(np.float32))


@pytest.mark.parametrize(("num_features", "bins", "width", "layers", "leading"), [
    (5, 8, 12, 3, (3, 37)),        # bins and width padded to 16; 111 documents: two tiles, the second part-filled
    (3, 32, 16, 1, (2, 150)),      # a one-layer embedding (no stacked layers), five tiles
    (2, 5, 4, 4, (1, 700)),        # odd bins, narrow units; eleven tiles in chunks of several tiles each
])
def test_the_fused_kernels_compute_the_embedding_and_its_gradients_exactly_as_the_modules_do(
        interpreted_kernels, num_features, bins, width, layers, leading):
    # Given a fitted model and a batch of documents, run through the modules and through the fused kernels in float32
    model = fitted_model(num_features, bins, width, layers)
    features = documents(*leading, num_features=num_features)
    reference = model.inputs(features)
    fused = fused_feature_embedding(features, model.encoding, model.embedding, precision="fp32")
    # Then the outputs agree to float32 round-off, in the modules' shape
    assert fused.shape == reference.shape == (*leading, num_features * width) and fused.dtype == torch.float32
    torch.testing.assert_close(fused, reference, rtol=1e-5, atol=1e-5)
    # And so does every embedding parameter's gradient for the same upstream gradient
    upstream = torch.randn_like(reference)
    expected = torch.autograd.grad(reference, list(model.embedding.parameters()), upstream)
    actual = torch.autograd.grad(fused, list(model.embedding.parameters()), upstream)
    for (name, _), want, got in zip(model.embedding.named_parameters(), expected, actual):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=lambda text, name=name: f"{name}: {text}")


def test_the_backward_pass_sums_every_chunk_of_tiles_whatever_the_chunking(interpreted_kernels, monkeypatch):
    # Given one batch whose gradients are computed with the tiles split into many chunks and into one chunk
    model = fitted_model(num_features=2, bins=8, width=8, layers=2)
    features = documents(640, num_features=2)
    upstream = torch.randn(640, 16)

    def gradients() -> list[torch.Tensor]:
        fused = fused_feature_embedding(features, model.encoding, model.embedding, precision="fp32")
        return list(torch.autograd.grad(fused, list(model.embedding.parameters()), upstream))

    monkeypatch.setattr(fused_embedding, "PROGRAMS_PER_MULTIPROCESSOR", 1)  # 8 x 1 programs / 2 features: 4 chunks
    several = gradients()
    monkeypatch.setattr(fused_embedding, "PROGRAMS_PER_MULTIPROCESSOR", 64)  # one tile per chunk: 10 chunks
    single = gradients()
    # Then the sums agree: no tile is dropped or counted twice at a chunk's edge
    for first, second in zip(several, single):
        torch.testing.assert_close(first, second, rtol=1e-5, atol=1e-6)


def test_the_wrapped_model_scores_and_trains_the_plain_models_parameters(interpreted_kernels):
    # Given the model wrapped as the training path wraps it: fused embedding, then the fused dense layers
    model = fitted_model(num_features=4, bins=16, width=16, layers=2)
    wrapped = FusedLayers(FusedEmbedding(model, precision="fp32"))
    assert engine.unwrap(wrapped) is model
    assert dict(wrapped.named_parameters()) == {f"module.module.{name}": p for name, p in model.named_parameters()}
    features = documents(2, 30, num_features=4)
    # Then it scores like the plain model (the dense layers in bf16: a bf16 rounding apart)
    torch.testing.assert_close(wrapped(features).float(), model(features), atol=0.05, rtol=0.02)
    # And its backward pass gives every embedding parameter a gradient close to the plain model's
    wrapped(features).float().sum().backward()
    fused_grads = {name: p.grad.clone() for name, p in model.embedding.named_parameters()}
    model.zero_grad()
    model(features).sum().backward()
    for name, parameter in model.embedding.named_parameters():
        scale = parameter.grad.abs().max()
        assert (fused_grads[name] - parameter.grad).abs().max() <= 0.05 * scale, name


def test_an_empty_batch_embeds_to_nothing_and_only_models_with_an_embedding_are_fused(interpreted_kernels):
    model = fitted_model(num_features=3, bins=8, width=8, layers=2)
    empty = fused_feature_embedding(torch.zeros(0, 3), model.encoding, model.embedding, precision="fp32")
    assert empty.shape == (0, 24)
    without = RankingMLP(ModelConfig(num_features=3, bins=8, embedding_width=0))
    assert fusable(model) and not fusable(without)
    with pytest.raises(ValueError, match="FusedEmbedding: the model needs encoding='piecewise' and embedding_width > 0"):
        FusedEmbedding(without)
    with pytest.raises(ValueError, match="precision: bad value 'fp16': use bf16 or fp32"):
        fused_feature_embedding(torch.zeros(1, 3), model.encoding, model.embedding, precision="fp16")
