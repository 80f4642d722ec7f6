"""The Lightning loop: the same model, data, step and metrics as the native loop, driven by a Trainer."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from ranker import checkpoint, engine
from ranker.batches import Batch, EpochBatches
from ranker.losses import LOSSES
from ranker.meter import TrainingMeter
from ranker.progress import Progress
from ranker.session import Session, evaluation_metrics


class RankingModule(L.LightningModule):
    """Counts steps itself (`self.step`) so a run resumed from `ranker.checkpoint` continues the same schedule;
    the Trainer then only has `total_steps - self.step` left to run."""

    def __init__(self, session: Session, batches: EpochBatches, total_steps: int):
        super().__init__()
        self.session, self.batches, self.total_steps = session, batches, total_steps
        self.model = engine.build_model(session.model_config, torch.device("cpu"))
        self.loss_function = LOSSES[session.config.train.loss]
        self.step, self.epoch, self.position = 0, 0, 0
        self.resumed = checkpoint.restore_training_state(session.config.paths.checkpoint_dir, self.model,
                                                         session.topology.rank, session.topology.world_size)
        if self.resumed is not None:
            self.step, self.epoch, self.position = (self.resumed[key] for key in ("step", "epoch", "position"))
            session.history = self.resumed["history"]
            batches.resume_at(self.epoch, self.position)
        self.last_metrics: dict[str, float] = {}
        self.stop = checkpoint.StopSignal()
        self.progress = Progress(total_steps, session.topology.is_main, self.step)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = engine.build_optimizer(self.model, self.session.config.train, self.device)
        scheduler = engine.build_scheduler(optimizer, self.total_steps, self.session.config.train.warmup_fraction)
        if self.resumed is not None:
            optimizer.load_state_dict(self.resumed["optimizer"])
            scheduler.load_state_dict(self.resumed["scheduler"])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_train_start(self) -> None:
        self.meter = TrainingMeter(self.device)
        if self.resumed is not None:
            self.progress.note(f"resumed from {self.resumed['path']} at step {self.step}")
            if self.resumed["rng"] is not None:
                checkpoint.set_rng_state(self.resumed["rng"])

    def train_dataloader(self) -> QueryBatches:
        return self.batches

    def training_step(self, batch: Batch, batch_index: int) -> torch.Tensor:
        features, labels, mask = batch
        loss = self.loss_function(self.model(features), labels, mask)
        self.meter.add(loss.detach(), mask)
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Batch, batch_index: int) -> None:
        self.step, self.position = self.step + 1, self.position + 1
        if self.position == self.batches.steps_per_epoch:
            self.epoch, self.position = self.epoch + 1, 0
            self.batches.resume_at(self.epoch, 0)
        config = self.session.config.train
        stopping = False
        if self.step % config.log_every == 0 or self.step == self.total_steps:
            window, stopping = self.meter.read(self.stop.received)
            self.last_metrics = {"epoch": self.epoch, "step": self.step, **window,
                                 "learning_rate": self.lr_schedulers().get_last_lr()[0]}
            self.session.history.append(self.last_metrics)
            self.progress.report(self.last_metrics)
        if stopping or (config.checkpoint_every and self.step % config.checkpoint_every == 0):
            self.save_checkpoint()
        if stopping:
            self.progress.note(f"SIGTERM: checkpoint written at step {self.step}; rerun to resume")
            self.trainer.should_stop = True

    def save_checkpoint(self) -> None:
        checkpoint.save_training_state(
            self.session.config.paths.checkpoint_dir, self.session.topology.is_main, model=self.model,
            optimizer=self.optimizers().optimizer, scheduler=self.lr_schedulers(), step=self.step,
            epoch=self.epoch, position=self.position, history=self.session.history)

    def on_train_epoch_end(self) -> None:
        if self.step < self.total_steps:
            self.session.history.append({"epoch": self.epoch, "step": self.step, **self.evaluate("val")})
            self.progress.report(self.session.history[-1])

    def evaluate(self, split: str) -> dict[str, float]:
        queries = self.session.validation if split == "val" else self.session.test
        topology = self.session.topology
        return evaluation_metrics(engine.evaluate(self.model, queries, topology.rank, topology.world_size,
                                                  self.loss_function), split)
