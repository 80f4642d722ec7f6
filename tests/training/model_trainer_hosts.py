"""Training hosts as SageMaker starts them under the `model_trainer` launch, on this machine: the real
ContainerEntrypoint and ContainerArguments of SDK v3's ModelTrainer, running the real `sm_train.sh`, `environment.py`
and driver scripts synthesis deploys (stacks/model_trainer_files.py), each host in a folder laid out as /opt/ml.

The drivers hard-code /opt/ml (sagemaker-train's container_drivers: scripts/environment.py, common/utils.py) and
ModelTrainer's master `algo-1:7777`, so each host runs in a mount namespace of its own where its folder is /opt/ml and
/etc/hosts names the hosts, and all hosts share a network namespace of their own, so port 7777 is theirs alone
(`unshare`, as root: CI runs as root). The hosts' Python is this test run's (.venv: torch, the training code's
packages); requirements.txt is not installed (that would change .venv).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

JOB_NAME = "ranker-model-trainer-hosts"
# In a host's mount namespace: an empty /opt, its folder as /opt/ml, the hosts file as /etc/hosts; then the command.
_AS_CONTAINER = ('mount -t tmpfs tmpfs /opt && mkdir /opt/ml && mount --bind "$1" /opt/ml && '
                 'mount --bind "$2" /etc/hosts && cd / && shift 2 && exec "$@"')


@dataclass(frozen=True)
class HostRun:
    root: Path
    """The host's /opt/ml."""
    returncode: int
    output: str


def missing_tools() -> list[str]:
    return [tool for tool in ("unshare", "ip", "mount") if shutil.which(tool) is None]


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def lay_out_host(root: Path, *, host: str, hosts: list[str], instance_type: str, drivers: Mapping[str, bytes],
                 code: Mapping[str, Path], channels: Mapping[str, Path], hyperparameters: Mapping[str, str]) -> None:
    """What SageMaker writes into /opt/ml before the container starts: the config files and each channel."""
    config = root / "input" / "config"
    _write_json(config / "resourceconfig.json", {
        "current_host": host, "current_instance_type": instance_type, "current_group_name": "homogeneousCluster",
        "hosts": hosts, "network_interface_name": "eth0"})
    _write_json(config / "inputdataconfig.json", {
        name: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
        for name in [*channels, "code", "sm_drivers"]})
    _write_json(config / "hyperparameters.json", dict(hyperparameters))
    data = root / "input" / "data"
    for name, content in drivers.items():
        (data / "sm_drivers" / name).parent.mkdir(parents=True, exist_ok=True)
        (data / "sm_drivers" / name).write_bytes(content)
    for name, path in code.items():
        (data / "code" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, data / "code" / name)
    for name, folder in channels.items():
        shutil.copytree(folder, data / name)
    for folder in ("model", "output/data", "checkpoints"):
        (root / folder).mkdir(parents=True, exist_ok=True)


def run_hosts(work_dir: Path, *, command: list[str], drivers: Mapping[str, bytes], code: Mapping[str, Path],
              channels: Mapping[str, Path], hyperparameters: Mapping[str, str], host_count: int = 2,
              instance_type: str = "ml.g5.xlarge", environment: Mapping[str, str] | None = None,
              timeout: int = 300) -> list[HostRun]:
    """Lays out `host_count` hosts under `work_dir` and runs `command` (the request's ContainerEntrypoint +
    ContainerArguments) on each at once, as SageMaker does; returns each host's run, algo-1 first."""
    hosts = [f"algo-{index + 1}" for index in range(host_count)]
    for host in hosts:
        lay_out_host(work_dir / host, host=host, hosts=hosts, instance_type=instance_type, drivers=drivers, code=code,
                     channels=channels, hyperparameters=hyperparameters)
    hosts_file = work_dir / "hosts"
    hosts_file.write_text("".join(f"127.0.0.1 {name}\n" for name in ["localhost", socket.gethostname(), *hosts]))
    plan = {"work_dir": str(work_dir), "hosts": hosts, "timeout": timeout, "hosts_file": str(hosts_file), "command": command,
            "environment": {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                            "TRAINING_JOB_NAME": JOB_NAME, "HOME": str(work_dir), "OMP_NUM_THREADS": "1",
                            "PYTHONDONTWRITEBYTECODE": "1", **(environment or {})}}
    subprocess.run(["unshare", "--mount", "--net", "--propagation", "private", sys.executable, __file__,
                    json.dumps(plan)], check=True, timeout=timeout + 30)
    return [HostRun(work_dir / host, int((work_dir / f"{host}.status").read_text()),
                    (work_dir / f"{host}.log").read_text()) for host in hosts]


def _start_hosts(plan: dict) -> None:
    """Inside the hosts' network namespace: loopback up, then every host in a mount namespace of its own."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work_dir = Path(plan["work_dir"])
    running = []
    for host in plan["hosts"]:
        log = open(work_dir / f"{host}.log", "w")  # noqa: SIM115 -- closed after the host ends
        running.append((host, log, subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", _AS_CONTAINER, "sh",
             str(work_dir / host), plan["hosts_file"], *plan["command"]],
            env=plan["environment"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)))
    for host, log, process in running:
        try:
            status = process.wait(timeout=plan["timeout"])
        except subprocess.TimeoutExpired:
            # The driver's torchrun and its workers are in the host's session: end them all.
            os.killpg(process.pid, signal.SIGKILL)
            status = process.wait()
        (work_dir / f"{host}.status").write_text(str(status))
        log.close()


if __name__ == "__main__":
    _start_hosts(json.loads(sys.argv[1]))
