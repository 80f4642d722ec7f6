"""Batches of whole queries, gathered by index from tensors that already live on the device.

No DataLoader and no per-sample `__getitem__`: one permutation per epoch goes to the device, and each step is one
indexed gather. The order is global and deterministic by (seed, epoch): global batch `i` is the `i`-th run of
`batch_size * world_size` queries of that permutation, and rank `r` takes the `r`-th `batch_size` of it. So 2 ranks
with batch B see exactly the queries 1 rank with batch 2B sees, and a resumed run picks up at the same query.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

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
        features, labels, mask = data.padded(max_docs)
        return cls(torch.from_numpy(features).to(device), torch.from_numpy(labels).to(device),
                   torch.from_numpy(mask).to(device))

    @property
    def num_queries(self) -> int:
        return self.features.shape[0]

    def gather(self, query_indices: torch.Tensor) -> Batch:
        return self.features[query_indices], self.labels[query_indices], self.mask[query_indices]


AUTO_BATCH_MIN = 16
AUTO_BATCH_STEPS_PER_EPOCH = 250


def auto_batch_size(queries_per_process: int) -> int:
    """`--batch-size 0`: AUTO_BATCH_MIN queries, doubled while an epoch keeps at least AUTO_BATCH_STEPS_PER_EPOCH
    steps. On N processes each holds a 1/N share, so the global batch (and the recipe) stays that of one process.
    Its choices at the ranking benchmark's two sizes (16 and 32 queries) and what they rank: docs/benchmarks.md,
    ranking quality. A channel of fewer queries than AUTO_BATCH_MIN trains on all of them in each step."""
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


def epoch_permutation(num_queries: int, seed: int, epoch: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
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
