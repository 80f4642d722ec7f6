"""The ranking MLP as a LightningModule: the loss, AdamW with the learning-rate schedule of ranker.training.schedule
(stepped every batch, told every epoch's validation NDCG@10), and NDCG@k on the validation and test queries. The
Trainer does the rest (devices, DDP, bf16 autocast, checkpoints).

Its two configs are saved as hyperparameters, so `RankingModule.load_from_checkpoint(path)` rebuilds the model from a
`.ckpt` alone."""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn
from sagemaker_distributed.process_group import has_peers
from torch import nn
from torchmetrics import MeanMetric, MetricCollection

from ranker.config import ModelConfig, TrainConfig
from ranker.data.batches import Batch
from ranker.gpu.captured_step import CapturedLoss
from ranker.model.losses import LOSSES
from ranker.model.metrics import NDCG_CUTOFFS, ndcg_per_query
from ranker.training import engine
from ranker.training.checkpoint import refuse_other_shapes, shape_differences
from ranker.training.selection import SELECTION_METRIC


@dataclass(frozen=True)
class TrainingWrapper:
    """`RankingModule.model` as the training step runs it: through the fused kernels ranker.gpu.fast_paths allows
    (engine.with_fused_kernels), or inside FusedDataParallel (the fused layers, whose backward reduces the gradients).
    Held in this plain object, not as a child module, so that the module's `state_dict` (what ModelCheckpoint saves and
    `ckpt_path` restores) keeps the plain model's keys."""

    module: nn.Module


def config_from_dict(config_class: type, values: Mapping[str, Any]) -> Any:
    """`config_class` rebuilt from what `dataclasses.asdict` made of one (nested configs included): the configs as
    the module's checkpoints hold them."""
    types = typing.get_type_hints(config_class)
    return config_class(**{name: config_from_dict(types[name], value) if dataclasses.is_dataclass(types[name])
                           else value for name, value in values.items()})


def query_means(prefix: str, with_loss: bool) -> MetricCollection:
    """`{prefix}_ndcg@k` (and `{prefix}_loss`) as means over the queries of every rank. Each rank adds its sums and
    query counts; when Lightning computes the logged metrics at the end of the loop, torchmetrics gathers every rank's
    sums (all_gather, which every backend supports, smddp included: it has no ReduceOp.AVG) and adds them up, once."""
    names = [f"{prefix}_ndcg@{k}" for k in NDCG_CUTOFFS] + ([f"{prefix}_loss"] if with_loss else [])
    # nan_strategy="disable": no NaN check, which would read every batch's values back to the host. A single process
    # is in a group of one rank (sagemaker_distributed.init_process_group), which has nothing to gather: on a GPU,
    # NCCL would build a communicator for it.
    return MetricCollection({name: MeanMetric(nan_strategy="disable", distributed_available_fn=has_peers)
                             for name in names}, compute_groups=False)


class RankingModule(L.LightningModule):
    """Takes the two configs as dataclasses, or as the plain dictionaries its checkpoints hold them in."""

    def __init__(self, model_config: ModelConfig | Mapping[str, Any], train_config: TrainConfig | Mapping[str, Any]):
        super().__init__()
        if isinstance(model_config, Mapping):
            model_config = config_from_dict(ModelConfig, model_config)
        if isinstance(train_config, Mapping):
            train_config = config_from_dict(TrainConfig, train_config)
        self.model_config, self.train_config = model_config, train_config
        # As plain values: Lightning's load_from_checkpoint reads them with torch.load's weights_only loading (the
        # default from torch 2.6), which refuses arbitrary classes, and the loggers' hparams.yaml can write them.
        self.save_hyperparameters({"model_config": dataclasses.asdict(model_config),
                                   "train_config": dataclasses.asdict(train_config)})
        self.model = engine.build_model(model_config, torch.device("cpu"))
        self.loss_function = LOSSES[train_config.loss]
        self.training_wrapper: TrainingWrapper | None = None
        self.captured_loss: CapturedLoss | None = None
        """Where the training step replays its forward, loss and backward from CUDA graphs (`configure_model`)."""
        self.validation_metrics = query_means("val", with_loss=True)
        self.test_metrics = query_means("test", with_loss=False)
        self.evaluation_threads = contextlib.ExitStack()
        """Holds torch on one thread while a CPU scores validation or test batches (`on_validation_start`)."""
        # One query of one document: the model summary shows each layer's sizes and FLOPs per document.
        self.example_input_array = torch.zeros(1, 1, model_config.num_features)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A Trainer resuming from the checkpoint folder can meet another run's checkpoint there. load_from_checkpoint
        # builds this module from the checkpoint's own hyperparameters: the shapes match, and no Trainer is attached.
        if shape_differences(checkpoint["state_dict"], self):
            refuse_other_shapes(checkpoint["state_dict"], self, self.trainer.ckpt_path)

    def configure_model(self) -> None:
        """Lightning's hook for shaping the model before the strategy wraps it: the training step runs the fused
        kernels this device's path takes, as the native loop's does (the strategy may then put FusedDataParallel
        around the model instead, ranker.lightning.strategy), and in one process on a GPU replays its forward, loss
        and backward from CUDA graphs (`--cuda-graph`). Validation and test score the plain model, as the native
        loop's do."""
        if self.train_config.compile:  # Inductor fuses instead
            return
        if self._trainer is None:  # load_from_checkpoint builds the module to score, not to train
            return
        device = self.trainer.strategy.root_device
        path = engine.training_path(self.train_config, device, self.trainer.world_size)
        trained = engine.with_fused_kernels(self.model, path, self.train_config)
        if trained is not self.model:
            self.train_through(trained)
        # One process only: across processes the strategy's DDP or FusedDataParallel's update beside the backward pass
        # runs Python inside the backward, which a replay would skip.
        if path.cuda_graph and self.trainer.world_size == 1:
            self.captured_loss = engine.captured_loss(trained, self.loss_function, device, self.train_config)

    def train_through(self, wrapper: nn.Module) -> None:
        """Runs the training steps through `wrapper` (around `self.model`) and builds the optimizer for it; called
        before `configure_optimizers` (by `configure_model`, and by the strategy, ranker.lightning.strategy)."""
        self.training_wrapper = TrainingWrapper(wrapper)

    @property
    def trained(self) -> nn.Module:
        """What the training step runs: the wrapper, or this module (its forward) without one."""
        return self.training_wrapper.module if self.training_wrapper is not None else self

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.model(features)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        if self.captured_loss is not None:
            return self.captured_loss(batch)
        features, labels, mask = batch
        return self.loss_function(self.trained(features), labels, mask)

    def configure_optimizers(self) -> dict[str, Any]:
        # On the wrapper where there is one: ShardedAdamW where FusedDataParallel shards the update.
        optimizer = engine.build_optimizer(self.trained, self.train_config, self.device)
        scheduler = engine.build_scheduler(optimizer, self.trainer.estimated_stepping_batches, self.train_config)
        # The name is what LearningRateMonitor logs the rate as: the metric lines' name for it.
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step", "name": "learning_rate"}}

    def on_validation_start(self) -> None:
        # On a CPU the evaluation batches are small (engine.evaluation_batch_queries) and torch scores them on one
        # thread, as the native loop does: several times less CPU time than large batches split across the cores.
        if self.device.type == "cpu":
            self.evaluation_threads.enter_context(engine.one_torch_thread())

    on_test_start = on_validation_start

    def on_validation_end(self) -> None:
        self.evaluation_threads.close()
        # Each epoch's validation NDCG@10 (all ranks' queries, the same on every rank) drives the schedule's decay, as
        # in the native loop; Lightning's sanity check and the final validate() call are no epoch's validation.
        if self.trainer.sanity_checking or self.trainer.state.fn != TrainerFn.FITTING:
            return
        self.lr_schedulers().record_validation(float(self.trainer.callback_metrics[SELECTION_METRIC]))

    def on_test_end(self) -> None:
        self.evaluation_threads.close()

    # Validation and test score this rank's queries (ranker.lightning.datamodule.EvaluationBatches); the metric
    # objects are logged, so Lightning computes, logs and resets them at the end of the loop.

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self.log_dict(self.score(batch, self.validation_metrics, "val"))

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self.log_dict(self.score(batch, self.test_metrics, "test"))

    def score(self, batch: Batch, metrics: MetricCollection, prefix: str) -> MetricCollection:
        features, labels, mask = batch
        scores = self(features)
        for k in NDCG_CUTOFFS:
            metrics[f"{prefix}_ndcg@{k}"].update(ndcg_per_query(scores, labels, mask, k))
        if f"{prefix}_loss" in metrics:
            # The batch's mean loss once per query, rather than as `weight=`: torchmetrics 1.9 drops the weights
            # under nan_strategy="disable".
            metrics[f"{prefix}_loss"].update(self.loss_function(scores, labels, mask).expand(features.shape[0]))
        return metrics
