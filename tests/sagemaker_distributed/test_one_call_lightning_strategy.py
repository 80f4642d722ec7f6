"""The one-call Lightning strategy: DDP over the processes the launcher started, whatever the Trainer's own
`devices`/`num_nodes` say, with the job's backend."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from sagemaker_distributed import detect_topology
from sagemaker_distributed.lightning import SageMakerDDPStrategy, SageMakerEnvironment, strategy

# torchrun's variables for rank 3 of 4: the second process on the second of two hosts.
TWO_HOSTS_OF_TWO = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                    "MASTER_ADDR": "algo-1", "MASTER_PORT": "7777"}
MPIRUN_TWO_HOSTS_OF_TWO = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
                           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                           "SM_HOSTS": '["algo-1", "algo-2"]', "MASTER_PORT": "7777"}


def trainer_with(strategy_under_test) -> L.Trainer:
    # A Trainer as a user's script builds one: no devices, no num_nodes, only the strategy.
    return L.Trainer(strategy=strategy_under_test, max_epochs=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False)


def test_the_trainer_takes_hosts_processes_and_ranks_from_the_launcher(monkeypatch):
    for name, value in TWO_HOSTS_OF_TWO.items():
        monkeypatch.setenv(name, value)
    trainer = trainer_with(strategy())
    chosen = trainer.strategy
    assert isinstance(chosen, SageMakerDDPStrategy) and isinstance(chosen.cluster_environment, SageMakerEnvironment)
    assert (chosen.num_nodes, chosen.num_processes, chosen.process_group_backend) == (2, 2, "gloo")
    chosen.set_world_ranks()
    assert (trainer.global_rank, trainer.world_size, trainer.local_rank, trainer.node_rank) == (3, 4, 1, 1)
    # Lightning's DistributedSampler splits each epoch four ways, this process taking its own quarter
    assert chosen.distributed_sampler_kwargs == {"num_replicas": 4, "rank": 3}


def test_a_trainer_that_names_other_hosts_than_the_launcher_started_is_refused():
    chosen = SageMakerDDPStrategy(detect_topology(TWO_HOSTS_OF_TWO))
    with pytest.raises(ValueError, match="num_nodes: the Trainer asks for 3 but the launcher started 2 host"):
        chosen.num_nodes = 3


def test_one_process_is_left_to_lightning(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert strategy() == "auto"


def test_under_mpirun_with_smddp_in_the_container_the_strategy_asks_for_smddp(smddp_stand_in):
    # Given mpirun's ranks and SMDDP importable / When the script asks for smddp (as `--backend smddp` would) / Then
    # the process group Lightning creates is smddp's
    chosen = SageMakerDDPStrategy(detect_topology(MPIRUN_TWO_HOSTS_OF_TWO), backend="smddp")
    assert chosen.process_group_backend == "smddp"
    assert SageMakerDDPStrategy(detect_topology(MPIRUN_TWO_HOSTS_OF_TWO)).process_group_backend == "gloo"  # CPU


def test_the_strategy_trains_any_module_in_one_process_too():
    # Given one process (a world of one, as in a single-instance job started by the launcher)
    single = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"}
    trainer = trainer_with(SageMakerDDPStrategy(detect_topology(single)))
    trainer.limit_train_batches = 2
    try:
        trainer.fit(BoringModel())
    finally:
        # Lightning leaves the process group it made for later fits in this process: the next test makes its own.
        torch.distributed.destroy_process_group()
    assert trainer.global_step == 2
