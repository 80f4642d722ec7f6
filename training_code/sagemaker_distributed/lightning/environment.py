"""Lightning's view of a SageMaker cluster, for every launcher the toolkit uses.

Lightning recognises torchrun on its own but not mpirun (SageMaker's `pytorchddp`/`smdistributed`), and SageMaker
has no built-in environment; this one takes ranks and the rendezvous from `sagemaker_distributed.topology.detect_topology`, so all
three launchers (torchrun, mpirun, one process) look the same to the Trainer.
"""

from __future__ import annotations

import os

from lightning.pytorch.plugins.environments import ClusterEnvironment

from sagemaker_distributed.topology import Topology, detect_topology


class SageMakerEnvironment(ClusterEnvironment):
    def __init__(self, topology: Topology | None = None):
        super().__init__()
        self.topology = topology or detect_topology()

    @property
    def creates_processes_externally(self) -> bool:
        # The launcher (torchrun, mpirun, or the user's `python`) already started every process.
        return True

    @property
    def main_address(self) -> str:
        return self.topology.master_addr

    @property
    def main_port(self) -> int:
        return self.topology.master_port

    @staticmethod
    def detect() -> bool:
        return "SM_HOSTS" in os.environ or "SM_CURRENT_HOST" in os.environ

    def world_size(self) -> int:
        return self.topology.world_size

    def set_world_size(self, size: int) -> None:
        if size != self.topology.world_size:
            raise ValueError(f"world_size: Lightning asked for {size} processes but the launcher started "
                             f"{self.topology.world_size}; set devices x num_nodes to match the launcher")

    def global_rank(self) -> int:
        return self.topology.rank

    def set_global_rank(self, rank: int) -> None:
        if rank != self.topology.rank:
            raise ValueError(f"global_rank: Lightning computed {rank} but the launcher assigned "
                             f"{self.topology.rank}; set devices and num_nodes to match the launcher")

    def local_rank(self) -> int:
        return self.topology.local_rank

    def node_rank(self) -> int:
        return self.topology.node_rank
