"""SIGTERM, SageMaker's notice before a spot interruption, becomes a flag the loop reads at a step of its choosing."""

from __future__ import annotations

import os
import signal

import lightning as L
import pytest
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException
from sagemaker_distributed import StopSignal
from sagemaker_distributed.lightning import SpotInterruptionCheckpoint
from torch.utils.data import DataLoader, TensorDataset


def test_sigterm_is_noted_instead_of_ending_the_process():
    previous = signal.getsignal(signal.SIGTERM)
    try:
        stop = StopSignal()
        assert not stop.received and not stop.any_rank()
        # When SageMaker sends SIGTERM / Then the process lives on and the loop sees the note
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received and stop.any_rank()
    finally:
        signal.signal(signal.SIGTERM, previous)


class SignalledAtStep(L.LightningModule):
    """A tiny regression whose third training step brings SageMaker's SIGTERM."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        if self.trainer.global_step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.ones(64, 2)), batch_size=2)


def test_a_lightning_run_alone_checkpoints_after_the_step_the_sigterm_arrived_in(tmp_path):
    # Given a single-process Lightning run that checks with other ranks only every 10 steps
    callback = SpotInterruptionCheckpoint(tmp_path / "last.ckpt", check_every=10)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=30, callbacks=[callback], logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path)
    # When SIGTERM arrives during its third step
    with pytest.raises(SIGTERMException):
        trainer.fit(SignalledAtStep())
    # Then it stopped right after that step, with a checkpoint of it: no waiting for the 10th
    assert trainer.global_step == 3
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 3
