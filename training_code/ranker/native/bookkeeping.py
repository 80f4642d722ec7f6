"""The native loop's bookkeeping, in one place: where a run starts (fresh, or from the newest checkpoint), its
counters (step, epoch, position in the epoch), the metric lines, checkpoints (every `checkpoint_every` steps, and on
SIGTERM before stopping), validation after each epoch with model selection (ranker.training.selection) and optional
early stopping, and at the end the final metrics and artifacts of the best weights. train_ddp.py's
loop only runs the steps and asks this after each one what comes next.
"""

from __future__ import annotations

from typing import Any

from sagemaker_distributed.spot import StopSignal

from ranker.model.losses import LOSSES
from ranker.native.progress import Progress
from ranker.training import checkpoint, timeline
from ranker.training.engine import TrainingParts, learning_rate
from ranker.training.meter import TrainingMeter
from ranker.training.selection import (SELECTION_METRIC, BestWeights, early_stopping_note, exported_metrics_line,
                                      exported_weights_note)
from ranker.training.session import Session, evaluate_split, final_metrics, finish_session


class Bookkeeping:
    """Takes `resumed` (checkpoint.restore_training_state's rest, or None for a fresh run) onto `parts`, then keeps
    the books of the loop over `total_steps` steps of `steps_per_epoch` each; a tracked job's MLflow run (the
    session's, on rank 0) gets every metric line and the final metrics."""

    def __init__(self, session: Session, parts: TrainingParts, steps_per_epoch: int, total_steps: int,
                 resumed: dict[str, Any] | None):
        self.session, self.parts, self.run = session, parts, session.run
        self.steps_per_epoch, self.total_steps = steps_per_epoch, total_steps
        self.config = session.config.train
        self.loss_function = LOSSES[self.config.loss]
        self.step, self.epoch, self.position = 0, 0, 0
        self.best = BestWeights()
        if resumed is not None:
            parts.optimizer.load_state_dict(resumed["optimizer"])
            parts.scheduler.load_state_dict(resumed["scheduler"])
            self.step, self.epoch, self.position = resumed["step"], resumed["epoch"], resumed["position"]
            session.history = resumed["history"]
            if resumed.get("best") is not None:
                self.best.load_state_dict(resumed["best"], session.device)
            if resumed["rng"] is not None:
                checkpoint.set_rng_state(resumed["rng"])
        self.first_step = self.step + 1
        """The first step this process runs (after a resumed one's checkpoint)."""
        self.progress = Progress(total_steps, session.topology.is_main, self.step)
        if resumed is not None:
            self.progress.note(f"resumed from {resumed['path']} at step {self.step}")
        self.stop = StopSignal()
        self.meter = TrainingMeter(session.device)
        """What the step adds its loss and documents to (engine.step_function)."""
        self.stopped = False
        """Stopped by SIGTERM: the run resumes later, so no artifacts yet."""
        self.stopped_early = self.best.patience_spent(self.config.early_stopping)
        """Out of patience, or resumed from the checkpoint written by the validation that ran out of it."""
        self.last_metrics: dict[str, float] = {}

    @property
    def running(self) -> bool:
        return self.step < self.total_steps and not (self.stopped or self.stopped_early)

    def step_done(self) -> bool:
        """After each step: counts it, writes the metric line and checkpoint that are due, stops on SIGTERM, validates
        at the end of an epoch (keeping the best weights, stopping early where due). False when the loop must leave the
        epoch's batches: training ended, or stopped."""
        self.step, self.position = self.step + 1, self.position + 1
        if self.step == self.first_step:
            timeline.mark("first step", self.session.topology.is_main)
        if self.position == self.steps_per_epoch:
            self.epoch, self.position = self.epoch + 1, 0
        # Ranks agree on a SIGTERM where they read the metrics together; a process training alone needs no agreement
        # and stops after the step the signal arrived in, however long its steps take.
        stopping = self.stop.received_alone()
        if self.step % self.config.log_every == 0 or self.step == self.total_steps:
            window, stopping = self.meter.read(self.stop.received)
            self.last_metrics = {"epoch": self.epoch, "step": self.step, **window,
                                 "learning_rate": learning_rate(self.parts.scheduler)}
            self.report(self.last_metrics)
        epoch_ended = self.position == 0 and self.step < self.total_steps  # finish() validates the last epoch
        if epoch_ended and not stopping:  # after SIGTERM the checkpoint comes first: the job has seconds left
            self.validate()
        # Written after the epoch's validation: a run resumed from here has it in its best weights and patience.
        if stopping or (self.config.checkpoint_every and self.step % self.config.checkpoint_every == 0):
            checkpoint.save_training_state(
                self.session.config.paths.checkpoint_dir, self.session.topology.is_main, model=self.parts.model,
                optimizer=self.parts.optimizer, scheduler=self.parts.scheduler, step=self.step, epoch=self.epoch,
                position=self.position, history=self.session.history, best=self.best.state_dict())
        if stopping:
            self.progress.note(f"SIGTERM: checkpoint written at step {self.step}; rerun to resume")
            self.stopped = True
            return False
        if self.step == self.total_steps:
            return False
        if epoch_ended and self.best.patience_spent(self.config.early_stopping):  # (not stopping: returned above)
            self.stopped_early = True
            return False
        return True

    def validate(self) -> None:
        """The epoch's validation: its line, the best weights kept, the learning rate told."""
        metrics = self.validation()
        self.parts.scheduler.record_validation(metrics[SELECTION_METRIC])

    def validation(self) -> dict[str, float]:
        """Validates the model, keeps its weights if they are the best so far, and reports the line of the epoch."""
        metrics = evaluate_split(self.session, self.parts.model, "val", self.loss_function)
        self.best.consider(metrics, self.parts.model, self.step, self.epoch)
        self.report({"epoch": self.epoch, "step": self.step, **metrics})
        return metrics

    def report(self, metrics: dict[str, float]) -> None:
        self.session.history.append(metrics)
        self.progress.report(metrics)
        if self.run is not None:
            self.run.log_metrics(metrics, metrics["step"])

    def finish(self) -> None:
        """Unless stopped by SIGTERM: the last weights validated too (the last epoch's line), the best weights put
        back into the model, then their final metrics line, metrics.json, the model and plots (rank 0)."""
        if self.stopped:
            return
        if self.stopped_early:  # its validation of the last weights is logged already
            self.progress.note(early_stopping_note(self.epoch, self.best.epoch, self.best.score,
                                                   self.config.early_stopping))
        else:
            self.validation()
        self.progress.close()
        timeline.mark("trained", self.session.topology.is_main)
        self.best.restore(self.parts.model)
        # The kept weights' validation metrics, measured when they were kept, are the final ones: not measured again.
        final = final_metrics(self.session, self.parts.model, self.loss_function,
                              self.last_metrics.get("train_loss", float("nan")), validation=self.best.metrics)
        timeline.mark("evaluated", self.session.topology.is_main)
        self.progress.note(exported_weights_note(self.best.step, self.best.epoch))
        finish_session(self.session, self.parts.model, {**final, **self.best.provenance()})
        if self.run is not None:
            self.run.finish({**final, **self.best.provenance()}, self.step, self.session.config.paths.model_dir)
        self.progress.note(exported_metrics_line(final))  # the log's last line
