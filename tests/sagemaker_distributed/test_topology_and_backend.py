"""Launcher detection and backend choice for every way SageMaker starts the script."""

from __future__ import annotations

import pytest
from sagemaker_distributed import detect_topology, resolve_backend
from sagemaker_distributed.lightning.environment import SageMakerEnvironment

# What mpirun (Open MPI) sets for rank 3 of 8 on the second of two hosts, plus the toolkit's environment.
MPIRUN_ENV = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
              "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "SM_HOSTS": '["algo-2", "algo-1"]', "SM_CURRENT_HOST": "algo-2"}


def test_mpirun_ranks_come_from_ompi_variables_and_master_from_sm_hosts():
    topology = detect_topology(MPIRUN_ENV)
    assert (topology.launcher, topology.rank, topology.world_size, topology.local_rank) == ("mpirun", 3, 8, 1)
    assert (topology.master_addr, topology.master_port, topology.node_rank) == ("algo-1", 7777, 1)


def test_mpirun_master_address_and_port_from_the_toolkit_environment_win():
    topology = detect_topology({**MPIRUN_ENV, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29400"})
    assert (topology.master_addr, topology.master_port) == ("10.0.0.5", 29400)


def test_torchrun_variables():
    env = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "algo-1",
           "MASTER_PORT": "7777"}
    topology = detect_topology(env)
    assert (topology.launcher, topology.rank, topology.world_size, topology.num_nodes) == ("torchrun", 1, 4, 2)


def test_plain_python_is_one_process():
    topology = detect_topology({})
    assert (topology.launcher, topology.world_size, topology.rank) == ("single", 1, 0)


@pytest.mark.parametrize(("launcher_env", "cuda", "smddp", "expected"), [
    (MPIRUN_ENV, True, True, "smddp"),
    (MPIRUN_ENV, True, False, "nccl"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, True, True, "nccl"),  # smddp only under its own launcher
    ({}, False, False, "gloo"),
])
def test_auto_backend(launcher_env, cuda, smddp, expected):
    assert resolve_backend("auto", detect_topology(launcher_env), cuda, smddp) == expected


def test_asking_for_smddp_where_it_is_missing_is_a_clear_error():
    with pytest.raises(ValueError, match="backend: 'smddp' requested but smdistributed"):
        resolve_backend("smddp", detect_topology(MPIRUN_ENV), cuda=True, smddp=False)


def test_lightning_environment_reports_the_mpirun_topology():
    environment = SageMakerEnvironment(detect_topology(MPIRUN_ENV))
    assert (environment.global_rank(), environment.world_size(), environment.local_rank(),
            environment.node_rank(), environment.main_address, environment.main_port) == (3, 8, 1, 1, "algo-1", 7777)
    assert environment.creates_processes_externally
    with pytest.raises(ValueError, match="world_size"):
        environment.set_world_size(4)


def test_auto_probes_for_smddp_under_mpirun_and_picks_it_where_it_imports(smddp_stand_in):
    # Given SMDDP importable (the stand-in) and mpirun's ranks / When nothing says whether SMDDP is there / Then it is
    # probed for and chosen on GPU; torchrun's ranks never get it
    assert resolve_backend("auto", detect_topology(MPIRUN_ENV), cuda=True) == "smddp"
    assert resolve_backend("auto", detect_topology({"RANK": "0", "WORLD_SIZE": "2"}), cuda=True) == "nccl"


def test_without_smddp_auto_falls_back_to_nccl_on_gpu_and_gloo_on_cpu():
    assert resolve_backend("auto", detect_topology(MPIRUN_ENV), cuda=True) == "nccl"
    assert resolve_backend("auto", detect_topology(MPIRUN_ENV), cuda=False) == "gloo"


def test_an_unknown_backend_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"backend: bad value 'mpi': use one of auto, smddp, nccl, gloo"):
        resolve_backend("mpi", detect_topology({}), cuda=False)
