"""The Lightning trainer under the benchmark's timing protocol: train_lightning.py's Trainer and RankingModule on the
benchmark session's queries (benchmarks.gpu.project_trainers runs it beside the native trainer)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from benchmarks.harness.lightning_timing import OnEveryStep
from ranker.lightning.callbacks import MetricLines
from ranker.lightning.datamodule import RankingDataModule
from ranker.lightning.module import RankingModule
from ranker.training.session import Session
from train_lightning import build_trainer


class SessionQueries(RankingDataModule):
    """The benchmark session's queries, already on the device: Lightning is timed on the very tensors (so the same
    batches and weight trajectory) the native harness trains on."""

    def __init__(self, session: Session):
        super().__init__(None, None, None, batch_size=session.config.train.batch_size, seed=session.config.train.seed)
        self.session = session

    def setup(self, stage: str) -> None:
        self.device_splits = {"train": self.session.train, "validation": self.session.validation}


def run_lightning(session: Session, steps: int, on_step: Callable[[], None]) -> None:
    """`steps` optimizer steps of train_lightning's Trainer (its strategy and precision) and RankingModule, compiled
    when the session asks; no validation, checkpoints, loggers or progress bar inside the timed run."""
    config = dataclasses.replace(session.config, train=dataclasses.replace(session.config.train, max_steps=steps))
    # The metric-line callback adds each step's loss and documents on the device, as the native step does.
    callbacks = [MetricLines(config.train.log_every), OnEveryStep(on_step)]
    trainer = build_trainer(config, session.topology, callbacks, loggers=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            num_sanity_val_steps=0, limit_val_batches=0)
    module = RankingModule(session.model_config, config.train)
    trainer.fit(torch.compile(module) if config.train.compile else module, datamodule=SessionQueries(session))
