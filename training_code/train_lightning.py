"""Trains the ranking MLP with PyTorch Lightning (same model, data, metrics and artifacts as train_ddp.py).

Launch commands (all flags optional except the training channel outside SageMaker):

    # one process (CPU or one GPU)
    python train_lightning.py --train /path/to/letor-dir --model-dir model --output-data-dir out --checkpoint-dir ckpt
    # several processes on one machine (gloo on CPU, NCCL on GPU)
    torchrun --standalone --nproc-per-node 2 train_lightning.py --train /path/to/letor-dir --model-dir model ...
    # mpirun (SageMaker `pytorchddp`/`smdistributed` do this): ranks from OMPI_COMM_WORLD_*
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=7777 python train_lightning.py --train ...
    # SageMaker (SDK v2)
    PyTorch(entry_point="train_lightning.py", source_dir="training_code", distribution={"torch_distributed":
            {"enabled": True}}, hyperparameters={"epochs": 20, "batch-size": 32}, ...).fit({"train": "s3://..."})

The pieces are Lightning's: a `RankingModule` (ranker.lightning.module), a `RankingDataModule`
(ranker.lightning.datamodule), and a `Trainer` with DDP across the ranks the launcher started (`SageMakerEnvironment`;
FusedDataParallel in place of DDP where the native trainer uses it, ranker.lightning.strategy), bf16-mixed precision
on GPU, `ModelCheckpoint` into the checkpoint folder SageMaker syncs (a rerun resumes from `last`), a second
`ModelCheckpoint(monitor="val_ndcg@10", mode="max")` whose best weights are exported (`EarlyStopping` on the same
metric with `--early-stopping N`), CSV and
TensorBoard loggers, and the callbacks of ranker.lightning.callbacks. Add a callback in `build_callbacks`, a logger in
`build_loggers`. Every flag is listed by `python train_lightning.py --help` and in docs/training.md; docs/lightning.md
describes checkpoints, resuming and SIGTERM.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ranker.training import collector, early_parse, fast_exit

if __name__ == "__main__":
    # Before the imports below load Lightning and torch: the training text is then parsed while they run, and the
    # garbage collector leaves the objects they create alone (ranker.training.collector).
    early_parse.start(sys.argv[1:], __doc__)
    collector.pause()

import lightning as L
import sagemaker_distributed as distributed
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, LearningRateMonitor, ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from lightning.pytorch.strategies import Strategy
from ranker.config import RunConfig
from ranker.lightning.callbacks import MetricLines, ModelSizeLine, RandomStatePerRank
from ranker.lightning.datamodule import RankingDataModule
from ranker.lightning.module import RankingModule
from ranker.lightning.tracking import mlflow_logger
from ranker.lightning.strategy import FusedDataParallelStrategy
from ranker.training.checkpoint import seed_everything
from ranker.training import engine, timeline, tracking
from ranker.training.selection import (SELECTION_METRIC, early_stopping_note, exported_metrics_line,
                                      exported_weights_note)
from ranker.training.session import (agree_on_splits, entry_point_run, load_splits, model_config_for,
                                     plan_training, run_config, write_artifacts)
from sagemaker_distributed import Topology
from sagemaker_distributed.lightning import SageMakerEnvironment, SpotInterruptionCheckpoint, quiet_lightning_console
from sagemaker_distributed.lightning.console import LIGHTNING_INFO_LOGGER


def build_strategy(config: RunConfig, topology: Topology) -> Strategy | str:
    if topology.world_size == 1:
        return "auto"
    # FusedDataParallel where the native trainer uses it (ranker.lightning.strategy), else DDP. The MLP uses every
    # parameter every step: DDP can fix its buckets once (static_graph) and let the gradients live in them
    # (gradient_as_bucket_view) instead of copying them in and out.
    return FusedDataParallelStrategy(topology, config.train.backend, gradient_as_bucket_view=True, static_graph=True)


def build_plugins(topology: Topology) -> list[SageMakerEnvironment]:
    """One process runs in the job's environment too (several get it from their strategy): left to find its own,
    Lightning probes each cluster it knows, and its MPI probe initialises MPI through mpi4py wherever that is
    installed (0.6 s on the GPU host, and the process must then finalize MPI as it exits, ranker.training.fast_exit)."""
    return [SageMakerEnvironment(topology)] if topology.world_size == 1 else []


def build_loggers(config: RunConfig) -> list[Logger]:
    loggers: list[Logger] = [CSVLogger(config.paths.output_data_dir, name="lightning_logs")]
    if importlib.util.find_spec("tensorboard") or importlib.util.find_spec("tensorboardX"):
        loggers.append(TensorBoardLogger(config.paths.tensorboard_dir, name="", version=""))
    return loggers


def best_checkpoint(config: RunConfig) -> ModelCheckpoint:
    """The weights with the best validation NDCG@10 so far, after each validation: what the run exports. In a
    folder of its own, so that resuming finds `last.ckpt` only. Weights only: loading them to score the exported
    model must not take the callbacks back to that epoch (the metric history the plots draw is the whole run's)."""
    return ModelCheckpoint(dirpath=Path(config.paths.checkpoint_dir) / "best", filename="best",
                           monitor=SELECTION_METRIC, mode="max", save_top_k=1, save_on_train_epoch_end=False,
                           save_weights_only=True)


def build_callbacks(config: RunConfig, metric_lines: MetricLines, best: ModelCheckpoint) -> list[Callback]:
    folder = config.paths.checkpoint_dir
    # save_top_k=0: one `last.ckpt`, rewritten every `checkpoint_every` steps (SageMaker uploads each write), and by
    # the SIGTERM checkpoint.
    periodic = ModelCheckpoint(dirpath=folder, save_last=True, save_top_k=0,
                               every_n_train_steps=config.train.checkpoint_every or None,
                               every_n_epochs=None if config.train.checkpoint_every else 0)
    last = Path(folder) / f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"
    # LearningRateMonitor reads the optimizer's rate, a Python number, on logging steps only: no device read.
    callbacks = [periodic, best, SpotInterruptionCheckpoint(last, config.train.log_every), RandomStatePerRank(),
                 metric_lines, LearningRateMonitor(logging_interval="step"), ModelSizeLine()]
    if config.train.early_stopping:
        # Counted after each validation, not at each training epoch's end: a run that --max-steps ends mid-epoch
        # reaches an epoch end that no validation preceded.
        callbacks.append(EarlyStopping(monitor=SELECTION_METRIC, mode="max", patience=config.train.early_stopping,
                                       check_on_train_epoch_end=False))
    return callbacks


def build_trainer(config: RunConfig, topology: Topology, callbacks: list[Callback], loggers: list[Logger] | bool,
                  **overrides) -> L.Trainer:
    cuda = torch.cuda.is_available()
    train = config.train
    progress_bar = overrides.pop("enable_progress_bar", sys.stderr.isatty())
    if progress_bar:  # redrawn with each metric line: a redraw every step costs host time between steps
        callbacks = [*callbacks, TQDMProgressBar(refresh_rate=train.log_every)]
    settings = dict(
        accelerator="gpu" if cuda else "cpu", devices=topology.local_world_size, num_nodes=topology.num_nodes,
        strategy=build_strategy(config, topology), plugins=build_plugins(topology),
        precision="bf16-mixed" if cuda and train.precision == "bf16" else "32-true",
        max_epochs=-1 if train.max_steps else train.epochs, max_steps=train.max_steps or -1,
        callbacks=callbacks, logger=loggers, log_every_n_steps=train.log_every,
        # The data module already splits every batch across the ranks (ranker.data.batches' global order).
        use_distributed_sampler=False,
        # No sanity pass over validation batches before the first step, as in train_ddp.py: the first epoch's own
        # validation runs the same code, and the pass delayed every run's first step (docs/benchmarks.md, fixed cost).
        num_sanity_val_steps=0,
        enable_progress_bar=progress_bar, default_root_dir=config.paths.output_data_dir)
    return L.Trainer(**{**settings, **overrides})


def has_checkpoint(folder: Path) -> bool:
    return Path(folder).is_dir() and any(Path(folder).glob("*.ckpt"))


def train(config: RunConfig) -> None:
    quiet_lightning_console()
    # Lightning's status lines (the GPU and TPU census, checkpoints restored, why `fit` stopped) say less than the
    # run's own: its training path, `resumed from`, early stopping, `exporting the weights of`. Its warnings still show.
    logging.getLogger(LIGHTNING_INFO_LOGGER).setLevel(logging.WARNING)
    topology = distributed.detect_topology()
    plan_training(config, topology)
    timeline.mark("imported", topology.is_main)
    # Before the data, as the native loop opens it (ranker.training.session.start_session): a tracked job's MLflow run,
    # on rank 0.
    run = tracking.open_run(topology.is_main, config)
    seed_everything(config.train.seed, topology.rank)  # each rank its own dropout masks; DDP starts from rank 0's weights
    # Read before CUDA is initialised, as the native loop does (ranker.training.session.start_session).
    splits = load_splits(config, topology)
    timeline.mark("parsed", topology.is_main)
    # Joined here rather than by the strategy, which finds the group and uses it: on a sharded training channel the
    # ranks agree on the data before the model exists.
    distributed.init_process_group(config.train.backend, topology=topology)
    data = agree_on_splits(splits, config, topology)
    datamodule = RankingDataModule.from_training_data(data, config)
    module = RankingModule(model_config_for(config, data.num_features), config.train)
    # A resumed run loads the fitted encoding with the rest of the weights.
    engine.fit_encoding(module.model, data.encoding_rows, config.train.seed)
    timeline.mark("encoding fitted", topology.is_main)
    metric_lines, best = MetricLines(config.train.log_every), best_checkpoint(config)
    loggers = build_loggers(config) + ([mlflow_logger(run)] if run is not None else [])
    trainer = build_trainer(config, topology, build_callbacks(config, metric_lines, best), loggers)
    trainer.fit(torch.compile(module) if config.train.compile else module, datamodule=datamodule,
                ckpt_path="last" if has_checkpoint(config.paths.checkpoint_dir) else None)
    # The best weights go into the module: what validate() and test() score and the artifacts hold. A run stopped by
    # --max-steps before its first epoch ended validated nothing yet: its last weights are all there is.
    saved = best_saved(trainer, best)
    if saved is not None:
        module.load_state_dict(saved["state_dict"])
    exported = exported_from(saved) if saved is not None else {"exported_step": trainer.global_step,
                                                               "exported_epoch": metric_lines.completed_epochs(trainer)}
    stopper = trainer.early_stopping_callback
    if stopper is not None and stopper.stopped_epoch:
        MetricLines.report(trainer, module, early_stopping_note(metric_lines.completed_epochs(trainer),
                                                                exported["exported_epoch"],
                                                                float(best.best_model_score), stopper.patience))
    timeline.mark("trained", topology.is_main)
    final = {"train_loss": metric_lines.last_train_loss,
             **trainer.validate(module, datamodule=datamodule, verbose=False)[0]}
    if datamodule.has_test:
        final.update(trainer.test(module, datamodule=datamodule, verbose=False)[0])
    timeline.mark("evaluated", topology.is_main)
    MetricLines.report(trainer, module, exported_weights_note(exported["exported_step"], exported["exported_epoch"]))
    if trainer.is_global_zero:
        write_artifacts(config, module.model_config, module.model, metric_lines.history, {**final, **exported})
    trainer.strategy.barrier()
    if run is not None:  # every rank is through, as the native loop's run ends (ranker.native.bookkeeping)
        run.finish({**final, **exported}, trainer.global_step, config.paths.model_dir)
    MetricLines.report(trainer, module, exported_metrics_line(final))  # the log's last line


def best_saved(trainer: L.Trainer, best: ModelCheckpoint) -> dict | None:
    """The best checkpoint, read by rank 0 and sent to every rank; None before any validation. Only rank 0 writes it
    (Lightning's ModelCheckpoint), into its host's checkpoint folder, and on SageMaker each host has its own
    (/opt/ml/checkpoints): the ranks of the other hosts cannot read it from the path."""
    if not best.best_model_path:
        return None
    saved = torch.load(best.best_model_path, map_location="cpu", weights_only=True) if trainer.is_global_zero else None
    return trainer.strategy.broadcast(saved)


def exported_from(saved: dict) -> dict[str, int]:
    """Steps and completed epochs when the exported weights were saved (at the end of an epoch's validation, before
    Lightning counts that epoch), as the native trainer's metrics.json names them."""
    return {"exported_step": saved["global_step"], "exported_epoch": saved["epoch"] + 1}


def main(argv: Sequence[str] | None = None) -> None:
    with entry_point_run():
        train(run_config(sys.argv[1:] if argv is None else argv, __doc__))


if __name__ == "__main__":
    main()
    fast_exit.leave()  # the run succeeded: its process ends without Python's teardown (ranker.training.fast_exit)
