"""A request's ContainerEntrypoint run on local hosts as the container runs it: each host's folder is its /opt/ml, the
job's host names resolve, the machine's /opt stays whole beside it, and in the project's environment the drivers'
requirements step is the one command the job's `python3` does not run."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from local_mode.container.container_entrypoint import (
    REQUIREMENTS_STEP,
    ContainerUnavailable,
    JobNetwork,
    container_command,
    plan_container_launches,
    require_namespaces,
)
from local_mode.container.container_layout import HostFolder, resource_config
from local_mode.container.process_group import ProcessGroup

# What each host prints: whose /opt/ml it sees, where algo-1 is, the machine's /opt, and what the job's python3 does.
LOOK_AROUND = ("cat /opt/ml/input/config/resourceconfig.json; echo; getent hosts algo-1; ls /opt; "
               f"python3 {REQUIREMENTS_STEP} requirements.txt; python3 -c 'print(\"python ran\")'")


def test_a_request_without_an_entrypoint_is_the_toolkits_and_one_with_it_runs_entrypoint_then_arguments():
    assert container_command({"TrainingImage": "image", "TrainingInputMode": "File"}) is None
    assert container_command({"ContainerEntrypoint": ["/bin/bash"], "ContainerArguments": ["-c", "true"]}) == [
        "/bin/bash", "-c", "true"]


def test_each_host_runs_the_command_in_its_own_opt_ml_with_the_jobs_host_names(container_namespaces, tmp_path):
    # Given two hosts' folders, with the config SageMaker writes
    hosts = ["algo-1", "algo-2"]
    folders = {host: HostFolder(tmp_path / "job" / host) for host in hosts}
    for host, folder in folders.items():
        folder.create()
        folder.write_config(hyperparameters={}, input_data_config={}, resource_config=resource_config(
            current_host=host, hosts=hosts, instance_type="ml.m5.large"))
    lines: dict[str, list[str]] = {host: [] for host in hosts}

    # When a command runs on both as a job's ContainerEntrypoint would, in the project's environment
    with JobNetwork() as network:
        launches = plan_container_launches(["/bin/sh", "-c", LOOK_AROUND], folders=folders,
                                           environments={host: {} for host in hosts}, network=network,
                                           python=sys.executable, install_requirements=False)
        group = ProcessGroup(launches, lambda host, line: lines[host].append(line))
        group.start()
        ended = group.wait(deadline=time.monotonic() + 60, stop_requested=threading.Event(), grace_seconds=5)

    # Then each host read its own folder as /opt/ml, and algo-1 is on the job's loopback
    assert ended.reason == "exit" and ended.code == 0, lines
    for host in hosts:
        output = "\n".join(lines[host])
        assert f'"current_host": "{host}"' in output
        assert "127.0.0.1       algo-1" in output
        # And the machine's /opt entries are still there beside ml
        assert set(path.name for path in Path("/opt").iterdir()) | {"ml"} <= set(lines[host])
        # And the drivers' requirements step was reported skipped, while python3 ran everything else
        assert "local mode: requirements.txt not installed: the job runs in this project's environment" in output
        assert "python ran" in lines[host]


def test_without_the_namespace_tools_the_refusal_names_them_and_the_fixes(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ContainerUnavailable) as refused:
        require_namespaces()
    message = str(refused.value)
    assert "unshare, nsenter, ip, mount, sh not found on PATH" in message
    assert "Run as root on Linux, or allow unprivileged user namespaces" in message and "launch 'toolkit'" in message
