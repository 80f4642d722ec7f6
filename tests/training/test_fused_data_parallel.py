"""FusedDataParallel (the GPU path's replacement for DDP) averages gradients across real processes: two or four gloo
ranks, each on its part of every batch, train exactly like one process on the whole batch, whether every rank runs the
whole AdamW update or each its shard (ShardedAdamW, whose state gathers back into AdamW's layout). On CPU through the
same fused layers (bf16 arithmetic); benchmarks.gpu.gpu_checks runs it with NCCL inside a CUDA graph."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ranker.config import ModelConfig
from ranker.gpu.fused_data_parallel import BUCKET_BYTES, FusedDataParallel, bucket_groups
from ranker.gpu.fused_linear import FusedLayers
from ranker.gpu.sharded_optimizer import ShardedAdamW
from ranker.model.losses import LOSSES
from ranker.model.mlp import RankingMLP
from torch import nn
from torch_threads import cpu_threads

QUERIES = 8  # per global batch: whole queries for each of 2 or 4 ranks
STEPS = 4
# LayerNorm's and the per-feature embedding's parameters take the ordinary autograd path: both kinds of parameter
# are covered
MODEL = ModelConfig(num_features=12, width=16, num_layers=4, norm="layer", dropout=0.0, embedding_width=8,
                    embedding_layers=2)
# CPU LayerNorm's backward on bf16 inputs sums rows per thread, so its rounding follows the thread count (gradients
# differ by a tenth between 1 and 2 threads): the ranks and the reference all compute on one.
THREADS = 1


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[queries, documents, features] with one padded document slot per query."""
    generator = torch.Generator().manual_seed(step)
    features = torch.randn(QUERIES, 6, MODEL.num_features, generator=generator)
    labels = torch.randint(0, 3, (QUERIES, 6), generator=generator).float()
    mask = torch.ones(QUERIES, 6, dtype=torch.bool)
    mask[:, -1] = False
    return features, labels, mask


def rank_part(batch: tuple[torch.Tensor, ...], rank: int, world_size: int) -> tuple[torch.Tensor, ...]:
    """The queries rank `rank` of `world_size` trains on."""
    return tuple(tensor.chunk(world_size)[rank] for tensor in batch)


def train(model: RankingMLP, forward, optimizer: torch.optim.Optimizer, rank: int | None, world_size: int,
          steps: range) -> dict:
    """Trains on `steps`' batches (rank r's part of each, or with rank None the whole batch as the parts' losses
    averaged, one backward); returns the first step's gradients (those autograd left) and the final weights."""
    first_gradients = None
    for step in steps:
        optimizer.zero_grad(set_to_none=True)
        batch = global_batch(step)
        parts = [rank_part(batch, part, world_size) for part in ([rank] if rank is not None else range(world_size))]
        (sum(LOSSES["listwise"](forward(features), labels, mask) for features, labels, mask in parts)
         / len(parts)).backward()
        if first_gradients is None:
            first_gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
    return {"gradients": first_gradients, "weights": {k: v.clone() for k, v in model.state_dict().items()}}


def parameters_outside_dense_layers() -> set[str]:
    """LayerNorm's and the per-feature embedding's."""
    model = RankingMLP(MODEL)
    dense = {f"{name}.{kind}" for name, module in model.named_modules() if isinstance(module, nn.Linear)
             for kind in ("weight", "bias")}
    return {name for name, _ in model.named_parameters()} - dense


def one_process(steps: range, world_size: int) -> tuple[dict, RankingMLP, torch.optim.AdamW]:
    """The reference: rank 0's initial weights, the whole batch each step, plain AdamW."""
    torch.manual_seed(0)
    model = RankingMLP(MODEL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with cpu_threads(THREADS):
        return train(model, FusedLayers(model), optimizer, None, world_size, steps), model, optimizer


def train_rank(rank: int, world_size: int, store_path: str, results: str, bucket_bytes: int, shard: bool) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world_size), rank=rank, world_size=world_size)
    torch.set_num_threads(THREADS)
    torch.manual_seed(rank)  # different initial weights per rank: the wrapper must start all from rank 0's
    model = RankingMLP(MODEL)
    wrapped = FusedDataParallel(model, bucket_bytes, shard_optimizer=shard)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    optimizer = ShardedAdamW(wrapped, optimizer) if wrapped.shard_optimizer else optimizer
    result = train(model, wrapped, optimizer, rank, world_size, range(STEPS))
    result["optimizer"] = optimizer.state_dict()  # a collective when sharded: every rank calls it
    result["sharded"] = wrapped.shard_optimizer
    if wrapped.shard_optimizer:
        # a plain optimizer never sees the sharded layers' gradients: the first backward pass says so
        unpaired = FusedDataParallel(RankingMLP(MODEL), bucket_bytes, shard_optimizer=True)
        features, labels, mask = rank_part(global_batch(0), rank, world_size)
        with pytest.raises(RuntimeError, match="build its optimizer as ShardedAdamW"):
            LOSSES["listwise"](unpaired(features), labels, mask).backward()
        # resume halfway from the reference's checkpoint, onto the two ranks' sharded optimizer
        _, halfway_model, halfway_optimizer = one_process(range(STEPS // 2), world_size)
        model = RankingMLP(MODEL)
        model.load_state_dict(halfway_model.state_dict())
        wrapped = FusedDataParallel(model, bucket_bytes, shard_optimizer=True)
        optimizer = ShardedAdamW(wrapped, torch.optim.AdamW(model.parameters(), lr=1e-2))
        with pytest.raises(ValueError, match="expected one group of 18 parameters"):  # another model's state
            optimizer.load_state_dict({"state": {}, "param_groups": [{"lr": 1.0, "params": [0, 1]}]})
        optimizer.load_state_dict(halfway_optimizer.state_dict())
        result["resumed weights"] = train(model, wrapped, optimizer, rank, world_size,
                                          range(STEPS // 2, STEPS))["weights"]
    torch.save(result, Path(results) / f"rank{rank}.pt")
    dist.destroy_process_group()


# Backward order, the layers hold 17, 272, 272 and 208 parameters: 300 float32s make buckets of three layers and one.
TWO_BUCKETS = 300 * 4


@dataclass(frozen=True)
class Setting:
    name: str
    world_size: int
    bucket_bytes: int
    shard: bool  # asked for
    sharded: bool  # expected


SETTINGS = [
    Setting("one bucket", 2, BUCKET_BYTES, False, False),
    Setting("a bucket per layer", 2, 1, False, False),
    Setting("two buckets, sharded update", 2, TWO_BUCKETS, True, True),
    Setting("a bucket per layer, sharded", 2, 1, True, True),
    Setting("four ranks, two buckets, sharded (padded shards across layer boundaries)", 4, TWO_BUCKETS, True, True),
    Setting("one bucket: sharding asked for, the update stays whole", 2, BUCKET_BYTES, True, False),
]


def train_settings(process: int, processes: int, folder: str, settings: list[Setting]) -> None:
    """For each world size w in turn, rank `process % w` of group `process // w`: the processes split into groups of w
    ranks, each group trains its share of the settings of that size, each setting in a process group of its own.
    Starting a process (importing torch and ranker, the fused layers' first call) costs more than a setting's
    training: the four processes the widest setting needs also train the two-rank settings, two groups at a time."""
    for world_size in sorted({setting.world_size for setting in settings}):
        group, rank = divmod(process, world_size)
        sized = [(index, setting) for index, setting in enumerate(settings) if setting.world_size == world_size]
        for index, setting in sized[group::processes // world_size]:
            results = Path(folder) / str(index)
            results.mkdir(exist_ok=True)
            train_rank(rank, world_size, str(results / "store"), str(results), setting.bucket_bytes, setting.shard)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, list[dict]]:
    """Every setting's ranks' results, by setting name: one spawn of as many processes as the widest setting has
    ranks (a multiple of every other setting's)."""
    folder = tmp_path_factory.mktemp("fused-dp")
    processes = max(setting.world_size for setting in SETTINGS)
    mp.spawn(train_settings, args=(processes, str(folder), SETTINGS), nprocs=processes, join=True)
    return {setting.name: [torch.load(folder / str(index) / f"rank{rank}.pt") for rank in range(setting.world_size)]
            for index, setting in enumerate(SETTINGS)}


@pytest.fixture(scope="module", params=SETTINGS, ids=[setting.name for setting in SETTINGS])
def ranks(request, trained) -> tuple[int, bool, list[dict]]:
    setting = request.param
    results = trained[setting.name]
    assert [result["sharded"] for result in results] == [setting.sharded] * setting.world_size
    return setting.world_size, setting.sharded, results


@pytest.mark.slow
def test_ranks_on_parts_of_each_batch_train_like_one_process_on_the_whole_batch(ranks):
    # Given two (or four) ranks that started from different weights, each training on its part of every batch (the
    # model's four layers reduced in one, two or four buckets; all-reduced, or reduce-scattered with each rank updating
    # its shard)
    world_size, shard, results = ranks
    reference, _, reference_optimizer = one_process(range(STEPS), world_size)
    for rank, result in enumerate(results):
        # Then the gradients autograd left were the whole batch's: every parameter's, or when sharded those outside
        # the dense layers only (each rank holds just its shard of the dense layers' averaged gradients)
        assert set(result["gradients"]) == (parameters_outside_dense_layers() if shard
                                            else set(reference["gradients"]))
        for name, gradient in result["gradients"].items():
            torch.testing.assert_close(gradient, reference["gradients"][name], atol=1e-6, rtol=1e-5,
                                       msg=f"rank {rank}: gradient of {name}")
        # And after the optimizer steps, every rank holds the one-process weights
        for name, expected in reference["weights"].items():
            torch.testing.assert_close(result["weights"][name], expected, atol=1e-5, rtol=1e-4,
                                       msg=f"rank {rank}: weight {name}")
        # And the optimizer's state is AdamW's, whole, on every rank (what a checkpoint stores)
        expected_state = reference_optimizer.state_dict()
        assert result["optimizer"]["param_groups"][0]["params"] == expected_state["param_groups"][0]["params"]
        for index, entry in expected_state["state"].items():
            for name, value in entry.items():
                torch.testing.assert_close(result["optimizer"]["state"][index][name], value, atol=1e-6, rtol=1e-4,
                                           msg=f"rank {rank}: optimizer state {name} of parameter {index}")
        # And a sharded run resumed from an unsharded checkpoint halfway ends where the one process did
        if shard:
            for name, expected in reference["weights"].items():
                torch.testing.assert_close(result["resumed weights"][name], expected, atol=1e-5, rtol=1e-4,
                                           msg=f"rank {rank}: resumed weight {name}")


def test_layers_are_grouped_into_buckets_of_at_least_the_cap_in_backward_order():
    # sizes in backward order: the small output layer joins the first big one; the last group may stay small
    assert bucket_groups([1, 10, 10, 10, 3], bucket_elements=10) == [[0, 1], [2], [3], [4]]
    assert bucket_groups([1, 4, 4, 4, 3], bucket_elements=10) == [[0, 1, 2, 3], [4]]
    assert bucket_groups([1, 4], bucket_elements=100) == [[0, 1]]
