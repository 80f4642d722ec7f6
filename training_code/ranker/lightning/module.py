"""The ranking MLP as a LightningModule: the loss, AdamW with the warm-up/cosine schedule stepped every batch, and
NDCG@k on the validation and test queries. The Trainer does the rest (devices, DDP, bf16 autocast, checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch import nn

from ranker.config import ModelConfig, TrainConfig
from ranker.data.batches import Batch
from ranker.model.losses import LOSSES
from ranker.model.metrics import ndcg_sums
from ranker.training import engine
from ranker.training.checkpoint import refuse_other_shapes
from ranker.training.session import evaluation_metrics


@dataclass(frozen=True)
class TrainingWrapper:
    """A data-parallel wrapper around `RankingModule.model` with a forward of its own (FusedDataParallel: the fused
    layers, whose backward reduces the gradients). Held in this plain object, not as a child module, so that the
    module's `state_dict` (what ModelCheckpoint saves and `ckpt_path` restores) keeps the plain model's keys."""

    module: nn.Module


class RankingModule(L.LightningModule):
    def __init__(self, model_config: ModelConfig, train_config: TrainConfig):
        super().__init__()
        self.model_config, self.train_config = model_config, train_config
        self.model = engine.build_model(model_config, torch.device("cpu"))
        self.loss_function = LOSSES[train_config.loss]
        self.training_wrapper: TrainingWrapper | None = None

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        refuse_other_shapes(checkpoint["state_dict"], self, self.trainer.ckpt_path)

    def train_through(self, wrapper: nn.Module) -> None:
        """Runs the training steps through `wrapper` (around `self.model`) and builds the optimizer for it; the
        strategy calls this before `configure_optimizers` (ranker.lightning.strategy)."""
        self.training_wrapper = TrainingWrapper(wrapper)

    @property
    def trained(self) -> nn.Module:
        """What the training step runs: the wrapper, or this module (its forward) without one."""
        return self.training_wrapper.module if self.training_wrapper is not None else self

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.model(features)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        features, labels, mask = batch
        return self.loss_function(self.trained(features), labels, mask)

    def configure_optimizers(self) -> dict[str, Any]:
        # On the wrapper where there is one: ShardedAdamW where FusedDataParallel shards the update.
        optimizer = engine.build_optimizer(self.trained, self.train_config, self.device)
        scheduler = engine.build_scheduler(optimizer, self.trainer.estimated_stepping_batches,
                                           self.train_config.warmup_fraction)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # Validation and test add up NDCG@k and loss sums over this rank's queries (ranker.lightning.datamodule.EvaluationBatches)
    # on the device; one all-reduce SUM at the end of the loop turns them into means over all queries.

    def on_validation_epoch_start(self) -> None:
        self.evaluation_totals = torch.zeros(6, device=self.device)

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self.add_to_totals(batch)

    def on_validation_epoch_end(self) -> None:
        self.log_dict(self.reduce_totals("val"))

    def on_test_epoch_start(self) -> None:
        self.evaluation_totals = torch.zeros(6, device=self.device)

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self.add_to_totals(batch)

    def on_test_epoch_end(self) -> None:
        self.log_dict(self.reduce_totals("test"))

    def add_to_totals(self, batch: Batch) -> None:
        features, labels, mask = batch
        scores = self(features)
        self.evaluation_totals[:5] += ndcg_sums(scores, labels, mask)
        self.evaluation_totals[5] += self.loss_function(scores, labels, mask) * features.shape[0]

    def reduce_totals(self, prefix: str) -> dict[str, float]:
        totals = self.trainer.strategy.reduce(self.evaluation_totals, reduce_op="sum")
        return evaluation_metrics(totals, prefix)
