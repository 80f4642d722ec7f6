"""Which process-group backend a job uses: SMDDP where the container ships it and its launcher (mpirun) started the
ranks, else NCCL on GPU and gloo on CPU.

smddp supports fewer collectives than NCCL (all-reduce SUM, broadcast, all-gather, barrier; no ReduceOp.AVG and no
new groups): code meant to run on it stays within those.
"""

from __future__ import annotations

import importlib

from sagemaker_distributed.topology import Topology

SMDDP_MODULE = "smdistributed.dataparallel.torch.torch_smddp"
BACKENDS = ("auto", "smddp", "nccl", "gloo")


def smddp_available() -> bool:
    try:
        importlib.import_module(SMDDP_MODULE)
    except ImportError:
        return False
    return True


def resolve_backend(requested: str, topology: Topology, cuda: bool, smddp: bool | None = None) -> str:
    """`auto`: smddp when it imports (`smddp`, probed when None) and mpirun started us, else nccl on GPU, gloo on CPU.
    A named backend is checked against this machine."""
    if requested not in BACKENDS:
        raise ValueError(f"backend: bad value {requested!r}: use one of {', '.join(BACKENDS)}")
    if smddp is None:
        smddp = topology.launcher == "mpirun" and smddp_available()
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
