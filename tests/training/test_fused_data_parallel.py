"""FusedDataParallel (the GPU path's replacement for DDP) averages gradients across real processes: two gloo ranks,
each on its half of every batch, train exactly like one process on the whole batch. On CPU through the same fused
layers (bf16 arithmetic); benchmarks.gpu_checks runs it with NCCL inside a CUDA graph."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ranker import engine
from ranker.config import ModelConfig, TrainConfig
from ranker.fused_data_parallel import BUCKET_BYTES, FusedDataParallel, bucket_groups
from ranker.losses import LOSSES
from ranker.model import RankingMLP

WORLD_SIZE = 2
STEPS = 4
# LayerNorm's parameters take the ordinary autograd path: both kinds of parameter are covered
MODEL = ModelConfig(num_features=12, width=16, num_layers=4, norm="layer", dropout=0.0)


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[queries, documents, features] with one padded document slot per query; rank r trains on query half r."""
    generator = torch.Generator().manual_seed(step)
    features = torch.randn(4 * WORLD_SIZE, 6, MODEL.num_features, generator=generator)
    labels = torch.randint(0, 3, (4 * WORLD_SIZE, 6), generator=generator).float()
    mask = torch.ones(4 * WORLD_SIZE, 6, dtype=torch.bool)
    mask[:, -1] = False
    return features, labels, mask


def rank_half(batch: tuple[torch.Tensor, ...], rank: int) -> tuple[torch.Tensor, ...]:
    return tuple(tensor.chunk(WORLD_SIZE)[rank] for tensor in batch)


def train_rank(rank: int, store_path: str, results: str, bucket_bytes: int) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_path, WORLD_SIZE), rank=rank, world_size=WORLD_SIZE)
    torch.manual_seed(rank)  # different initial weights per rank: the wrapper must start all from rank 0's
    model = RankingMLP(MODEL)
    wrapped = FusedDataParallel(model, bucket_bytes)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first_gradients = None
    for step in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        features, labels, mask = rank_half(global_batch(step), rank)
        LOSSES["listwise"](wrapped(features), labels, mask).backward()
        if first_gradients is None:
            first_gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
        optimizer.step()
    torch.save({"gradients": first_gradients, "weights": model.state_dict()}, Path(results) / f"rank{rank}.pt")
    dist.destroy_process_group()


def train_one_process() -> dict:
    """The reference: rank 0's initial weights, each batch's two halves as two losses averaged, one backward."""
    torch.manual_seed(0)
    model = RankingMLP(MODEL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first_gradients = None
    for step in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        batch = global_batch(step)
        losses = [LOSSES["listwise"](model.fused_forward(features), labels, mask)
                  for features, labels, mask in (rank_half(batch, rank) for rank in range(WORLD_SIZE))]
        (sum(losses) / WORLD_SIZE).backward()
        if first_gradients is None:
            first_gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
        optimizer.step()
    return {"gradients": first_gradients, "weights": model.state_dict()}


@pytest.fixture(scope="module", params=[BUCKET_BYTES, 1], ids=["one bucket", "a bucket per layer"])
def two_ranks(request, tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("fused-dp")
    mp.spawn(train_rank, args=(str(folder / "store"), str(folder), request.param), nprocs=WORLD_SIZE, join=True)
    return [torch.load(folder / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]


def test_two_ranks_on_half_batches_train_like_one_process_on_the_whole_batch(two_ranks):
    # Given two ranks that started from different weights, each training on its half of every batch (the model's
    # four layers reduced in one bucket, or in four)
    reference = train_one_process()
    for rank, result in enumerate(two_ranks):
        # Then both ranks' gradients were the whole batch's (the layers' via their slots, LayerNorm's via autograd)
        for name, expected in reference["gradients"].items():
            torch.testing.assert_close(result["gradients"][name], expected, atol=1e-6, rtol=1e-5,
                                       msg=f"rank {rank}: gradient of {name}")
        # And after the optimizer steps, both hold the one-process weights
        for name, expected in reference["weights"].items():
            torch.testing.assert_close(result["weights"][name], expected, atol=1e-5, rtol=1e-4,
                                       msg=f"rank {rank}: weight {name}")


@pytest.mark.parametrize(
    ("device", "changes", "backend", "fused"),
    [("cuda", {}, "nccl", True), ("cuda", {"allreduce_dtype": "bf16"}, "nccl", False),
     ("cuda", {"precision": "fp32"}, "nccl", False), ("cuda", {}, "smddp", False), ("cpu", {}, "gloo", False)],
)
def test_the_fused_reduction_is_chosen_only_where_the_fused_bf16_layers_run_over_nccl(device, changes, backend,
                                                                                   fused):
    model = RankingMLP(MODEL)
    assert engine.uses_fused_data_parallel(model, torch.device(device), TrainConfig(**changes), backend) is fused
    # a compiled model (or an ablation's plain layers) keeps DDP
    model.fused = False
    assert not engine.uses_fused_data_parallel(model, torch.device(device), TrainConfig(**changes), backend)


def test_layers_are_grouped_into_buckets_of_at_least_the_cap_in_backward_order():
    # sizes in backward order: the small output layer joins the first big one; the last group may stay small
    assert bucket_groups([1, 10, 10, 10, 3], bucket_elements=10) == [[0, 1], [2], [3], [4]]
    assert bucket_groups([1, 4, 4, 4, 3], bucket_elements=10) == [[0, 1, 2, 3], [4]]
    assert bucket_groups([1, 4], bucket_elements=100) == [[0, 1]]
