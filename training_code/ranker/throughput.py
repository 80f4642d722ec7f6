"""The training hot path as a benchmark drives it: build everything on a device, run N steps, nothing else.

    session = synthetic_session(ModelConfig(width=1024, norm="none", dropout=0), TrainConfig(batch_size=256), ...)
    harness = NativeHarness.build(session)
    harness.run(steps=50, on_step=windows.step_done)  # the step (and meter) train_ddp.py runs

`synthetic_session` also feeds the Lightning trainer in the benchmarks (benchmarks.project_trainers.run_lightning), so
both trainers are measured on identical data and models.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ranker import engine
from ranker.batches import DeviceQueries, EpochBatches
from ranker.config import DataConfig, ModelConfig, PathsConfig, RunConfig, TrainConfig
from ranker.distributed import Topology
from ranker.losses import LOSSES
from ranker.meter import TrainingMeter
from ranker.session import Session
from ranker.synthetic import generate


def synthetic_session(model: ModelConfig, train: TrainConfig, topology: Topology, device: torch.device,
                      docs_per_query: int = 32, batches_of_data: int = 4, work_dir: Path = Path("bench-run"),
                      backend: str = "") -> Session:
    """A session over synthetic queries: `batches_of_data` global batches of training data (the order reshuffles
    each epoch), a small validation set; the process group must already be initialised for world sizes above 1."""
    engine.prepare_device(train, device)
    global_queries = train.batch_size * topology.world_size * batches_of_data
    data = generate(global_queries + 64, docs_per_query, model.num_features or 136, seed=train.seed)
    training = data.select_queries(torch.arange(global_queries).numpy())
    validation = data.select_queries(torch.arange(global_queries, global_queries + 64).numpy())
    model = dataclasses.replace(model, num_features=data.num_features,
                                output_bias=model.output_bias and train.loss != "listwise")
    config = RunConfig(model=model, data=DataConfig(), train=train,
                       paths=PathsConfig(work_dir / "model", work_dir / "output", work_dir / "checkpoints"))
    return Session(config, model, topology, backend, device, DeviceQueries.from_data(training, device),
                   DeviceQueries.from_data(validation, device), None)


@dataclass
class NativeHarness:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    batches: EpochBatches
    loss_function: Callable
    device: torch.device
    config: TrainConfig

    @classmethod
    def build(cls, session: Session, total_steps: int = 10_000, fused_layers: bool = True) -> NativeHarness:
        """`fused_layers=False`: autocast's Linear + ReLU instead of ranker.fused_linear (an ablation)."""
        config, topology, device = session.config.train, session.topology, session.device
        model = engine.build_model(session.model_config, device)
        model.fused = fused_layers
        trained = engine.wrap_for_training(model, device, topology.world_size, config)
        optimizer = engine.build_optimizer(trained, config, device)
        scheduler = engine.build_scheduler(optimizer, total_steps, config.warmup_fraction)
        return cls(trained, optimizer, scheduler, session.training_batches(), LOSSES[config.loss], device, config)

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
