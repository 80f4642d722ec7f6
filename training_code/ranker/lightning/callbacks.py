"""What a SageMaker job needs from a Lightning run beyond Lightning's own callbacks: the metric lines the training
job's `MetricDefinitions` read, a checkpoint when SageMaker stops the job, each rank's random state in every
checkpoint so that a resumed run draws the same dropout masks as an uninterrupted one, and the model's size in one
line."""

from __future__ import annotations

import sys
from typing import Any

import lightning as L
import sagemaker_distributed as distributed
from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.model_summary import get_human_readable_count

from ranker.data.batches import Batch
from ranker.log_format import format_metrics
from ranker.training.checkpoint import rng_state, set_rng_state
from ranker.training import timeline
from ranker.training.meter import TrainingMeter


class MetricLines(L.Callback):
    """Every `log_every` steps, one `name=value` line (ranker.log_format) on rank 0 with the mean training loss over
    those steps on all ranks, documents per second (both also sent to the loggers; LearningRateMonitor sends the
    learning rate) and the learning rate; at the end of each epoch, the validation metrics the module logged. Each
    line's `epoch` counts the epochs completed, as train_ddp.py's lines do. `history` keeps every line for the plots,
    and travels in checkpoints."""

    def __init__(self, log_every: int):
        self.log_every = log_every
        self.history: list[dict[str, float]] = []
        self.last_train_loss = float("nan")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # The loss and document sums stay on the device until a line is due: no host sync on the other steps.
        self.meter = TrainingMeter(pl_module.device)
        self.total_steps = trainer.estimated_stepping_batches
        self.first_step = trainer.global_step + 1
        """The first step this process runs (after a resumed one's checkpoint)."""
        if trainer.ckpt_path:
            self.report(trainer, pl_module, f"resumed from {trainer.ckpt_path} at step {trainer.global_step}")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Batch,
                           batch_idx: int) -> None:
        self.meter.add(outputs["loss"], batch[2])
        self.meter.steps += 1
        if trainer.global_step == self.first_step:
            timeline.mark("first step", trainer.is_global_zero)
        if trainer.global_step % self.log_every and trainer.global_step < self.total_steps:
            return
        window, _ = self.meter.read(stop_requested=False)
        learning_rate = trainer.optimizers[0].param_groups[0]["lr"]
        pl_module.log_dict(window, prog_bar=True)
        self.last_train_loss = window["train_loss"]
        self.add_line(trainer, pl_module, {**window, "learning_rate": learning_rate})

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # The exported weights' validation after `fit` is the entry point's final line, not an epoch's.
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        self.add_line(trainer, pl_module, {name: float(value) for name, value in trainer.callback_metrics.items()
                                           if name.startswith("val_")})

    def completed_epochs(self, trainer: L.Trainer) -> int:
        """Epochs done after the current step, which train_ddp.py reports as `epoch` (Lightning's `current_epoch` is
        the one running, and counts from 0): the end-of-epoch validation of the first epoch says `epoch=1`."""
        return trainer.global_step // trainer.num_training_batches

    def add_line(self, trainer: L.Trainer, pl_module: L.LightningModule, metrics: dict[str, float]) -> None:
        line = {"epoch": self.completed_epochs(trainer), "step": trainer.global_step, **metrics}
        if trainer.is_global_zero:
            self.history.append(line)
        self.report(trainer, pl_module, format_metrics(line))

    @staticmethod
    def report(trainer: L.Trainer, pl_module: L.LightningModule, text: str) -> None:
        """Rank 0 prints `text` above the progress bar when one is shown, and flushes: CloudWatch (and SageMaker's
        metric regexes) read the line when it is written."""
        if trainer.is_global_zero:
            pl_module.print(text)
            sys.stdout.flush()

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history, "last_train_loss": self.last_train_loss}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history, self.last_train_loss = state_dict["history"], state_dict["last_train_loss"]


class ModelSizeLine(ModelSummary):
    """Lightning's model summary as one line on rank 0, e.g. `model: 1.4 M parameters (5.7 MB), 2.8 M FLOPs per
    document`: the sizes a user compares between settings (`--width`, `--num-layers`), without the per-layer table
    (17 lines in every run, the same in each trial of a tuning job). FLOPs are counted for one document (the module's
    `example_input_array`)."""

    @staticmethod
    def summarize(summary_data: list[tuple[str, list[str]]], total_parameters: int, trainable_parameters: int,
                  model_size: float, total_training_modes: dict[str, int], total_flops: int,
                  **summarize_kwargs: Any) -> None:
        print(f"model: {get_human_readable_count(total_parameters)} parameters ({model_size:.1f} MB), "
              f"{get_human_readable_count(total_flops)} FLOPs per document", flush=True)


class RandomStatePerRank(L.Callback):
    """Adds every rank's random states (Python's, numpy's, torch's CPU and GPU generators, which dropout draws from:
    what the native trainer's checkpoints hold, ranker.training.checkpoint.rng_state) to each checkpoint and restores this rank's
    on resume. Lightning's checkpoints hold no random state; the batch order needs none (it comes from its own seeded
    generator, ranker.data.batches)."""

    STATE_KEY = "random_state_per_rank"

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # Lightning builds the checkpoint on every rank and rank 0 writes it: gathering here is collective-safe.
        checkpoint[self.STATE_KEY] = distributed.all_gather_objects(rng_state())

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get(self.STATE_KEY, [])
        # Another world size draws different per-rank streams anyway: keep this run's fresh seeds then.
        if len(states) == trainer.world_size:
            set_rng_state(states[trainer.global_rank])

