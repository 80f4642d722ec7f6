"""Batches of whole queries, gathered by index from tensors that already live on the device.

No DataLoader and no per-sample `__getitem__`: one permutation per epoch goes to the device, and each step is one
indexed gather. Where every rank holds every training query (`QueryBatches`), the order is global and deterministic
by (seed, epoch): global batch `i` is the `i`-th run of `batch_size * world_size` queries of that permutation, and
rank `r` takes the `r`-th `batch_size` of it. So 2 ranks with batch B see exactly the queries 1 rank with batch 2B
sees, and a resumed run picks up at the same query. Where each rank holds queries of its own (a sharded channel:
`OwnQueryBatches`), each orders its own by (seed, epoch, rank).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ranker.data.channels import RankingData

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class DeviceQueries:
    """Padded queries on a device: features `[queries, max_docs, features]`, labels and mask `[queries, max_docs]`."""

    features: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor

    @classmethod
    def from_data(cls, data: RankingData, device: torch.device, max_docs: int | None = None) -> DeviceQueries:
        """`data` padded to `max_docs` documents a query (default: its longest query's), as `RankingData.padded`
        lays it out, but padded on `device`: the documents alone go there and each is copied into its slot in one
        indexed copy. On a GPU the host neither builds nor sends the padding (at MSLR-like query sizes as many bytes
        as the documents); on a CPU the copy runs on every thread, where numpy's masked assignment runs on one
        (docs/benchmarks.md, fixed cost)."""
        max_docs = max_docs or data.max_docs
        sizes = torch.from_numpy(np.diff(data.query_offsets)).to(device)
        starts = torch.from_numpy(data.query_offsets[:-1]).to(device)
        # Document d of query q goes to row q * max_docs + (d - the query's first document) of the padded rows.
        slots = (torch.arange(len(data.labels), device=device)
                 + torch.repeat_interleave(torch.arange(len(sizes), device=device) * max_docs - starts, sizes))
        padded_rows = len(sizes) * max_docs
        features = torch.zeros(padded_rows, data.num_features, device=device).index_copy_(
            0, slots, _documents(data.features).to(device, torch.float32))
        labels = torch.zeros(padded_rows, device=device).index_copy_(
            0, slots, _documents(data.labels).to(device, torch.float32))
        mask = torch.arange(max_docs, device=device) < sizes[:, None]
        return cls(features.view(len(sizes), max_docs, data.num_features), labels.view(len(sizes), max_docs), mask)

    @property
    def num_queries(self) -> int:
        return self.features.shape[0]

    def gather(self, query_indices: torch.Tensor) -> Batch:
        return self.features[query_indices], self.labels[query_indices], self.mask[query_indices]


def _documents(rows: np.ndarray) -> torch.Tensor:
    """A tensor over `rows` (only read: a read-only map of binary shards is copied first, as torch asks)."""
    return torch.from_numpy(rows if rows.flags.writeable else np.array(rows))


AUTO_BATCH_MIN = 16
AUTO_BATCH_STEPS_PER_EPOCH = 60


def auto_batch_size(queries_per_process: int) -> int:
    """`--batch-size 0`: AUTO_BATCH_MIN queries, doubled while an epoch keeps at least AUTO_BATCH_STEPS_PER_EPOCH
    steps. On N processes each holds a 1/N share, so the global batch (and the recipe) stays that of one process.
    Its choices at the ranking benchmark's two sizes (16 queries at 800 training queries, 128 at 8,000) and what they
    rank and cost: docs/benchmarks.md, ranking quality (at 8,000 training queries on a GPU, 128 queries a step
    reached its model in 0.71x the time of 32 for 0.001 less test NDCG@10). A channel of fewer queries than
    AUTO_BATCH_MIN trains on all of them in each step."""
    batch = AUTO_BATCH_MIN
    while queries_per_process // (2 * batch) >= AUTO_BATCH_STEPS_PER_EPOCH:
        batch *= 2
    return max(1, min(batch, queries_per_process))


def resolved_batch_size(requested: int, queries_per_process: int, rank: int) -> int:
    """`requested`, or auto_batch_size's choice for 0, which rank 0 prints."""
    if requested:
        return requested
    chosen = auto_batch_size(queries_per_process)
    if rank == 0:
        print(f"batch size: {chosen} queries per step per process (--batch-size 0: chosen for "
              f"{queries_per_process:,} training queries per process)", flush=True)
    return chosen


def epoch_permutation(num_queries: int, seed: int, epoch: int, rank: int = 0) -> torch.Tensor:
    """The order of an epoch's queries, fixed by (seed, epoch) and, for queries one rank holds alone, its rank."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch + rank * 1_000_000_007)
    return torch.randperm(num_queries, generator=generator)


class EpochBatches:
    """One rank's batches, epoch by epoch, each epoch from any step on (the sampler position a checkpoint stores).
    Subclasses provide `steps_per_epoch` and `epoch_batches`."""

    steps_per_epoch: int

    def epoch_batches(self, epoch: int, start_step: int = 0) -> Iterator[Batch]:
        raise NotImplementedError


class QueryBatches(EpochBatches):
    """Batches gathered from queries resident on the device."""

    def __init__(self, queries: DeviceQueries, batch_size: int, rank: int = 0, world_size: int = 1, seed: int = 0):
        batch_size = resolved_batch_size(batch_size, queries.num_queries // world_size, rank)
        self.queries, self.batch_size, self.seed = queries, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.steps_per_epoch = queries.num_queries // (batch_size * world_size)
        if self.steps_per_epoch == 0:
            raise ValueError(f"batch_size: {batch_size} queries x {world_size} processes exceeds the "
                             f"{queries.num_queries} training queries; lower --batch-size")

    def rank_indices(self, epoch: int) -> torch.Tensor:
        """`[steps_per_epoch, batch_size]` query indices of this rank, on the device: one copy per epoch."""
        global_batch = self.batch_size * self.world_size
        order = epoch_permutation(self.queries.num_queries, self.seed, epoch)[: self.steps_per_epoch * global_batch]
        per_step = order.view(self.steps_per_epoch, self.world_size, self.batch_size)[:, self.rank]
        return per_step.to(self.queries.features.device, non_blocking=True)

    def epoch_batches(self, epoch: int, start_step: int = 0) -> Iterator[Batch]:
        indices = self.rank_indices(epoch)
        for step in range(start_step, self.steps_per_epoch):
            yield self.queries.gather(indices[step])


class OwnQueryBatches(EpochBatches):
    """Batches of queries this rank alone holds: its part of a training channel sharded across the hosts.

    The ranks agreed on `batch_size` and on `steps_per_epoch`, enough for the largest part
    (ranker.data.sharded_channel). Each epoch deals this rank's queries, in an order fixed by (seed, epoch, rank),
    into that many batches of near-equal size, so every rank takes the same steps and trains each of its queries
    exactly once an epoch, however the parts' sizes differ. Every batch has `batch_size` query slots (one shape for
    every step and rank, as a captured CUDA graph needs); the slots a smaller batch leaves over are masked out: no
    document, so no loss and no gradient."""

    def __init__(self, queries: DeviceQueries, batch_size: int, steps_per_epoch: int, rank: int = 0, seed: int = 0):
        if not 0 < queries.num_queries <= batch_size * steps_per_epoch:
            raise ValueError(f"rank {rank}: {queries.num_queries} training queries do not fit {steps_per_epoch} "
                             f"steps of {batch_size}; the ranks must agree on both from every rank's count")
        self.queries, self.batch_size, self.steps_per_epoch = queries, batch_size, steps_per_epoch
        self.rank, self.seed = rank, seed

    def rank_indices(self, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`[steps_per_epoch, batch_size]` query indices of this rank and whether each slot holds a query, on the
        device: one copy per epoch."""
        count, steps = self.queries.num_queries, self.steps_per_epoch
        sizes = torch.full((steps,), count // steps)
        sizes[: count % steps] += 1
        step_of = torch.repeat_interleave(torch.arange(steps), sizes)
        slot = torch.arange(count) - torch.repeat_interleave(torch.cumsum(sizes, 0) - sizes, sizes)
        indices = torch.zeros(steps, self.batch_size, dtype=torch.long)
        filled = torch.zeros(steps, self.batch_size, dtype=torch.bool)
        indices[step_of, slot] = epoch_permutation(count, self.seed, epoch, self.rank)
        filled[step_of, slot] = True
        device = self.queries.features.device
        return indices.to(device, non_blocking=True), filled.to(device, non_blocking=True)

    def epoch_batches(self, epoch: int, start_step: int = 0) -> Iterator[Batch]:
        indices, filled = self.rank_indices(epoch)
        for step in range(start_step, self.steps_per_epoch):
            features, labels, mask = self.queries.gather(indices[step])
            yield features, labels, mask & filled[step, :, None]
