"""The Lightning loop: the same model, data, step and metrics as the native loop, driven by a Trainer.

The step is the engine's (`engine.step_function`: a CUDA-graph replay on GPU, eager elsewhere), run under Lightning's
manual optimization, with the model wrapped for data parallelism by the module rather than by the strategy
(train_lightning's `ModuleWrapsDDP`): a captured step has to own the backward pass, the optimizer step and the
gradient reduction it records (engine.wrap_for_training: FusedDataParallel or DDP, as in the native loop).
Lightning drives the loop, hooks, callbacks and the processes; the per-step work is identical to the native loop's.
"""

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


# Lightning's per-step SIGTERM broadcast (a private method; tests/training checks the pinned Lightning still has it).
PER_STEP_SIGTERM_CHECK = "_broadcast_sigterm_tensor"


class RankingModule(L.LightningModule):
    """Counts steps itself (`self.step`) so a run resumed from `ranker.checkpoint` continues the same schedule;
    the Trainer then only has `total_steps - self.step` left to run."""

    # Lightning sets `_current_fx_name` around each hook it calls, ~20 times a step, and the loop moves `step` and
    # `position`; nn.Module.__setattr__ looks for parameters, buffers and submodules first each time. Straight to the
    # instance dict, Lightning's loop costs 175 instead of 220 µs of CPU per step (a no-op step on the CI machine's
    # CPU); the whole GPU step at width 1024 is ~800 µs. These attributes are never tensors or modules.
    PLAIN_ATTRIBUTES = frozenset({"_current_fx_name", "step", "position"})

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.PLAIN_ATTRIBUTES:
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

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
        self.automatic_optimization = False  # the engine's step runs backward and the optimizer itself
        self.stop = checkpoint.StopSignal()
        self.stopped = False  # set on every rank once the ranks agreed to stop on a SIGTERM
        self.progress = Progress(total_steps, session.topology.is_main, self.step)

    def configure_optimizers(self) -> dict[str, Any]:
        # Lightning calls this once the model is on its device and the process group is up. The model is wrapped
        # here because the optimizer depends on the wrapper (split across ranks under FusedDataParallel's sharding).
        # Kept out of nn.Module's registry: the wrapper must stay out of this module's state_dict.
        config, topology = self.session.config.train, self.session.topology
        object.__setattr__(self, "trained",
                           engine.wrap_for_training(self.model, self.device, topology.world_size, config))
        optimizer = engine.build_optimizer(self.trained, config, self.device)
        scheduler = engine.build_scheduler(optimizer, self.total_steps, config.warmup_fraction)
        if self.resumed is not None:
            optimizer.load_state_dict(self.resumed["optimizer"])
            scheduler.load_state_dict(self.resumed["scheduler"])
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_train_start(self) -> None:
        self.take_over_sigterm()
        self.meter = TrainingMeter(self.device)
        self.step_function = engine.step_function(self.trained, self.optimizers().optimizer, self.lr_schedulers(),
                                                  self.loss_function, self.device, self.session.config.train,
                                                  self.meter)
        if self.resumed is not None:
            self.progress.note(f"resumed from {self.resumed['path']} at step {self.step}")
            if self.resumed["rng"] is not None:
                checkpoint.set_rng_state(self.resumed["rng"])

    def on_train_end(self) -> None:
        # A captured step holds NCCL work inside its CUDA graph: it must be gone before the process group is
        # destroyed, or that destruction waits forever (the native loop's step dies with its function's scope).
        self.step_function = None

    def train_dataloader(self) -> EpochBatches:
        return self.batches

    def training_step(self, batch: Batch, batch_index: int) -> None:
        self.step_function(batch)

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
                                 "learning_rate": engine.learning_rate(self.lr_schedulers())}
            self.session.history.append(self.last_metrics)
            self.progress.report(self.last_metrics)
        if stopping or (config.checkpoint_every and self.step % config.checkpoint_every == 0):
            self.save_checkpoint()
        if stopping:
            self.progress.note(f"SIGTERM: checkpoint written at step {self.step}; rerun to resume")
            self.stopped = self.trainer.should_stop = True
        if self.step == self.total_steps:  # the engine steps the raw optimizer, so Lightning's step count stays at 0
            self.trainer.should_stop = True

    def take_over_sigterm(self) -> None:
        """SIGTERM is handled as in the native loop: StopSignal notes it and the ranks agree on it inside the
        meter's all-reduce at the next log step. Lightning 2.6 handles it too, at a price: on several processes its
        loop broadcasts a flag and reads it back on the host before every step (Lightning-AI/pytorch-lightning#21487),
        which drains the GPU's queue each step, and its handler broadcasts from inside the signal handler, at
        whatever point of the step the signal lands. Lightning installs its handler when `fit` starts, so ours is
        put back in front here and the loop's per-step check, which could then only ever read 0, is switched off."""
        self.stop.install()
        epoch_loop = self.trainer.fit_loop.epoch_loop
        if self.trainer.world_size > 1 and hasattr(epoch_loop, PER_STEP_SIGTERM_CHECK):
            setattr(epoch_loop, PER_STEP_SIGTERM_CHECK, lambda: None)

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
