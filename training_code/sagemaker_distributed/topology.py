"""Which launcher started this process, and where it sits among the job's processes.

Launchers SageMaker uses: torchrun (`torch_distributed`: RANK, WORLD_SIZE, LOCAL_RANK, ...), mpirun (`pytorchddp`,
`smdistributed`: OMPI_COMM_WORLD_*; the master address and port come from the toolkit's environment, else the first
of SM_HOSTS), or a plain `python` (one process). Under the `model_trainer` launch SDK v3 ModelTrainer's drivers start
the same two: its torchrun driver runs torchrun with `--nnodes`, `--node_rank` and the master `SM_MASTER_ADDR`:
`SM_MASTER_PORT` (algo-1:7777), its basic script driver a plain `python` on each host
(tests/training/test_model_trainer_drivers.py runs both).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DEFAULT_MASTER_PORT = 7777  # the port SageMaker's training toolkit uses for its launchers


@dataclass(frozen=True)
class Topology:
    launcher: str
    """`torchrun`, `mpirun` or `single`."""
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int

    @property
    def node_rank(self) -> int:
        return self.rank // self.local_world_size

    @property
    def num_nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def detect_topology(env: Mapping[str, str] = os.environ) -> Topology:
    if "OMPI_COMM_WORLD_RANK" in env:
        return Topology("mpirun", int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                        int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)), int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", 1)),
                        _master_addr(env), int(env.get("MASTER_PORT", DEFAULT_MASTER_PORT)))
    if "RANK" in env and "WORLD_SIZE" in env:
        return Topology("torchrun", int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)),
                        int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])), _master_addr(env),
                        int(env.get("MASTER_PORT", DEFAULT_MASTER_PORT)))
    return Topology("single", 0, 1, 0, 1, "127.0.0.1", int(env.get("MASTER_PORT", DEFAULT_MASTER_PORT)))


def _master_addr(env: Mapping[str, str]) -> str:
    """MASTER_ADDR as the toolkit sets it; else the first of SM_HOSTS (the toolkit's choice, `algo-1`)."""
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    hosts = json.loads(env.get("SM_HOSTS", "[]"))
    return sorted(hosts)[0] if hosts else "127.0.0.1"


def device_for(topology: Topology, local_rank: int | None = None) -> torch.device:
    """This process's device (or that of another `local_rank` on the host): its GPU, else the CPU."""
    # Imported here, not at the top: the topology alone is known without torch, so a job can start work (reading its
    # data) before it pays for torch's import.
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda", (topology.local_rank if local_rank is None else local_rank)
                            % torch.cuda.device_count())
    return torch.device("cpu")


def export_torch_environment(topology: Topology) -> None:
    """torch (and Lightning) read the rendezvous from these variables; mpirun does not set them."""
    os.environ.update({"MASTER_ADDR": topology.master_addr, "MASTER_PORT": str(topology.master_port),
                       "RANK": str(topology.rank), "WORLD_SIZE": str(topology.world_size),
                       "LOCAL_RANK": str(topology.local_rank)})
