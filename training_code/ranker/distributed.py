"""Which launcher started this process, which backend to use, and process-group set-up.

Launchers SageMaker uses: torchrun (`torch_distributed`: RANK, WORLD_SIZE, LOCAL_RANK, ...), mpirun (`pytorchddp`,
`smdistributed`: OMPI_COMM_WORLD_*; the master address and port come from the toolkit's environment), or a plain
`python` (one process). Collectives stay within what smddp supports: all-reduce SUM, broadcast, all-gather,
barrier; no ReduceOp.AVG and no new groups.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ranker.fast_paths import TrainingPath

# How long shutdown lets gloo's worker threads finish with the last collectives (see `shutdown`).
GLOO_WORKERS_DRAIN_S = 0.25
DEFAULT_MASTER_PORT = 7777  # the port SageMaker's training toolkit uses for its launchers
SMDDP_MODULE = "smdistributed.dataparallel.torch.torch_smddp"


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


def smddp_available() -> bool:
    try:
        importlib.import_module(SMDDP_MODULE)
    except ImportError:
        return False
    return True


def resolve_backend(requested: str, topology: Topology, cuda: bool, smddp: bool) -> str:
    """`auto`: smddp when it imports and its launcher (mpirun) started us, else nccl on GPU, gloo on CPU."""
    if requested == "smddp" and not smddp:
        raise ValueError(f"backend: 'smddp' requested but {SMDDP_MODULE} does not import; use an AWS DLC that "
                         "ships SMDDP (PyTorch <= 2.2 on p4d/p5) or pass --backend auto")
    if requested == "nccl" and not cuda:
        raise ValueError("backend: 'nccl' requested on a machine without CUDA; pass --backend gloo or auto")
    if requested != "auto":
        return requested
    if smddp and cuda and topology.launcher == "mpirun":
        return "smddp"
    return "nccl" if cuda else "gloo"


def device_for(topology: Topology) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", topology.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def export_torch_environment(topology: Topology) -> None:
    """torch (and Lightning) read the rendezvous from these variables; mpirun does not set them."""
    os.environ.update({"MASTER_ADDR": topology.master_addr, "MASTER_PORT": str(topology.master_port),
                       "RANK": str(topology.rank), "WORLD_SIZE": str(topology.world_size),
                       "LOCAL_RANK": str(topology.local_rank)})


def init_process_group(topology: Topology, backend: str, device: torch.device, path: TrainingPath) -> None:
    """Joins the default process group, as `path` (ranker.fast_paths.choose for this run) needs it."""
    if topology.world_size == 1:
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if backend == "smddp":
        importlib.import_module(SMDDP_MODULE)  # registers the backend; smddp reads ranks from its own launcher
        dist.init_process_group(backend="smddp")
        return
    export_torch_environment(topology)
    store = restart_scoped_store(topology, os.environ)
    # Bound to its GPU, NCCL makes the communicator now rather than at the first collective; torch 2.2 cannot.
    bound = {"device_id": device} if path.bind_device and device.type == "cuda" else {}
    dist.init_process_group(backend=backend, init_method=None if store else "env://", store=store,
                            rank=topology.rank, world_size=topology.world_size, **bound)


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


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_gather_objects(value: object) -> list[object]:
    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        if "gloo" in str(dist.get_backend()):
            # A gloo worker thread frees a collective's tensors just after it reports the collective done, and freeing
            # a tensor Python made takes the GIL. Torch builds without pytorch/pytorch#154976 (the 2.2 container's)
            # destroy the process group holding the GIL while they join those workers: a worker still freeing then
            # deadlocks the rank at exit, after training (1 job in ~8 as 2 ranks on 2 cores). Sleeping hands the GIL
            # to such a worker first.
            time.sleep(GLOO_WORKERS_DRAIN_S)
        dist.destroy_process_group()
