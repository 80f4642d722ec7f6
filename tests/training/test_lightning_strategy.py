"""FusedDataParallelStrategy: where ranker.gpu.fast_paths chooses FusedDataParallel the module trains through it (with the
sharded AdamW where the update is sharded) and its checkpoint keys stay the plain model's; elsewhere it is DDP.

One gloo process: the GPU-only decision is forced by replacing `engine.training_path` with the CPU path plus the
FusedDataParallel flags (FusedDataParallel itself runs on CPU, its own tests do the multi-rank arithmetic)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
import torch.distributed as dist
import train_lightning
from ranker.config import ModelConfig, TrainConfig, parse_config
from sagemaker_distributed import Topology
from sagemaker_distributed.lightning import SageMakerEnvironment, quiet_lightning_console
from ranker.gpu.fused_data_parallel import FusedDataParallel
from ranker.gpu.fused_linear import FusedLayers
from ranker.gpu.sharded_optimizer import ShardedAdamW
from ranker.lightning.module import RankingModule
from ranker.lightning.strategy import FusedDataParallelStrategy
from ranker.training import engine
from torch.nn.parallel import DistributedDataParallel
from training_launch import NO_PORTABLE_EXPORT, TRAINING_CODE, RunDirs, free_port, run_dirs, start_mpirun_ranks

FORCING_LAUNCHER = Path(__file__).with_name("with_fused_data_parallel.py")


@pytest.fixture
def process_group(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def configured(module: RankingModule) -> FusedDataParallelStrategy:
    strategy = FusedDataParallelStrategy(Topology("single", 0, 1, 0, 1, "127.0.0.1", free_port()), "gloo")
    strategy.connect(module)
    strategy.configure_ddp()
    return strategy


def force_fused_data_parallel(monkeypatch, sharded_update: bool) -> None:
    real = engine.training_path

    def forced(config, device, world_size):
        return dataclasses.replace(real(config, device, world_size), fused_data_parallel=True,
                                   sharded_update=sharded_update)

    monkeypatch.setattr(engine, "training_path", forced)


def batch(num_features: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(4, 6, num_features, generator=generator)
    return features, torch.randint(0, 3, (4, 6), generator=generator).float(), torch.ones(4, 6, dtype=torch.bool)


def test_on_cpu_with_gloo_the_strategy_is_ddp(process_group):
    module = RankingModule(ModelConfig(num_features=5, width=8, num_layers=3, dropout=0.0), TrainConfig())
    strategy = configured(module)
    assert isinstance(strategy.model, DistributedDataParallel)
    assert module.training_wrapper is None and module.trained is module


def test_where_fused_data_parallel_is_chosen_the_module_trains_through_it(process_group, monkeypatch):
    force_fused_data_parallel(monkeypatch, sharded_update=False)
    module = RankingModule(ModelConfig(num_features=5, width=8, num_layers=3, dropout=0.0), TrainConfig())
    keys = list(module.state_dict())
    reference = RankingModule(module.model_config, module.train_config)
    reference.load_state_dict(module.state_dict())

    strategy = configured(module)
    assert strategy.model is module  # Lightning calls the module's steps itself: no DDP around it
    assert isinstance(module.trained, FusedDataParallel) and module.trained.module is module.model
    assert list(module.state_dict()) == keys  # what ModelCheckpoint saves: the plain model's keys

    module.training_step(batch(5), 0).backward()
    features, labels, mask = batch(5)
    reference.loss_function(FusedLayers(reference.model)(features), labels, mask).backward()
    for (name, parameter), expected in zip(module.model.named_parameters(), reference.model.parameters()):
        # the step ran the fused (bf16) layers, whose backward wrote and reduced the gradients: one rank's average
        # is its own gradient
        torch.testing.assert_close(parameter.grad, expected.grad, atol=1e-6, rtol=1e-5, msg=name)


def test_a_sharded_update_gets_the_sharded_optimizer_and_keeps_the_checkpoint_keys(process_group, monkeypatch):
    force_fused_data_parallel(monkeypatch, sharded_update=True)
    # Width 2048: the layers fill several of FusedDataParallel's 25 MB buckets, so the update is sharded.
    module = RankingModule(ModelConfig(num_features=5, width=2048, num_layers=4, dropout=0.0), TrainConfig())
    keys = list(module.state_dict())
    configured(module)
    assert module.trained.shard_optimizer
    module.trainer = SimpleNamespace(estimated_stepping_batches=10)
    assert isinstance(module.configure_optimizers()["optimizer"], ShardedAdamW)
    assert list(module.state_dict()) == keys


def test_one_process_trains_in_the_jobs_environment_and_several_in_their_strategys(tmp_path):
    # A Trainer as train_lightning.py builds it, for one process and for rank 0 of two
    config = parse_config(["--train", str(tmp_path)], env={})
    single = Topology("single", 0, 1, 0, 1, "127.0.0.1", free_port())
    trainer = train_lightning.build_trainer(config, single, callbacks=[], loggers=False)
    # Then the one process runs in the job's environment, which Lightning takes instead of probing for a cluster
    assert isinstance(trainer._accelerator_connector.cluster_environment, SageMakerEnvironment)
    assert train_lightning.build_plugins(dataclasses.replace(single, world_size=2, local_world_size=2)) == []


def test_any_other_module_trains_through_ddp(process_group):
    from lightning.pytorch.demos.boring_classes import BoringModel

    strategy = FusedDataParallelStrategy(Topology("single", 0, 1, 0, 1, "127.0.0.1", free_port()), "gloo")
    module = BoringModel()
    strategy.connect(module)
    strategy.configure_ddp()
    assert isinstance(strategy.model, DistributedDataParallel) and strategy.model.module is module


def forced_run(script: str, folder, channel: str, *extra: str) -> RunDirs:
    """`script` on two gloo ranks with the fused path forced (FORCING_LAUNCHER), started as mpirun starts them: the
    strategy reads the ranks from the environment whichever launcher set it, and a torchrun process adds a torch
    import to every run."""
    dirs = run_dirs(folder)
    # 4 layers, a bucket each (the launcher's): the update is sharded (ShardedAdamW).
    flags = ["--train", channel, "--width", "32", "--num-layers", "4", "--dropout", "0", "--epochs", "2",
             "--batch-size", "16", "--log-every", "4", *NO_PORTABLE_EXPORT, *dirs.flags(), *extra]
    ranks = start_mpirun_ranks([sys.executable, str(FORCING_LAUNCHER), str(TRAINING_CODE / script), *flags])
    outputs = [rank.communicate(timeout=300)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], f"{script} failed:\n" + "\n".join(
        output[-3000:] for output in outputs)
    return dirs


@pytest.mark.slow
def test_lightning_on_the_fused_path_trains_like_the_native_loop_and_checkpoints_plain(tmp_path, synthetic_channel):
    # Given both trainers on two gloo ranks with FusedDataParallel and the sharded update forced on
    native = forced_run("train_ddp.py", tmp_path / "native", str(synthetic_channel))
    lightning = forced_run("train_lightning.py", tmp_path / "lightning", str(synthetic_channel))
    # Then Lightning's automatic optimization (closure and all) ends with the native loop's weights
    native_weights, lightning_weights = native.weights(), lightning.weights()
    assert native_weights.keys() == lightning_weights.keys()
    for name, value in native_weights.items():
        torch.testing.assert_close(lightning_weights[name], value, atol=1e-6, rtol=1e-5, msg=name)
    # And its checkpoint holds the plain model's keys and AdamW's unsharded state for every parameter
    checkpoint = torch.load(lightning.checkpoint_dir / "last.ckpt", weights_only=False)
    assert set(checkpoint["state_dict"]) == {f"model.{name}" for name in native_weights}
    [optimizer] = checkpoint["optimizer_states"]
    parameters = [name for name in native_weights if not name.startswith("encoding.")]  # its edges are buffers
    assert len(optimizer["state"]) == len(optimizer["param_groups"][0]["params"]) == len(parameters)
    # And a rerun resumes from it onto the sharded optimizer (finished already: it trains no further)
    resumed = forced_run("train_lightning.py", tmp_path / "lightning", str(synthetic_channel))
    for name, value in resumed.weights().items():
        torch.testing.assert_close(value, lightning_weights[name], atol=0, rtol=0, msg=name)


def test_the_first_training_step_comes_before_any_validation_batch(tmp_path):
    from lightning.pytorch.demos.boring_classes import BoringModel

    class Order(L.Callback):
        def __init__(self):
            self.seen: list[str] = []

        def on_train_batch_start(self, *args) -> None:
            self.seen.append("train")

        def on_validation_batch_start(self, *args) -> None:
            self.seen.append("validation")

    # Given a Trainer as train_lightning.py builds it (its console quieted first), for one process, fitting a model
    # with validation batches
    quiet_lightning_console()
    config = parse_config(["--train", str(tmp_path)], env={})
    order = Order()
    trainer = train_lightning.build_trainer(config, Topology("single", 0, 1, 0, 1, "127.0.0.1", free_port()),
                                            callbacks=[order], loggers=False, max_epochs=1, max_steps=-1,
                                            limit_train_batches=2, limit_val_batches=1,
                                            enable_checkpointing=False, enable_model_summary=False)
    trainer.fit(BoringModel())
    # Then no sanity check validates before training: the first step is the run's first batch, as in train_ddp.py
    assert order.seen[0] == "train" and "validation" in order.seen
