"""What both entry points do before and after their loop: read the configuration, join the process group, load
and place the data, and at the end write the artifacts (rank 0 only)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import sagemaker_distributed as distributed
import torch
from sagemaker_distributed import Topology
from sagemaker_distributed.failure import failure_reported

from ranker.config import ConfigError, DataConfig, ModelConfig, RunConfig, parse_config
from ranker.data import channels as ranking_data
from ranker.data import sharded_channel, shards
from ranker.data.batches import DeviceQueries, EpochBatches, OwnQueryBatches, QueryBatches
from ranker.data.ranking_data import RankingData
from ranker.gpu import fast_paths
from ranker.model import export, portable
from ranker.model.encoding import FIT_ROWS
from ranker.model.losses import SHIFT_INVARIANT_LOSSES
from ranker.model.metrics import ndcg_means
from ranker.model.mlp import RankingMLP
from ranker.serving import package as serving_package
from ranker.training import collector, engine, plots, timeline, tracking
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
    shards: sharded_channel.Agreement | None = None
    """On a sharded training channel, what the ranks agreed on: `train` then holds this rank's own queries."""
    validation_owned: bool = False
    """The validation queries are this rank's own (held out of its part of a sharded training channel)."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Every metric line rank 0 reported, for plots and checkpoints."""
    run: tracking.TrackedRun | None = None
    """A tracked job's MLflow run, on rank 0."""
    started: float = field(default_factory=time.perf_counter)

    def total_steps(self, steps_per_epoch: int) -> int:
        return self.config.train.max_steps or self.config.train.epochs * steps_per_epoch

    def build_model(self) -> RankingMLP:
        """The model on this process's device, its input encoding fitted on the training channel (a resumed run
        then loads the checkpoint's weights and encoding over it)."""
        model = engine.build_model(self.model_config, self.device)
        engine.fit_encoding(model, self.encoding_rows, self.config.train.seed)
        timeline.mark("encoding fitted", self.topology.is_main)
        return model

    def training_batches(self) -> EpochBatches:
        return epoch_batches(self.config.data, self.train, self.shards, batch_size=self.config.train.batch_size,
                             seed=self.config.train.seed, rank=self.topology.rank,
                             world_size=self.topology.world_size, device=self.device)


@dataclass(frozen=True)
class Splits:
    """The channels as this rank read them, before the ranks agree on anything."""

    train: RankingData
    validation: RankingData
    test: RankingData | None
    validation_owned: bool = False
    """The validation queries are this rank's own, held out of its part of a sharded training channel; otherwise
    every rank holds every validation query and scores its part of them."""


@dataclass(frozen=True)
class TrainingData:
    """What both loops train and score on, the same model input on every rank."""

    train: RankingData
    validation: RankingData
    test: RankingData | None
    encoding_rows: np.ndarray
    """Training features, as the model sees them, to fit the model's input encoding on."""
    shards: sharded_channel.Agreement | None = None
    """On a sharded training channel, what the ranks agreed on; None where every rank holds every training query."""
    validation_owned: bool = False

    @property
    def num_features(self) -> int:
        return self.train.num_features


def epoch_batches(data: DataConfig, train: DeviceQueries | None, shards_agreed: sharded_channel.Agreement | None, *,
                  batch_size: int, seed: int, rank: int, world_size: int, device: torch.device) -> EpochBatches:
    """One rank's training batches, as both loops take them: streamed from binary shards (`train` None), this rank's
    own queries of a sharded channel, or its part of the queries every rank holds."""
    if train is None:
        from ranker.data.streaming import StreamingBatches  # with --streaming true only

        return StreamingBatches(data.train, batch_size, rank, world_size, seed, device, log1p=data.log1p,
                                threads=data.loader_threads)
    if shards_agreed is not None:
        return OwnQueryBatches(train, shards_agreed.batch_size, shards_agreed.steps_per_epoch, rank, seed)
    return QueryBatches(train, batch_size, rank, world_size, seed)


def evaluation_part(owned: bool, rank: int, world_size: int) -> tuple[int, int]:
    """Which part of a split's queries this rank scores, as (part, parts): all of them where they are its own,
    else its `rank`-th of the queries every rank holds. The ranks' totals are added up either way."""
    return (0, 1) if owned else (rank, world_size)


@contextlib.contextmanager
def entry_point_run() -> Iterator[None]:
    """What both entry points' `main` does around its run: report a failure where SageMaker reads it, end a tracked
    job's MLflow run that did not finish (FAILED, or KILLED when stopped), leave the process group on success and
    failure alike, and keep the collector off what the imports made meanwhile."""
    # What exists by now (the imported modules, torch's above all) lives as long as the process: collections need
    # not walk it again.
    collector.freeze_imports()
    try:
        with failure_reported(usage_errors=(ConfigError, ranking_data.DataError)):
            try:
                with tracking.ended_on_exit():
                    yield
            finally:
                distributed.shutdown()
    finally:
        collector.thaw()


def run_training(train: Callable[[Session], None], argv: Sequence[str], description: str) -> None:
    """The native entry point's `main`: start the session and train, inside `entry_point_run`."""
    with entry_point_run():
        train(start_session(argv, description))


def run_config(argv: Sequence[str], description: str, env: Mapping[str, str] = os.environ) -> RunConfig:
    """The run's configuration, its defaults sized for the device this process trains on (ranker.config's
    HARDWARE_DEFAULTS): what both entry points train with."""
    return parse_config(argv, env, description, distributed.device_for(distributed.detect_topology(env)).type)


def start_session(argv: Sequence[str], description: str, env: Mapping[str, str] = os.environ) -> Session:
    config = run_config(argv, description, env)
    topology = distributed.detect_topology(env)
    device, backend, path = plan_training(config, topology)
    # Before CUDA is initialised (the process group sets the device): the text parser's worker processes can then
    # start by fork, instead of each importing this entry point again (ranker.data.letor_processes).
    timeline.mark("imported", topology.is_main)
    engine.import_optimizer_machinery()  # while the text parse that the entry point started ahead still runs
    # Before the data: a job that fails on its data has a run that says so. The text parse still runs meanwhile.
    run = tracking.open_run(topology.is_main, config, env)
    splits = load_splits(config, topology)
    timeline.mark("parsed", topology.is_main)
    distributed.init_process_group(backend, topology=topology, device=device, bind_device=path.bind_device)
    data = agree_on_splits(splits, config, topology)
    engine.prepare_device(config.train, device)
    seed_everything(config.train.seed, topology.rank)
    model_config = model_config_for(config, data.num_features)
    train, validation, test = data.train, data.validation, data.test
    max_docs = max(part.max_docs for part in (train, validation, test) if part is not None)
    return Session(config, model_config, topology, backend, device,
                   DeviceQueries.from_data(train, device, max_docs) if not config.data.streaming else None,
                   DeviceQueries.from_data(validation, device, max_docs),
                   DeviceQueries.from_data(test, device, max_docs) if test is not None else None,
                   data.encoding_rows, shards=data.shards, validation_owned=data.validation_owned, run=run)


def plan_training(config: RunConfig, topology: Topology) -> tuple[torch.device, str, fast_paths.TrainingPath]:
    """This process's device, backend and training path (ranker.gpu.fast_paths). Rank 0 logs the path as the run's
    first line, in both entry points: what runs where, and why each fast path not taken is not; then the defaults the
    run took (those of its device) and the flags that replaced them."""
    device = distributed.device_for(topology)
    backend = distributed.resolve_backend(config.train.backend, topology, device.type == "cuda")
    path = fast_paths.choose(config.train, device.type, topology.world_size, backend)
    if topology.is_main:
        print(f"{path.describe()}\n{config.describe_defaults()}", flush=True)
    return device, backend, path


def model_config_for(config: RunConfig, num_features: int) -> ModelConfig:
    """The model configuration with the feature count taken from the data, and no scoring bias under a listwise
    loss (see ModelConfig.output_bias)."""
    return dataclasses.replace(config.model, num_features=num_features, output_bias=config.model.output_bias
                               and config.train.loss not in SHIFT_INVARIANT_LOSSES)


def encoding_rows(config: RunConfig, train: RankingData) -> np.ndarray:
    """The training features to fit the model's input encoding on, as the model sees them: the loaded training
    split, or when streaming a sample read from the shards (with log1p where the loader applies it)."""
    if not config.data.streaming:
        return train.features
    rows = shards.sample_rows(config.data.train, FIT_ROWS, config.train.seed, train.num_features)
    return np.log1p(np.maximum(rows, 0)) if config.data.log1p else rows


def load_splits(config: RunConfig, topology: Topology) -> Splits:
    """Train, validation (a channel, or whole queries split off train) and optional test. When streaming, `train`
    holds no rows, only the shards' feature count: the rows stay on disk. Where the launcher started several
    processes on this host (each loading the same channels), text is parsed once for all. On a sharded training
    channel this rank keeps its part of its host's share, and a validation split is held out of that part; the
    ranks agree on one feature count afterwards (`agree_on_splits`), so each split keeps its own width here."""
    data = config.data
    num_features = config.model.num_features or None
    if data.streaming and data.train_sharded:
        raise ValueError(f"streaming: the train channel is {sharded_channel.SHARDED}, and binary shards cannot be "
                         "sharded across hosts: keep the channel FullyReplicated (with input_mode FastFile a host "
                         "reads only the shards its ranks stream), or drop --streaming")
    if data.streaming:
        if not shards.is_shard_dir(data.train) or data.validation is None:
            raise ValueError(f"streaming: train channel {data.train} must hold binary shards (ranker.data.convert) "
                             "and a validation channel must be given; or drop --streaming")
        manifest = shards.read_manifest(data.train)
        train = RankingData(np.zeros((0, num_features or manifest["num_features"]), np.float32),
                                         np.zeros(0, np.float32), np.zeros(1, np.int64))
    elif data.train_sharded:
        share = sharded_channel.host_share(data.train, num_features, topology.local_world_size)
        train = sharded_channel.rank_part(share, topology.local_rank, topology.local_world_size)
    else:
        train = ranking_data.load_channel(data.train, num_features, topology.local_world_size)
    width = num_features if data.train_sharded else train.num_features
    if data.validation is not None:
        validation = ranking_data.load_channel(data.validation, width, topology.local_world_size)
    else:
        train, validation = ranking_data.split_queries(train, data.validation_fraction, config.train.seed)
    test = ranking_data.load_channel(data.test, width, topology.local_world_size) if data.test is not None else None
    if data.log1p:
        train, validation = train.with_log1p(), validation.with_log1p()
        test = test.with_log1p() if test is not None else None
    return Splits(train, validation, test, validation_owned=data.train_sharded and data.validation is None)


def agree_on_splits(splits: Splits, config: RunConfig, topology: Topology) -> TrainingData:
    """The data both loops train on. Where every rank holds every training query it is the splits as read; on a
    sharded training channel the ranks first agree on the feature count, the batches and the encoding's rows
    (ranker.data.sharded_channel: collective, so the process group must exist)."""
    if not config.data.train_sharded:
        return TrainingData(splits.train, splits.validation, splits.test, encoding_rows(config, splits.train))
    agreed = sharded_channel.agree(splits.train, num_features=config.model.num_features or None,
                                   requested_batch_size=config.train.batch_size, sample_rows=FIT_ROWS,
                                   rank=topology.rank, world_size=topology.world_size, seed=config.train.seed)
    if topology.is_main:
        print(agreed.describe(), flush=True)
    train, validation, test = (None if part is None else _to_width(part, agreed.num_features, name)
                               for name, part in (("train", splits.train), ("validation", splits.validation),
                                                  ("test", splits.test)))
    return TrainingData(train, validation, test, agreed.encoding_rows, shards=agreed,
                        validation_owned=splits.validation_owned)


def _to_width(data: RankingData, num_features: int, name: str) -> RankingData:
    if data.num_features > num_features:
        raise ValueError(f"{name}: {data.num_features} features, more than the {num_features} of the sharded training "
                         "channel's widest file: give the channels the same features, or set --num-features")
    return ranking_data.widen(data, num_features)


def evaluate_split(session: Session, model: torch.nn.Module, split: str,
                   loss_function: engine.LossFunction) -> dict[str, float]:
    """`val_*` or `test_*` metrics of `model` (the plain model, whatever wraps it for training: every loop scores the
    same module) over that split's queries, all ranks together (collective)."""
    queries = session.validation if split == "val" else session.test
    part, parts = evaluation_part(split == "val" and session.validation_owned, session.topology.rank,
                                  session.topology.world_size)
    return evaluation_metrics(engine.evaluate(model, queries, part, parts, loss_function), split)


def final_metrics(session: Session, model: torch.nn.Module, loss_function: engine.LossFunction,
                  train_loss: float, validation: dict[str, float] | None = None) -> dict[str, float]:
    """What metrics.json holds: the last train loss, validation and (with a test channel) test metrics.
    `validation`: the validation metrics of `model`'s weights where they were measured already (then not again)."""
    final = {"train_loss": train_loss,
             **(validation if validation is not None else evaluate_split(session, model, "val", loss_function))}
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
    the output folder (call on rank 0 only): what every entry point leaves behind. The plots are drawn in a child
    process meanwhile."""
    plotting = plots.start_plotting(history, config.paths.output_data_dir, final_metrics)
    scorer = export.save_model(config.paths.model_dir, model, model_config, config.data.log1p,
                               {**final_metrics, "defaults": config.defaults.name})
    timeline.mark("model written")
    if config.train.portable_export:
        portable.save_exported_program(config.paths.model_dir, scorer)
    serving_package.write_serving_code(config.paths.model_dir)
    plotting.wait()
    timeline.mark("exported")
