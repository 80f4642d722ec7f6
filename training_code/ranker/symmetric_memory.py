"""Buffers that NCCL's symmetric kernels can work on: allocated from NCCL's own allocator (`ncclMemAlloc`) and
registered with the communicator as symmetric windows (`ncclCommWindowRegister`), the same offsets on every rank.

Why: on such buffers NCCL (2.27 and later) can run a collective as a symmetric kernel, which reads and writes the
peers' memory directly over NVLink instead of staging it through ring channels: fewer SMs held for less time, so less
is taken from the GEMMs running beside it. FusedDataParallel keeps its flat gradient and parameter buffers here,
where ranker.fast_paths takes symmetric memory: the sharded update's all-gathers take the symmetric kernel; the
reduce-scatters, averaging (AVG), keep NCCL's ring kernel (docs/benchmarks.md, optimisation log).

Where NCCL cannot (a backend other than NCCL, an allocator or registration NCCL refuses), the
buffers are ordinary memory and the collectives NCCL's ordinary kernels: same results, only slower.

A registration must be undone while its communicator lives: `register` arranges that through
`distributed.before_shutdown`, so leave the process group with `distributed.shutdown()`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch
import torch.distributed as dist

from ranker import distributed

log = logging.getLogger(__name__)


class SymmetricPool:
    """A memory pool on NCCL's allocator for the default process group's communicator on `device`. Allocate its
    tensors inside `allocating()`, in the same order on every rank, then `register()` them, collectively."""

    def __init__(self, device: torch.device):
        self.backend = dist.distributed_c10d._get_default_group()._get_backend(device)
        self.pool = torch.cuda.MemPool(self.backend.mem_allocator)

    @contextlib.contextmanager
    def allocating(self) -> Iterator[None]:
        with torch.cuda.use_mem_pool(self.pool):
            yield

    def register(self) -> bool:
        """Registers everything allocated so far as symmetric windows; False (and ordinary kernels) where NCCL
        refuses."""
        try:
            self.backend.register_mem_pool(self.pool, symm=True)
        except (RuntimeError, TypeError) as error:  # TypeError: a torch whose registration has no `symm`
            log.warning("NCCL symmetric memory unavailable (%s); collectives use NCCL's ordinary kernels", error)
            return False
        distributed.before_shutdown(self.release)
        return True

    def release(self) -> None:
        """Undoes the registration (collective; `register` has `distributed.shutdown()` call it once); the memory
        itself is freed with its last tensor."""
        self.backend.deregister_mem_pool(self.pool)


def symmetric_pool(device: torch.device) -> SymmetricPool | None:
    """A pool where NCCL's symmetric memory can exist: CUDA and NCCL (whether this torch has NCCL's allocator at all,
    ranker.fast_paths decides)."""
    if device.type != "cuda" or not dist.is_initialized() or dist.get_backend() != "nccl":
        return None
    try:
        return SymmetricPool(device)
    except RuntimeError as error:
        log.warning("NCCL's allocator unavailable (%s); buffers stay ordinary memory", error)
        return None
