"""Both entry points train as a 2-rank job in each container environment, launched by the real toolkit.

torchrun for `torch_distributed` in every tested container; the MPI launch of `pytorchddp`/`smdistributed` in the
containers that allow SMDDP. The hyperparameters are encoded and flagged by the trigger's own request builder.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from training_trigger.request import distribution_hyperparameters, json_encode_hyperparameters

from local_mode.container.container_layout import HostFolder, input_data_config, resource_config
from local_mode.aws.network import free_port
from stacks.source_bundle import pack_source_dir

from .profile_envs import PARITY_PROFILES, build_or_skip

pytestmark = pytest.mark.slow

TRAINING_CODE = Path(__file__).resolve().parents[2] / "training_code"
TOOLKIT_JOB = Path(__file__).with_name("toolkit_job.py")
RANKS = 2
# A job takes seconds to a minute; a rank left waiting on a peer that exited must fail the test, not stall CI.
JOB_TIMEOUT_SECONDS = 300
STACK_DUMP_SECONDS = 5
ENTRY_POINTS = ("train_ddp.py", "train_lightning.py")
LAUNCHES = [(profile, distribution, launcher)
            for profile in PARITY_PROFILES
            for distribution, launcher in (("torch_distributed", "torch_distributed"), ("pytorchddp", "mpi"))
            if distribution in profile.distributions]
# The environment (Python, torch, Lightning), the launcher and the entry point are checked pairwise: every pair of
# their values meets in some job. The oldest environment launches both entry points under MPI and train_ddp.py under
# torchrun; train_lightning.py under torchrun there would add no pair that the newest environment's torchrun job of
# it and the oldest's MPI job of it do not already run, for two more ranks that import Lightning (~6 s of CPU each).
JOBS = [(profile, distribution, launcher, entry_point)
        for profile, distribution, launcher in LAUNCHES
        for entry_point in ENTRY_POINTS
        if not (entry_point == "train_lightning.py" and launcher == "torch_distributed"
                and "pytorchddp" in profile.distributions)]
assert {(launcher, entry_point) for _, _, launcher, entry_point in JOBS} == {
    (launcher, entry_point) for _, _, launcher in LAUNCHES for entry_point in ENTRY_POINTS}, "a pair went untested"


@pytest.mark.parametrize(("profile", "distribution", "launcher", "entry_point"), JOBS,
                         ids=[f"{profile.name}-{distribution}-{entry_point}" for profile, distribution, _, entry_point
                              in JOBS])
def test_a_two_rank_job_trains_to_metrics(profile, distribution, launcher, entry_point, tmp_path, letor_sample_dir):
    # Given the profile's environment and a host folder as SageMaker lays out /opt/ml for this job
    env = build_or_skip(profile)
    host = _host_folder(tmp_path, letor_sample_dir, entry_point, distribution)
    bundle = pack_source_dir(TRAINING_CODE, tmp_path / "bundle" / "sourcedir.tar.gz")
    # When the toolkit installs the requirements and launches two ranks
    clean = {name: value for name, value in os.environ.items()
             if not name.startswith(("SM_", "SAGEMAKER_", "PYTHON", "VIRTUAL_ENV"))}
    # On one host the toolkit starts torchrun without --master_port, which then listens on 29500 unless PET_MASTER_PORT
    # names another: two such jobs on two test workers would otherwise race for that one port.
    port = str(free_port())
    returncode, output = _run_job(
        [str(env.python), str(TOOLKIT_JOB), str(bundle), launcher, str(RANKS)],
        env={**clean, "PATH": f"{env.bin_dir}:{clean.get('PATH', '')}", "SAGEMAKER_BASE_DIR": str(host.root),
             "SM_STUDIO_LOCAL_MODE": "true", "TRAINING_JOB_NAME": "parity", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": port, "PET_MASTER_PORT": port, "OMP_NUM_THREADS": "1"})
    # Then it exits cleanly and rank 0 wrote metrics.json with a real ranking score
    assert returncode == 0, output[-6000:]
    metrics = json.loads((host.model_dir / "metrics.json").read_text())
    assert math.isfinite(metrics["train_loss"])
    assert 0.0 < metrics["val_ndcg@10"] <= 1.0


def _run_job(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Exit code and output. On timeout the ranks print their threads' stacks (faulthandler, on SIGABRT), then the
    whole process tree is killed, mpirun's ranks included (they sit in process groups of their own)."""
    with subprocess.Popen(command, env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as job:
        try:
            output, _ = job.communicate(timeout=JOB_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            processes, ranks = _job_processes(job.pid)
            _signal(ranks, signal.SIGABRT)  # their launcher forwards what they print, then exits
            time.sleep(STACK_DUMP_SECONDS)
            _signal(_job_processes(job.pid)[0] + processes, signal.SIGKILL)
            output, _ = job.communicate()
            pytest.fail(f"the job did not end within {JOB_TIMEOUT_SECONDS} s; its processes' stacks are at the end "
                        f"of its output:\n{output[-12000:]}")
    return job.returncode, output


def _job_processes(root: int) -> tuple[list[int], list[int]]:
    """`root` and its descendants, and those of them without children (the ranks). From /proc: the job's processes
    span several process groups."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # a process that exited while we looked
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, index = [root], 0
    while index < len(tree):
        tree.extend(children.get(tree[index], []))
        index += 1
    return tree, [pid for pid in tree if pid not in children]


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _host_folder(tmp_path: Path, letor_sample_dir: Path, entry_point: str, distribution: str) -> HostFolder:
    host = HostFolder(tmp_path / "algo-1")
    host.create()
    for name in ("rank.train", "rank.train.query"):
        (host.channel_dir("train") / name).parent.mkdir(parents=True, exist_ok=True)
        (host.channel_dir("train") / name).symlink_to(letor_sample_dir / name)
    instance_type = "ml.p4d.24xlarge" if distribution == "pytorchddp" else "ml.g5.12xlarge"
    # model.pt2 left out: test_scoring.py's job in each environment writes it and scores with it
    hyperparameters = json_encode_hyperparameters({
        "epochs": 1, "portable-export": False, "sagemaker_program": entry_point,
        "sagemaker_submit_directory": "file:///opt/ml/code",
        "sagemaker_container_log_level": 20, "sagemaker_job_name": "parity", "sagemaker_region": "us-east-1",
        **distribution_hyperparameters(distribution, instance_type)})
    channels = [{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataDistributionType": "FullyReplicated"}}}]
    host.write_config(hyperparameters=hyperparameters,
                      resource_config=resource_config(current_host="algo-1", hosts=["algo-1"],
                                                      instance_type=instance_type),
                      input_data_config=input_data_config(channels, "File"))
    return host
