"""The training code under the `model_trainer` launch: SDK v3 ModelTrainer's real drivers, from the pinned package,
start it on two hosts of this machine (model_trainer_hosts.py) with the exact command the request sends.

What the drivers set is read from their run, not restated: a probe script records what a script sees (working
folder, arguments, SM_* variables, sagemaker_distributed's topology and paths) under each driver. Both entry points
train on two hosts under the torchrun driver in local mode's tests (tests/local_mode/test_demo.py), through the whole
pipeline, to the weights their toolkit launch reaches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from training_launch import TRAINING_CODE

from model_trainer_hosts import HostRun, run_hosts
from stacks.model_trainer_files import drivers_channel_files, model_trainer_settings
from stacks.model_trainer_sdk import model_trainer_sdk
from stacks.source_layout import bundle_members

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("container_namespaces")]
PROBE = Path(__file__).with_name("scripts") / "model_trainer_probe.py"
PACKAGE = TRAINING_CODE / "sagemaker_distributed"


def _run(work_dir: Path, *, entry_script: str, distribution: str, code: dict[str, Path],
         channels: dict[str, Path], hyperparameters: dict[str, str]) -> list[HostRun]:
    """Two hosts running `entry_script` under `distribution`'s driver, as the stack deploys it."""
    launch = model_trainer_settings(bundle_members(TRAINING_CODE), source_dir="training_code")
    drivers = drivers_channel_files(model_trainer_sdk(), entry_script=entry_script, distribution=distribution,
                                    source_dir="training_code", requirements=None)
    return run_hosts(work_dir, command=[*launch["container_entrypoint"], *launch["container_arguments"]],
                     drivers=drivers, code=code, channels=channels, hyperparameters=hyperparameters)


@pytest.fixture(scope="module")
def probe_views(tmp_path_factory, synthetic_channel) -> dict[str, list[dict]]:
    """Each host's view under each driver, by distribution."""
    code = {"probe.py": PROBE, **{f"sagemaker_distributed/{name}": path
                                  for name, path in bundle_members(PACKAGE).items()}}
    views = {}
    for distribution in ("none", "torch_distributed"):
        runs = _run(tmp_path_factory.mktemp(distribution), entry_script="probe.py", distribution=distribution,
                    code=code, channels={"train": synthetic_channel},
                    hyperparameters={"learning-rate": "0.001", "early-stopping": "true", "loss": "listwise"})
        views[distribution] = [json.loads(path.read_text()) for run in runs
                               for path in sorted((run.root / "model").glob("view-*.json"))]
    return views


@pytest.mark.parametrize("distribution", ["none", "torch_distributed"])
def test_a_script_sees_the_drivers_folder_arguments_and_variables(probe_views, distribution):
    for host_rank, view in enumerate(probe_views[distribution]):
        # The script runs from the code channel, with the hyperparameters as flags in the request's order
        assert view["cwd"] == "/opt/ml/input/data/code"
        assert view["argv"] == ["--learning-rate", "0.001", "--early-stopping", "true", "--loss", "listwise"]
        environment = view["environment"]
        # ModelTrainer's variables: the source folder and script, the hosts, the master, one SM_HP_ per flag
        assert {name: environment[name] for name in ("SM_SOURCE_DIR", "SM_ENTRY_SCRIPT", "SM_HOST_COUNT",
                                                     "SM_CURRENT_HOST_RANK", "SM_MASTER_ADDR", "SM_MASTER_PORT",
                                                     "SM_HP_LEARNING_RATE", "SM_CURRENT_HOST")} == {
            "SM_SOURCE_DIR": "/opt/ml/input/data/code", "SM_ENTRY_SCRIPT": "probe.py", "SM_HOST_COUNT": "2",
            "SM_CURRENT_HOST_RANK": str(host_rank), "SM_MASTER_ADDR": "algo-1", "SM_MASTER_PORT": "7777",
            "SM_HP_LEARNING_RATE": "0.001", "SM_CURRENT_HOST": f"algo-{host_rank + 1}"}
        # And the toolkit's own are absent: no SM_USER_ENTRY_POINT, SM_MODULE_DIR
        assert "SM_USER_ENTRY_POINT" not in environment and "SM_MODULE_DIR" not in environment
        # sagemaker_distributed finds the job's folders and hyperparameters as under the toolkit
        assert view["in_training_job"] is True
        assert (view["model_dir"], view["train_channel"]) == ("/opt/ml/model", "/opt/ml/input/data/train")
        assert view["hyperparameters"] == {"learning-rate": 0.001, "early-stopping": True, "loss": "listwise"}


def test_without_distribution_each_host_runs_one_process_alone(probe_views):
    # The basic driver starts `python probe.py` on each host: two one-process jobs, as the toolkit's `none`
    assert [view["topology"]["launcher"] for view in probe_views["none"]] == ["single", "single"]
    assert [view["topology"]["world_size"] for view in probe_views["none"]] == [1, 1]


def test_under_the_torchrun_driver_the_hosts_form_one_group_at_algo_1(probe_views):
    # The torchrun driver starts torchrun --nnodes=2 --node_rank=<host rank> --master_addr=algo-1 on each host
    topologies = [view["topology"] for view in probe_views["torch_distributed"]]
    assert [(topology["launcher"], topology["rank"], topology["world_size"], topology["master_addr"],
             topology["master_port"]) for topology in topologies] == [
        ("torchrun", 0, 2, "algo-1", 7777), ("torchrun", 1, 2, "algo-1", 7777)]
