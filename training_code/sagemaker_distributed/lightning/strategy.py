"""Lightning's DDP over the processes SageMaker's launcher started, for any LightningModule: one argument,
`L.Trainer(strategy=sagemaker_distributed.lightning.strategy())`.

The launcher, not the Trainer, decides how many processes and hosts there are: the strategy takes its devices and
node count from the job's topology (sagemaker_distributed.topology), so the Trainer needs no `devices` or `num_nodes`
to match it, its backend from sagemaker_distributed.backend (smddp under mpirun where the container ships it,
NCCL on GPU, gloo on CPU), and its collective timeout from sagemaker_distributed.collective_timeout.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.strategies import DDPStrategy

from sagemaker_distributed.backend import resolve_backend
from sagemaker_distributed.collective_timeout import collective_timeout, warn_if_not_enforced
from sagemaker_distributed.lightning.environment import SageMakerEnvironment
from sagemaker_distributed.topology import Topology, detect_topology, device_for


class SageMakerDDPStrategy(DDPStrategy):
    """`DDPStrategy` with SageMakerEnvironment, this host's devices, the job's backend and collective timeout. Other
    keyword arguments are DDPStrategy's (`timeout=` overrides the collective timeout) and through it
    DistributedDataParallel's (`static_graph=True`, ...)."""

    def __init__(self, topology: Topology | None = None, backend: str = "auto", **ddp_kwargs: Any):
        topology = topology or detect_topology()
        devices = [device_for(topology, local_rank) for local_rank in range(topology.local_world_size)]
        backend = resolve_backend(backend, topology, devices[0].type == "cuda")
        warn_if_not_enforced(backend)
        ddp_kwargs.setdefault("timeout", collective_timeout())
        super().__init__(parallel_devices=devices, cluster_environment=SageMakerEnvironment(topology),
                         process_group_backend=backend, **ddp_kwargs)
        self.topology = topology

    @property
    def num_nodes(self) -> int:
        return self.topology.num_nodes

    @num_nodes.setter
    def num_nodes(self, num_nodes: int) -> None:
        # The Trainer passes its `num_nodes` flag here (1 unless set); the hosts the launcher started are the truth.
        if num_nodes not in (1, self.topology.num_nodes):
            raise ValueError(f"num_nodes: the Trainer asks for {num_nodes} but the launcher started "
                             f"{self.topology.num_nodes} host(s); leave num_nodes unset")


def strategy(backend: str = "auto", **ddp_kwargs: Any) -> SageMakerDDPStrategy | str:
    """The Trainer's `strategy` for this process: SageMakerDDPStrategy when a launcher started several processes;
    Lightning's own `auto` for a single one (it may then start one process per GPU itself, as it does anywhere)."""
    topology = detect_topology()
    if topology.world_size == 1:
        return "auto"
    return SageMakerDDPStrategy(topology, backend, **ddp_kwargs)
