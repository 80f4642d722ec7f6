"""Training hosts as SageMaker starts them under the `model_trainer` launch, on this machine: the real
ContainerEntrypoint and ContainerArguments of SDK v3's ModelTrainer, running the real `sm_train.sh`, `environment.py`
and driver scripts synthesis deploys (stacks/model_trainer_files.py), each host's folder laid out as SageMaker lays
out /opt/ml and run as local mode runs such a job (local_mode/container/container_entrypoint.py: the folder as the
host's /opt/ml, the job's hosts named in /etc/hosts, in a network of their own). The hosts' Python is this test run's
(.venv: torch, the training code's packages); requirements.txt is not installed (that would change .venv).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from local_mode.container.container_entrypoint import JOB_NAME_VARIABLE, JobNetwork, plan_container_launches
from local_mode.container.container_layout import HostFolder, host_names, resource_config
from local_mode.container.process_group import ProcessGroup

JOB_NAME = "ranker-model-trainer-hosts"


@dataclass(frozen=True)
class HostRun:
    root: Path
    """The host's /opt/ml."""
    output: str


def lay_out_host(folder: HostFolder, *, host: str, hosts: list[str], instance_type: str, drivers: Mapping[str, bytes],
                 code: Mapping[str, Path], channels: Mapping[str, Path], hyperparameters: Mapping[str, str]) -> None:
    """What SageMaker writes into /opt/ml before the container starts: the config files and each channel."""
    folder.create()
    folder.write_config(
        hyperparameters=dict(hyperparameters),
        resource_config=resource_config(current_host=host, hosts=hosts, instance_type=instance_type),
        input_data_config={name: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                                  "RecordWrapperType": "None"} for name in [*channels, "code", "sm_drivers"]})
    for name, content in drivers.items():
        (folder.channel_dir("sm_drivers") / name).parent.mkdir(parents=True, exist_ok=True)
        (folder.channel_dir("sm_drivers") / name).write_bytes(content)
    for name, path in code.items():
        (folder.channel_dir("code") / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder.channel_dir("code") / name)
    for name, source in channels.items():
        shutil.copytree(source, folder.channel_dir(name))


def run_hosts(work_dir: Path, *, command: list[str], drivers: Mapping[str, bytes], code: Mapping[str, Path],
              channels: Mapping[str, Path], hyperparameters: Mapping[str, str], host_count: int = 2,
              instance_type: str = "ml.g5.xlarge", timeout: int = 300) -> list[HostRun]:
    """Lays out `host_count` hosts under `work_dir` and runs `command` (the request's ContainerEntrypoint +
    ContainerArguments) on each at once, as SageMaker does; returns each host's run, algo-1 first, once all ended
    well (a host that fails stops the others, and the assertion shows every host's output)."""
    hosts = host_names(host_count)
    folders = {host: HostFolder(work_dir / host) for host in hosts}
    for host, folder in folders.items():
        lay_out_host(folder, host=host, hosts=hosts, instance_type=instance_type, drivers=drivers, code=code,
                     channels=channels, hyperparameters=hyperparameters)
    output: dict[str, list[str]] = {host: [] for host in hosts}
    with JobNetwork() as network:
        launches = plan_container_launches(
            command, folders=folders, network=network, python=sys.executable, install_requirements=False,
            environments={host: {JOB_NAME_VARIABLE: JOB_NAME, "OMP_NUM_THREADS": "1"} for host in hosts})
        group = ProcessGroup(launches, lambda host, line: output[host].append(line))
        group.start()
        ended = group.wait(deadline=time.monotonic() + timeout, stop_requested=threading.Event(), grace_seconds=5)
    runs = [HostRun(folders[host].root, "\n".join(output[host])) for host in hosts]
    assert (ended.reason, ended.code) == ("exit", 0), "\n".join(run.output[-4000:] for run in runs)
    return runs
