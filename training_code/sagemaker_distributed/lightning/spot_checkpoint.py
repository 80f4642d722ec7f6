"""A Lightning checkpoint when SageMaker stops the job: for spot training, any LightningModule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from sagemaker_distributed import paths
from sagemaker_distributed.spot import StopSignal


class SpotInterruptionCheckpoint(Checkpoint):
    """On SIGTERM (SageMaker's notice before a spot interruption or a StopTrainingJob), every rank writes the
    checkpoint at one agreed step, to `path` (default `last.ckpt` in sagemaker_distributed.paths.checkpoint_dir(),
    the folder SageMaker syncs with S3: pass `ckpt_path="last"` or that file to `fit` to resume), and stops training
    with Lightning's `SIGTERMException` (the process exits 0, without a model).

    Lightning's own SIGTERM handling is taken over when training starts: in Lightning 2.6 each rank also stops at the
    end of the step in which it saw the signal, so ranks that see it a step apart meet different collectives and hang
    (about one run in five of a 2-rank SIGTERM test), and its handler broadcasts from inside the signal handler,
    wherever the step is. Here the handler only notes the signal, and the ranks agree every `check_every` steps with
    one all-reduce of that note; a process training alone acts on it after the step it arrived in."""

    def __init__(self, path: Path | None = None, check_every: int = 10):
        self.path = Path(path) if path is not None else paths.checkpoint_dir() / "last.ckpt"
        self.check_every = check_every
        self.stop: StopSignal | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.stop = StopSignal()  # in front of Lightning's handler, which Lightning puts back when fit ends

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.global_step % self.check_every and not self.stop.received_alone():
            return
        if self.stop.any_rank(pl_module.device):
            trainer.save_checkpoint(self.path)
            if trainer.is_global_zero:
                print(f"SIGTERM: checkpoint written at step {trainer.global_step}; rerun to resume", flush=True)
            raise SIGTERMException
