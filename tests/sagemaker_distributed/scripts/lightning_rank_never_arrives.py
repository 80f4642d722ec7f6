"""Fixture script: Lightning's stock BoringModel with the package's strategy, whose last rank never reaches its first
training step, while the others wait in the gradient all-reduce."""

import time

import lightning as L
import sagemaker_distributed
from lightning.pytorch.demos.boring_classes import BoringModel
from sagemaker_distributed.lightning import strategy


class LastRankNeverTrains(L.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_rank == trainer.world_size - 1:
            print(f"rank {trainer.global_rank}: stuck before its first step", flush=True)
            time.sleep(600)


with sagemaker_distributed.failure_reported():
    trainer = L.Trainer(strategy=strategy(), max_steps=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[LastRankNeverTrains()])
    trainer.fit(BoringModel())
