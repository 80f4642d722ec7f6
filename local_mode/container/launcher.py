"""Which processes a job starts on each local host, chosen by distribution as the SageMaker PyTorch toolkit does.

- `sagemaker_torch_distributed_enabled`: one `torchrun` per host (`--nnodes N --node_rank i`), static rendezvous
  on 127.0.0.1 instead of algo-1 (local host names do not resolve).
- `sagemaker_distributed_dataparallel_enabled` / `sagemaker_mpi_enabled` / `sagemaker_pytorch_ddp_enabled`:
  `mpirun` where Open MPI is installed and the job has one host; otherwise local mode starts the ranks itself with
  the OMPI_COMM_WORLD_* variables mpirun sets, and MASTER_ADDR/MASTER_PORT as the toolkit exports them.
- none of these: one `python` process.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_mode.aws.network import LOOPBACK

TORCHRUN = "torch_distributed"
MPI = "mpi"
SINGLE = "none"

_MPI_FLAGS = ("sagemaker_distributed_dataparallel_enabled", "sagemaker_mpi_enabled", "sagemaker_pytorch_ddp_enabled")


@dataclass(frozen=True)
class Launch:
    """One OS process to start on a local host."""

    host: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path


def launcher_for(framework_parameters: dict[str, Any]) -> str:
    """TORCHRUN, MPI or SINGLE from the decoded `sagemaker_*` hyperparameters."""
    if framework_parameters.get("sagemaker_torch_distributed_enabled") is True:
        return TORCHRUN
    if any(framework_parameters.get(flag) is True for flag in _MPI_FLAGS):
        return MPI
    return SINGLE


def threads_per_process(total_processes: int) -> str:
    """OMP_NUM_THREADS that keeps all local ranks from oversubscribing the machine's cores."""
    return str(max(1, (os.cpu_count() or 1) // total_processes))


def plan_launches(*, launcher: str, host_environments: dict[str, dict[str, str]], code_dirs: dict[str, Path],
                  entry_point: str, user_args: list[str], processes_per_host: int, master_port: int,
                  mpirun: str | None = None, python: str = sys.executable) -> list[Launch]:
    """The processes to start, host by host, in host order (algo-1 first), each rank running `python`."""
    hosts = list(host_environments)
    world_size = len(hosts) * processes_per_host
    script = [entry_point, *user_args]
    launches = []
    for node_rank, host in enumerate(hosts):
        # Local defaults first: the job's own environment (in the host's) may set them, as it may in the cloud.
        env = {"OMP_NUM_THREADS": threads_per_process(world_size if launcher != SINGLE else 1),
               "PYTHONUNBUFFERED": "1", **host_environments[host], "MASTER_ADDR": LOOPBACK,
               "MASTER_PORT": str(master_port)}
        if launcher == TORCHRUN:
            argv = [python, "-m", "torch.distributed.run", "--nnodes", str(len(hosts)),
                    "--nproc_per_node", str(processes_per_host), "--node_rank", str(node_rank),
                    "--master_addr", LOOPBACK, "--master_port", str(master_port), *script]
            launches.append(Launch(host, argv, env, code_dirs[host]))
        elif launcher == MPI and mpirun and len(hosts) == 1:
            exported = [flag for name in sorted(env) for flag in ("-x", name)]
            argv = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(processes_per_host), *exported,
                    python, *script]
            launches.append(Launch(host, argv, env, code_dirs[host]))
        elif launcher == MPI:
            for local_rank in range(processes_per_host):
                rank_env = {**env, "OMPI_COMM_WORLD_RANK": str(node_rank * processes_per_host + local_rank),
                            "OMPI_COMM_WORLD_SIZE": str(world_size),
                            "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank),
                            "OMPI_COMM_WORLD_LOCAL_SIZE": str(processes_per_host),
                            "OMPI_COMM_WORLD_NODE_RANK": str(node_rank)}
                launches.append(Launch(host, [python, *script], rank_env, code_dirs[host]))
        else:
            launches.append(Launch(host, [python, *script], env, code_dirs[host]))
    return launches


def installed_mpirun() -> str | None:
    """Open MPI's launcher when it is on PATH."""
    return shutil.which("mpirun")
