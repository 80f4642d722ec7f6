"""The ranking data as a LightningDataModule: whole queries, padded, held on the training device (or streamed from
binary shards when `--streaming true`), served as ready-made `(features, labels, mask)` batches.

Training batches follow ranker.data.batches' global order: fixed by (seed, epoch), split across ranks, and a pure function
of the optimizer step. Each time Lightning asks for an iterator (every epoch, and when `fit` resumes from a
checkpoint), it starts at the batch `trainer.global_step` points at, so a run resumed mid-epoch trains on exactly the
batches the interrupted run would have; the checkpoint needs no sampler state of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import lightning as L
import torch

from ranker.config import DataConfig, RunConfig
from ranker.data.batches import Batch, DeviceQueries, EpochBatches
from ranker.data.channels import RankingData
from ranker.data.sharded_channel import Agreement
from ranker.training import engine
from ranker.training.session import TrainingData, epoch_batches, evaluation_part


class StepAlignedBatches:
    """One rank's training batches as Lightning iterates them: each `iter()` starts at the batch of the optimizer step
    `steps_done()` returns (one batch per step), and runs to the end of that epoch."""

    def __init__(self, batches: EpochBatches, steps_done: Callable[[], int]):
        self.batches, self.steps_done = batches, steps_done

    def __iter__(self) -> Iterator[Batch]:
        epoch, position = divmod(self.steps_done(), self.batches.steps_per_epoch)
        return self.batches.epoch_batches(epoch, position)

    def __len__(self) -> int:
        return self.batches.steps_per_epoch


class EvaluationBatches:
    """One rank's contiguous slice of the queries in batches of `batch_queries` (default: the native loop's for their
    device, engine.evaluation_batch_queries): the ranks score disjoint queries and the module adds their totals up."""

    def __init__(self, queries: DeviceQueries, rank: int, world_size: int, batch_queries: int | None = None):
        self.queries, self.batch_queries = queries, batch_queries or engine.evaluation_batch_queries(queries)
        self.start = queries.num_queries * rank // world_size
        self.stop = queries.num_queries * (rank + 1) // world_size

    def __iter__(self) -> Iterator[Batch]:
        device = self.queries.features.device
        for first in range(self.start, self.stop, self.batch_queries):
            yield self.queries.gather(torch.arange(first, min(first + self.batch_queries, self.stop), device=device))

    def __len__(self) -> int:
        return -(-(self.stop - self.start) // self.batch_queries)


class RankingDataModule(L.LightningDataModule):
    """Train, validation and optional test queries, read before the module is built (the model's input width comes
    from them: `num_features`); `setup` puts them on the device Lightning trains on. On a sharded training channel
    (`shards`) the training queries, and without a validation channel the validation queries too
    (`validation_owned`), are this rank's own."""

    def __init__(self, train: RankingData, validation: RankingData, test: RankingData | None, *, batch_size: int,
                 seed: int = 0, data: DataConfig = DataConfig(), shards: Agreement | None = None,
                 validation_owned: bool = False):
        super().__init__()
        self.train_data, self.validation_data, self.test_data = train, validation, test
        self.batch_size, self.seed, self.data = batch_size, seed, data
        self.shards, self.validation_owned = shards, validation_owned
        self.device_splits: dict[str, DeviceQueries] = {}

    @classmethod
    def from_training_data(cls, training_data: TrainingData, config: RunConfig) -> RankingDataModule:
        """The splits the ranks agreed on (ranker.training.session.agree_on_splits), batched as `config` says."""
        return cls(training_data.train, training_data.validation, training_data.test,
                   batch_size=config.train.batch_size, seed=config.train.seed, data=config.data,
                   shards=training_data.shards, validation_owned=training_data.validation_owned)

    @property
    def num_features(self) -> int:
        return self.train_data.num_features

    @property
    def has_test(self) -> bool:
        return self.test_data is not None

    def setup(self, stage: str) -> None:
        if self.device_splits:  # Lightning calls setup for fit, validate and test alike: place the data once
            return
        device = self.trainer.strategy.root_device
        splits = {"validation": self.validation_data, "test": self.test_data}
        if not self.data.streaming:
            splits["train"] = self.train_data
        splits = {name: part for name, part in splits.items() if part is not None}
        for name in ("validation", "test"):
            # Lightning skips the evaluation loop on a rank without batches, and the others would then wait forever
            # in the all-reduce that adds the ranks' totals up. A rank's own validation queries are at least one.
            if name in splits and splits[name].num_queries < self._evaluation_part(name)[1]:
                raise ValueError(f"{name}: {splits[name].num_queries} queries for {self.trainer.world_size} "
                                 "processes; give every process at least one query (a larger split or fewer "
                                 "processes)")
        # One padded length for every split, as the native loop pads them.
        max_docs = max(part.max_docs for part in splits.values())
        self.device_splits = {name: DeviceQueries.from_data(part, device, max_docs) for name, part in splits.items()}

    def epoch_batches(self) -> EpochBatches:
        return epoch_batches(self.data, self.device_splits.get("train"), self.shards, batch_size=self.batch_size,
                             seed=self.seed, rank=self.trainer.global_rank, world_size=self.trainer.world_size,
                             device=self.trainer.strategy.root_device)

    def _evaluation_part(self, split: str) -> tuple[int, int]:
        return evaluation_part(split == "validation" and self.validation_owned, self.trainer.global_rank,
                               self.trainer.world_size)

    def train_dataloader(self) -> StepAlignedBatches:
        # One batch per optimizer step: the loop's step count is the position in the global batch order.
        return StepAlignedBatches(self.epoch_batches(), lambda: self.trainer.global_step)

    def val_dataloader(self) -> EvaluationBatches:
        return EvaluationBatches(self.device_splits["validation"], *self._evaluation_part("validation"))

    def test_dataloader(self) -> EvaluationBatches:
        if "test" not in self.device_splits:
            raise ValueError("test: no test channel was given; pass --test DIR or set SM_CHANNEL_TEST")
        return EvaluationBatches(self.device_splits["test"], *self._evaluation_part("test"))
