"""Which processes each distribution starts, with which rank variables (pure: nothing is started)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from local_mode.container.container_environment import decode_hyperparameters, split_hyperparameters, user_args
from local_mode.container.launcher import MPI, SINGLE, TORCHRUN, launcher_for, plan_launches

HOSTS = {"algo-1": {"SM_CURRENT_HOST": "algo-1"}, "algo-2": {"SM_CURRENT_HOST": "algo-2"}}
CODE = {"algo-1": Path("/jobs/a/algo-1/code"), "algo-2": Path("/jobs/a/algo-2/code")}


def plan(launcher: str, processes_per_host: int, mpirun: str | None = None):
    return plan_launches(launcher=launcher, host_environments=HOSTS, code_dirs=CODE, entry_point="train.py",
                         user_args=["--epochs", "2"], processes_per_host=processes_per_host, master_port=29511,
                         mpirun=mpirun)


def test_the_sdk_distribution_flags_pick_the_toolkit_launcher():
    sdk_flags = {
        "torch_distributed": {"sagemaker_torch_distributed_enabled": "true"},
        "smdistributed": {"sagemaker_distributed_dataparallel_enabled": "true"},
        "mpi": {"sagemaker_mpi_enabled": "true"},
        "none": {"sagemaker_program": json.dumps("train.py")},
    }
    chosen = {name: launcher_for(split_hyperparameters(decode_hyperparameters(flags))[0])
              for name, flags in sdk_flags.items()}
    assert chosen == {"torch_distributed": TORCHRUN, "smdistributed": MPI, "mpi": MPI, "none": SINGLE}


def test_torchrun_runs_once_per_host_with_its_node_rank():
    launches = plan(TORCHRUN, processes_per_host=2)
    assert [launch.host for launch in launches] == ["algo-1", "algo-2"]
    for node_rank, launch in enumerate(launches):
        argv = launch.argv
        assert argv[1:3] == ["-m", "torch.distributed.run"]
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--nproc_per_node") + 1] == "2"
        assert argv[argv.index("--node_rank") + 1] == str(node_rank)
        assert argv[argv.index("--master_port") + 1] == "29511"
        assert argv[-3:] == ["train.py", "--epochs", "2"]
        assert launch.cwd == CODE[launch.host]


def test_without_open_mpi_each_rank_gets_the_variables_mpirun_would_set():
    launches = plan(MPI, processes_per_host=2)
    ranks = [(launch.host, launch.env["OMPI_COMM_WORLD_RANK"], launch.env["OMPI_COMM_WORLD_LOCAL_RANK"],
              launch.env["OMPI_COMM_WORLD_NODE_RANK"]) for launch in launches]
    assert ranks == [("algo-1", "0", "0", "0"), ("algo-1", "1", "1", "0"), ("algo-2", "2", "0", "1"),
                     ("algo-2", "3", "1", "1")]
    assert {launch.env["OMPI_COMM_WORLD_SIZE"] for launch in launches} == {"4"}
    assert {launch.env["OMPI_COMM_WORLD_LOCAL_SIZE"] for launch in launches} == {"2"}
    assert {(launch.env["MASTER_ADDR"], launch.env["MASTER_PORT"]) for launch in launches} == {("127.0.0.1", "29511")}


def test_with_open_mpi_one_host_runs_under_mpirun_exporting_the_environment():
    launches = plan_launches(launcher=MPI, host_environments={"algo-1": HOSTS["algo-1"]}, code_dirs=CODE,
                             entry_point="train.py", user_args=[], processes_per_host=3, master_port=29511,
                             mpirun="/usr/bin/mpirun")
    assert len(launches) == 1
    argv = launches[0].argv
    assert argv[0] == "/usr/bin/mpirun" and argv[argv.index("-np") + 1] == "3"
    assert "SM_CURRENT_HOST" in argv and "MASTER_PORT" in argv and argv[-1] == "train.py"


def test_no_distribution_is_one_plain_python_process_per_host():
    launches = plan(SINGLE, processes_per_host=4)
    assert [launch.argv[1:] for launch in launches] == [["train.py", "--epochs", "2"]] * 2


def test_user_args_follow_the_toolkit_encoding():
    decoded = decode_hyperparameters({"epochs": "3", "loss": '"listnet"', "flag": "true", "raw": "not json",
                                      "sagemaker_program": '"train.py"'})
    framework, user = split_hyperparameters(decoded)
    assert framework == {"sagemaker_program": "train.py"}
    assert user_args(user) == ["--epochs", "3", "--flag", "True", "--loss", "listnet", "--raw", "not json"]


def test_every_launch_runs_the_given_python():
    python = "/envs/2.2.0-py310/bin/python"
    for launcher, mpirun in ((TORCHRUN, None), (MPI, "/usr/bin/mpirun"), (MPI, None), (SINGLE, None)):
        launches = plan_launches(launcher=launcher, host_environments={"algo-1": {}}, code_dirs={"algo-1": Path("/c")},
                                 entry_point="train.py", user_args=[], processes_per_host=2, master_port=29511,
                                 mpirun=mpirun, python=python)
        for launch in launches:
            assert python in launch.argv and sys.executable not in launch.argv, (launcher, launch.argv)
