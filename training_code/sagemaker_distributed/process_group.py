"""Joining and leaving the job's process group, whatever launcher started the ranks, and the few collectives a
training loop needs around its model (sums, object gathers, barriers), each a no-op in a single process.

`init_process_group()` is the one call a DDP script makes in place of `torch.distributed.init_process_group(...)`. A
single process joins a group of one rank, as torchrun's `--nproc-per-node 1` gives a script, so a script that wraps
its model in `DistributedDataParallel` or splits its data with `DistributedSampler` runs unchanged on one process.
"""

from __future__ import annotations

import importlib
import inspect
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from sagemaker_distributed.backend import SMDDP_MODULE, resolve_backend
from sagemaker_distributed.collective_timeout import collective_timeout, warn_if_not_enforced
from sagemaker_distributed.topology import Topology, detect_topology, device_for, export_torch_environment

# How long shutdown lets gloo's worker threads finish with the last collectives (see `shutdown`).
GLOO_WORKERS_DRAIN_S = 0.25


@dataclass(frozen=True)
class ProcessInfo:
    """Where this process sits and what it trains on, once it has joined the process group."""

    topology: Topology
    backend: str
    """`smddp`, `nccl` or `gloo`."""
    device: torch.device

    @property
    def rank(self) -> int:
        return self.topology.rank

    @property
    def local_rank(self) -> int:
        return self.topology.local_rank

    @property
    def world_size(self) -> int:
        return self.topology.world_size

    @property
    def is_main(self) -> bool:
        return self.topology.is_main

    @property
    def device_ids(self) -> list[int] | None:
        """What `DistributedDataParallel(device_ids=...)` takes: this process's GPU, or None on the CPU."""
        return [self.device.index] if self.device.type == "cuda" else None


def init_process_group(backend: str = "auto", *, topology: Topology | None = None,
                       device: torch.device | None = None, bind_device: bool | None = None,
                       timeout: timedelta | None = None) -> ProcessInfo:
    """Joins the default process group of the ranks torchrun, mpirun or SageMaker started (a group of one rank in a
    single process), on `backend` (`auto`: sagemaker_distributed.backend), with this process's GPU made current.
    `bind_device`: create NCCL's communicator now, bound to the GPU (default: where this torch can). `timeout`: how
    long a collective may wait for the other ranks (default: sagemaker_distributed.collective_timeout)."""
    topology = topology or detect_topology()
    device = device or device_for(topology)
    backend = resolve_backend(backend, topology, device.type == "cuda")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if backend == "smddp":
        importlib.import_module(SMDDP_MODULE)  # registers the backend; smddp reads ranks from its own launcher
        dist.init_process_group(backend="smddp")
        return ProcessInfo(topology, backend, device)
    if topology.world_size == 1:
        # No peer to meet: a store inside this process needs no address or port (plain `python` sets neither), and
        # NCCL creates its communicator only if a collective runs.
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
        return ProcessInfo(topology, backend, device)
    warn_if_not_enforced(backend)
    export_torch_environment(topology)
    store = restart_scoped_store(topology, os.environ)
    if bind_device is None:
        bind_device = "device_id" in inspect.signature(dist.init_process_group).parameters
    bound = {"device_id": device} if bind_device and device.type == "cuda" else {}
    dist.init_process_group(backend=backend, init_method=None if store else "env://", store=store,
                            rank=topology.rank, world_size=topology.world_size,
                            timeout=timeout or collective_timeout(), **bound)
    return ProcessInfo(topology, backend, device)


def restart_scoped_store(topology: Topology, env: Mapping[str, str]) -> dist.Store | None:
    """torchrun's static rendezvous (the toolkit's `--master_addr algo-1 --master_port 7777`) keeps one store for
    every restart, so after a rank dies the restarted ranks can read the addresses the dead attempt published and
    dial a closed port (gloo: "connectFullMesh failed ... Connection refused"). Keys under the restart count are
    this attempt's only. None outside torchrun: `env://` then does the usual."""
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or "TORCHELASTIC_RESTART_COUNT" not in env:
        return None
    store = dist.TCPStore(topology.master_addr, topology.master_port, topology.world_size, is_master=False,
                          timeout=dist.default_pg_timeout)
    return dist.PrefixStore(f"restart-{env['TORCHELASTIC_RESTART_COUNT']}", store)


def is_joined() -> bool:
    return dist.is_available() and dist.is_initialized()


def has_peers() -> bool:
    """Whether other ranks take part: the collectives below skip a group of one rank, which has nothing to exchange
    (on a GPU, NCCL would build a communicator for it)."""
    return is_joined() and dist.get_world_size() > 1


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    if has_peers():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_gather_objects(value: object) -> list[object]:
    if not has_peers():
        return [value]
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def barrier() -> None:
    if has_peers():
        dist.barrier()


def shutdown() -> None:
    """Leaves the process group (call it on success and failure alike, e.g. in a `finally`)."""
    if is_joined():
        if "gloo" in str(dist.get_backend()):
            # A gloo worker thread frees a collective's work just after it reports the collective done, and that
            # takes the GIL (its tensors, the Python state it captured). Torch builds without pytorch/pytorch#154976
            # (the 2.2 container's) destroy the process group holding the GIL while they join those workers: a worker
            # still freeing then deadlocks the rank at exit (1 job in ~8 as 2 ranks on 2 cores). Where the group
            # outlives this call (a DDP model still holds it), a worker that gets the GIL only once the interpreter is
            # finalizing is made to exit inside a C++ destructor, which aborts the rank after training
            # (pytorch/pytorch#190489; 6 in 75 runs of a plain two-host DDP script under torchrun on 2 cores).
            # Sleeping hands the GIL to such a worker first.
            time.sleep(GLOO_WORKERS_DRAIN_S)
        dist.destroy_process_group()
