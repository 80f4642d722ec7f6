"""The native training step as a benchmark drives it: built as train_ddp.py builds it (engine.build_training), run for
N steps, nothing else (no logging, checkpoints or validation).

    session = synthetic_session(ModelConfig(width=1024, norm="none", dropout=0), TrainConfig(batch_size=256), ...)
    harness = NativeHarness.build(session)
    harness.run(steps=50, on_step=windows.step_done)  # the step (and meter) train_ddp.py runs

`synthetic_session` also feeds the Lightning trainer in the benchmarks (benchmarks.gpu.lightning_trainer.run_lightning),
so both trainers are measured on identical data and models.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ranker.training import engine
from ranker.data.batches import DeviceQueries, EpochBatches
from ranker.config import DataConfig, ModelConfig, PathsConfig, RunConfig, TrainConfig
from ranker.data.channels import RankingData
from sagemaker_distributed import Topology
from ranker.gpu.fast_paths import TrainingPath
from ranker.model.losses import LOSSES, SHIFT_INVARIANT_LOSSES
from ranker.training.meter import TrainingMeter
from ranker.training.session import Session
from ranker.data.synthetic import generate


def synthetic_session(model: ModelConfig, train: TrainConfig, topology: Topology, device: torch.device,
                      docs_per_query: int = 32, batches_of_data: int = 4, work_dir: Path = Path("bench-run"),
                      backend: str = "") -> Session:
    """A session over synthetic queries: `batches_of_data` global batches of training data (the order reshuffles
    each epoch), a small validation set; the process group must already be initialised for world sizes above 1."""
    global_queries = train.batch_size * topology.world_size * batches_of_data
    data = generate(global_queries + 64, docs_per_query, model.num_features or 136, seed=train.seed)
    return session_over(data.select_queries(torch.arange(global_queries).numpy()),
                        data.select_queries(torch.arange(global_queries, global_queries + 64).numpy()),
                        model, train, topology, device, work_dir, backend)


def session_over(training: RankingData, validation: RankingData, model: ModelConfig, train: TrainConfig,
                 topology: Topology, device: torch.device, work_dir: Path = Path("bench-run"),
                 backend: str = "") -> Session:
    """A session over the given queries, held on `device` padded to one document count as a run holds them."""
    engine.prepare_device(train, device)
    model = dataclasses.replace(model, num_features=training.num_features,
                                output_bias=model.output_bias and train.loss not in SHIFT_INVARIANT_LOSSES)
    config = RunConfig(model=model, data=DataConfig(), train=train,
                       paths=PathsConfig(work_dir / "model", work_dir / "output", work_dir / "checkpoints"))
    max_docs = max(training.max_docs, validation.max_docs)
    return Session(config, model, topology, backend, device, DeviceQueries.from_data(training, device, max_docs),
                   DeviceQueries.from_data(validation, device, max_docs), None, training.features)


@dataclass
class NativeHarness:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    batches: EpochBatches
    loss_function: Callable
    device: torch.device
    config: TrainConfig
    path: TrainingPath
    """The path ranker.gpu.fast_paths chose for this run (what a run's log line names)."""

    @classmethod
    def build(cls, session: Session, total_steps: int = 10_000) -> NativeHarness:
        config, device = session.config.train, session.device
        parts = engine.build_training(session.build_model(), device,
                                      session.topology.world_size, config, total_steps)
        return cls(parts.trained, parts.optimizer, parts.scheduler, session.training_batches(), LOSSES[config.loss],
                   device, config, parts.path)

    def run(self, steps: int, on_step: Callable[[], None] | None = None) -> torch.Tensor:
        """`steps` optimizer steps across as many epochs as needed; returns the summed loss, still on the device."""
        meter = TrainingMeter(self.device)
        step = engine.step_function(self.model, self.optimizer, self.scheduler, self.loss_function, self.device,
                                    self.config, meter)
        done, epoch = 0, 0
        while done < steps:
            for batch in self.batches.epoch_batches(epoch):
                step(batch)
                done += 1
                if on_step is not None:
                    on_step()
                if done == steps:
                    break
            epoch += 1
        return meter.loss_sum
