"""What both entry points do before and after their loop: read the configuration, join the process group, load
and place the data, and at the end write the artifacts (rank 0 only)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import sagemaker_distributed as distributed
import torch
from sagemaker_distributed import Topology
from sagemaker_distributed.failure import failure_reported

from ranker.config import ConfigError, ModelConfig, RunConfig, parse_config
from ranker.data import channels as ranking_data
from ranker.data import shards
from ranker.data.batches import DeviceQueries, EpochBatches, QueryBatches
from ranker.gpu import fast_paths
from ranker.model import export, portable
from ranker.model.encoding import FIT_ROWS
from ranker.model.losses import SHIFT_INVARIANT_LOSSES
from ranker.model.metrics import ndcg_means
from ranker.model.mlp import RankingMLP
from ranker.serving import package as serving_package
from ranker.training import engine, plots
from ranker.training.checkpoint import seed_everything


@dataclass
class Session:
    config: RunConfig
    model_config: ModelConfig
    """The model configuration with the feature count taken from the data."""
    topology: Topology
    backend: str
    device: torch.device
    train: DeviceQueries | None
    """None when streaming: batches then come from the shards on disk."""
    validation: DeviceQueries
    test: DeviceQueries | None
    encoding_rows: np.ndarray
    """Training features, as the model sees them, to fit the model's input encoding on (`encoding_rows`)."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Every metric line rank 0 reported, for plots and checkpoints."""
    started: float = field(default_factory=time.perf_counter)

    def total_steps(self, steps_per_epoch: int) -> int:
        return self.config.train.max_steps or self.config.train.epochs * steps_per_epoch

    def build_model(self) -> RankingMLP:
        """The model on this process's device, its input encoding fitted on the training channel (a resumed run
        then loads the checkpoint's weights and encoding over it)."""
        model = engine.build_model(self.model_config, self.device)
        engine.fit_encoding(model, self.encoding_rows, self.config.train.seed)
        return model

    def training_batches(self) -> EpochBatches:
        config, topology = self.config.train, self.topology
        if self.train is None:
            from ranker.data.streaming import StreamingBatches  # with --streaming true only

            return StreamingBatches(self.config.data.train, config.batch_size, topology.rank, topology.world_size,
                                    config.seed, self.device, log1p=self.config.data.log1p,
                                    threads=self.config.data.loader_threads)
        return QueryBatches(self.train, config.batch_size, topology.rank, topology.world_size, config.seed)


def run_training(train: Callable[[Session], None], argv: Sequence[str], description: str) -> None:
    """What both entry points' `main` does around its loop: report a failure where SageMaker reads it, start the
    session, train, and leave the process group on success and failure alike."""
    with failure_reported(usage_errors=(ConfigError,)):
        session = start_session(argv, description)
        try:
            train(session)
        finally:
            distributed.shutdown()


def start_session(argv: Sequence[str], description: str, env: Mapping[str, str] = os.environ) -> Session:
    config = parse_config(argv, env, description)
    topology = distributed.detect_topology(env)
    device = distributed.device_for(topology)
    backend = distributed.resolve_backend(config.train.backend, topology, device.type == "cuda")
    path = fast_paths.choose(config.train, device.type, topology.world_size, backend)
    if topology.is_main:
        print(path.describe(), flush=True)
    # Before CUDA is initialised (the process group sets the device): the text parser's worker processes can then
    # start by fork, instead of each importing this entry point again (ranker.data.letor_processes).
    train, validation, test = load_splits(config, topology.local_world_size)
    distributed.init_process_group(backend, topology=topology, device=device, bind_device=path.bind_device)
    engine.prepare_device(config.train, device)
    seed_everything(config.train.seed, topology.rank)
    model_config = model_config_for(config, train.num_features)
    max_docs = max(part.max_docs for part in (train, validation, test) if part is not None)
    return Session(config, model_config, topology, backend, device,
                   DeviceQueries.from_data(train, device, max_docs) if not config.data.streaming else None,
                   DeviceQueries.from_data(validation, device, max_docs),
                   DeviceQueries.from_data(test, device, max_docs) if test is not None else None,
                   encoding_rows(config, train))


def model_config_for(config: RunConfig, num_features: int) -> ModelConfig:
    """The model configuration with the feature count taken from the data, and no scoring bias under a listwise
    loss (see ModelConfig.output_bias)."""
    return dataclasses.replace(config.model, num_features=num_features, output_bias=config.model.output_bias
                               and config.train.loss not in SHIFT_INVARIANT_LOSSES)


def encoding_rows(config: RunConfig, train: ranking_data.RankingData) -> np.ndarray:
    """The training features to fit the model's input encoding on, as the model sees them: the loaded training
    split, or when streaming a sample read from the shards (with log1p where the loader applies it)."""
    if not config.data.streaming:
        return train.features
    rows = shards.sample_rows(config.data.train, FIT_ROWS, config.train.seed, train.num_features)
    return np.log1p(np.maximum(rows, 0)) if config.data.log1p else rows


def load_splits(config: RunConfig, local_ranks: int
                ) -> tuple[ranking_data.RankingData, ranking_data.RankingData, ranking_data.RankingData | None]:
    """Train, validation (a channel, or whole queries split off train) and optional test, with one feature count.
    When streaming, `train` holds no rows, only the shards' feature count: the rows stay on disk. Where the launcher
    started `local_ranks` processes on this host (each loading the same channels), text is parsed once for all."""
    num_features = config.model.num_features or None
    if config.data.streaming:
        if not shards.is_shard_dir(config.data.train) or config.data.validation is None:
            raise ValueError(f"streaming: train channel {config.data.train} must hold binary shards (ranker.data.convert) "
                             "and a validation channel must be given; or drop --streaming")
        manifest = shards.read_manifest(config.data.train)
        train = ranking_data.RankingData(np.zeros((0, num_features or manifest["num_features"]), np.float32),
                                         np.zeros(0, np.float32), np.zeros(1, np.int64))
    else:
        train = ranking_data.load_channel(config.data.train, num_features, local_ranks)
    num_features = train.num_features
    if config.data.validation is not None:
        validation = ranking_data.load_channel(config.data.validation, num_features, local_ranks)
    else:
        train, validation = ranking_data.split_queries(train, config.data.validation_fraction, config.train.seed)
    test = ranking_data.load_channel(config.data.test, num_features, local_ranks) \
        if config.data.test is not None else None
    if config.data.log1p:
        train, validation = train.with_log1p(), validation.with_log1p()
        test = test.with_log1p() if test is not None else None
    return train, validation, test


def evaluate_split(session: Session, model: torch.nn.Module, split: str,
                   loss_function: engine.LossFunction) -> dict[str, float]:
    """`val_*` or `test_*` metrics of `model` (the plain model, whatever wraps it for training: every loop scores the
    same module) over that split's queries, all ranks together (collective)."""
    queries = session.validation if split == "val" else session.test
    return evaluation_metrics(engine.evaluate(model, queries, session.topology.rank, session.topology.world_size,
                                              loss_function), split)


def final_metrics(session: Session, model: torch.nn.Module, loss_function: engine.LossFunction,
                  train_loss: float) -> dict[str, float]:
    """What metrics.json holds: the last train loss, validation and (with a test channel) test metrics."""
    final = {"train_loss": train_loss, **evaluate_split(session, model, "val", loss_function)}
    if session.test is not None:
        final.update(evaluate_split(session, model, "test", loss_function))
    return final


def evaluation_metrics(totals: torch.Tensor, prefix: str) -> dict[str, float]:
    """Means from `engine.evaluate`'s totals: one host read."""
    values = totals.tolist()
    metrics = ndcg_means(values, prefix)
    if prefix == "val":
        metrics["val_loss"] = values[5] / max(values[4], 1.0)
    return metrics


def finish_session(session: Session, model: torch.nn.Module, final_metrics: dict[str, float]) -> None:
    """Rank 0 writes the artifacts; every rank waits for it."""
    if session.topology.is_main:
        write_artifacts(session.config, session.model_config, model, session.history, final_metrics)
    distributed.barrier()


def write_artifacts(config: RunConfig, model_config: ModelConfig, model: torch.nn.Module,
                    history: list[dict[str, float]], final_metrics: dict[str, float]) -> None:
    """Weights, config, serving exports, the inference handler and metrics.json into the model folder, plots into
    the output folder (call on rank 0 only): what every entry point leaves behind."""
    export.save_model(config.paths.model_dir, model, model_config, config.data.log1p, final_metrics)
    portable.save_exported_program(config.paths.model_dir)
    serving_package.write_serving_code(config.paths.model_dir)
    plots.plot_curves(history, config.paths.output_data_dir, final_metrics)
