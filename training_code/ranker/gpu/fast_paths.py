"""Which fast paths a run takes: decided here, once, from what the running torch (and its NCCL) can do and what the
run asks for. Every other module asks `choose` and runs the portable path wherever a fast path is not taken.

The portable path runs on every supported torch (2.2 onwards): autocast's `Linear` + `ReLU`, DDP across ranks, and
on GPU the whole step captured as a CUDA graph (`torch.cuda.graph`; torch 2.2's fused AdamW already takes the
learning rate as a device tensor, which the captured step needs).
The fast paths on top of it, each with what it needs:
- fused bf16 layers (ranker.gpu.fused_linear): the float32-output GEMM, `torch.mm(..., out_dtype=)`;
- FusedDataParallel (ranker.gpu.fused_data_parallel): the fused layers (their backward writes the gradients it reduces),
  several processes, NCCL, float32 gradients;
- the sharded update (ranker.gpu.sharded_optimizer): FusedDataParallel;
- the fused per-feature embedding (ranker.gpu.fused_embedding, for models that have one): Triton 3.3 or later (the
  first whose compiler takes the kernels' tuples of activations; compiled for sm_90 with 3.3 to 3.6).

`RANKER_AS_TORCH=2.2` in the environment makes a newer torch choose as torch 2.2 would, so that a GPU machine with a
newer torch can measure the path a torch 2.2 container takes.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ranker.config import TrainConfig

FORCE_VARIABLE = "RANKER_AS_TORCH"


@dataclass(frozen=True)
class Capabilities:
    """What the running torch offers that the fast paths need."""

    source: str
    """Which torch these describe, for the log line: `torch 2.8.0+cu128`, or the emulated one."""
    float32_output_gemm: bool
    """`torch.mm(a, b, out_dtype=torch.float32)` on bf16 operands (the `aten::mm.dtype` overload)."""
    device_bound_init: bool
    """`init_process_group(device_id=...)`: the NCCL communicator is made at start-up, bound to its GPU."""
    triton_kernels: bool = False
    """Triton, at MINIMUM_TRITON or later, beside this torch: the fused per-feature embedding's kernels compile."""


MINIMUM_TRITON = (3, 3)
# What torch 2.2.0 (the AWS DLC 2.2.0, CUDA 12.1, Triton 2.2) has, as probed with that torch.
TORCH_2_2 = Capabilities("torch 2.2", float32_output_gemm=False, device_bound_init=False, triton_kernels=False)
EMULATED = {"2.2": TORCH_2_2}


def probe() -> Capabilities:
    return Capabilities(
        f"torch {torch.__version__}",
        float32_output_gemm="dtype" in torch.ops.aten.mm.overloads(),
        device_bound_init="device_id" in inspect.signature(dist.init_process_group).parameters,
        triton_kernels=triton_version() >= MINIMUM_TRITON)


def triton_version() -> tuple[int, ...]:
    """The installed Triton's `(major, minor)`, `(0,)` without one (CPU builds of torch come without it). Read from
    the package's metadata: importing Triton itself takes seconds."""
    try:
        release = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return (0,)
    return tuple(int(part) for part in release.split("+")[0].split(".")[:2] if part.isdigit())


def as_older(actual: Capabilities, forced: str) -> Capabilities:
    """What both `actual` and the torch that `forced` names (a key of EMULATED) have."""
    older = EMULATED[forced]
    return Capabilities(f"{actual.source} as {older.source} ({FORCE_VARIABLE}={forced})",
                        float32_output_gemm=actual.float32_output_gemm and older.float32_output_gemm,
                        device_bound_init=actual.device_bound_init and older.device_bound_init,
                        triton_kernels=actual.triton_kernels and older.triton_kernels)


def capabilities(env: Mapping[str, str] = os.environ) -> Capabilities:
    """This torch's capabilities, or the emulated older torch's where FORCE_VARIABLE names one."""
    forced = env.get(FORCE_VARIABLE, "")
    if forced and forced not in EMULATED:
        raise ValueError(f"{FORCE_VARIABLE}: bad value {forced!r}: use one of {', '.join(EMULATED)}, or unset it to "
                         "use this torch's own capabilities")
    return _capabilities(forced)


@functools.lru_cache(maxsize=None)
def _capabilities(forced: str) -> Capabilities:
    return as_older(probe(), forced) if forced else probe()


@dataclass(frozen=True)
class TrainingPath:
    """The path one run takes. Each flag is a fast path; `not_taken` says, for each one off, why."""

    fused_layers: bool
    cuda_graph: bool
    fused_data_parallel: bool
    sharded_update: bool
    """Allowed: FusedDataParallel shards the update where the layers fill more than one gradient bucket."""
    fused_embedding: bool
    """Allowed: a model with per-feature embeddings runs them through ranker.gpu.fused_embedding's kernels."""
    bind_device: bool
    """Pass the GPU to `init_process_group` (not a fast path: what this torch allows)."""
    not_taken: tuple[tuple[str, str], ...]
    capabilities: Capabilities
    layers: str
    """What runs the dense layers, for the log line."""
    data_parallel: str
    """What averages the gradients, for the log line."""

    def taken(self) -> str:
        """What runs: the layers, the data parallelism, the step and any further fast path."""
        step = "CUDA graph" if self.cuda_graph else "eager step"
        parts = [self.layers, self.data_parallel, step]
        if self.sharded_update:
            parts.append("sharded update where the layers fill several buckets")
        if self.fused_embedding:
            parts.append("fused per-feature embeddings")
        return ", ".join(parts)

    def describe(self) -> str:
        """One line for rank 0's log: the path, then every fast path not taken and why."""
        skipped = "; ".join(f"{name}: {why}" for name, why in self.not_taken)
        return (f"training path on {self.capabilities.source}: {self.taken()}"
                + (f". Fast paths not taken: {skipped}" if skipped else ""))


def choose(config: TrainConfig, device_type: str, world_size: int = 1, backend: str = "",
           available: Capabilities | None = None) -> TrainingPath:
    """The path for a run of `config` on `device_type` (`cuda` or `cpu`) with `world_size` processes on `backend`,
    given `available` (default: `capabilities()`)."""
    have = available if available is not None else capabilities()
    switches = config.switches
    on_gpu = device_type == "cuda"
    reasons: dict[str, str | None] = {}

    def decide(name: str, checks: list[tuple[bool, str]]) -> bool:
        reasons[name] = next((why for ok, why in checks if not ok), None)
        return reasons[name] is None

    fused_layers = decide("fused bf16 layers", [
        (on_gpu, "CPU run"), (config.precision == "bf16", "--precision fp32"),
        (not config.compile, "--compile true (Inductor fuses instead)"),
        (switches.fused_layers, "switched off (fused_layers=False)"),
        (have.float32_output_gemm, f"{have.source} has no torch.mm(out_dtype=)")])
    cuda_graph = decide("CUDA graph", [
        (on_gpu, "CPU run"), (config.cuda_graph, "--cuda-graph false"),
        (not config.compile, "--compile true (Inductor's kernels instead)"),
        (switches.allreduce_dtype == "fp32", "the bf16 all-reduce hook runs Python per bucket")])
    fused_data_parallel = decide("FusedDataParallel", [
        (world_size > 1, "one process"), (fused_layers, "needs the fused bf16 layers"),
        (backend == "nccl", f"backend {backend}, not nccl"),
        (switches.allreduce_dtype == "fp32", "bf16 all-reduce (DDP's hook)"),
        (switches.data_parallel == "auto", "switched off (data_parallel='ddp')")])
    sharded_update = decide("sharded update", [
        (fused_data_parallel, "needs FusedDataParallel"),
        (switches.shard_optimizer, "switched off (shard_optimizer=False)")])
    fused_embedding = decide("fused per-feature embeddings", [
        (on_gpu, "CPU run"), (not config.compile, "--compile true (Inductor fuses instead)"),
        (switches.fused_embedding, "switched off (fused_embedding=False)"),
        (have.triton_kernels, f"no Triton {'.'.join(map(str, MINIMUM_TRITON))} or later beside {have.source}")])

    if world_size == 1:
        data_parallel = "one process"
    else:
        data_parallel = "FusedDataParallel" if fused_data_parallel else "DDP"
    if fused_layers:
        layers = "fused bf16 layers"
    else:
        layers = "autocast bf16 Linear + ReLU" if on_gpu and config.precision == "bf16" else "float32 Linear + ReLU"
        layers += " under torch.compile" if config.compile else ""
    return TrainingPath(fused_layers=fused_layers, cuda_graph=cuda_graph, fused_data_parallel=fused_data_parallel,
                        sharded_update=sharded_update, fused_embedding=fused_embedding,
                        bind_device=on_gpu and have.device_bound_init,
                        not_taken=tuple((name, why) for name, why in reasons.items() if why is not None),
                        capabilities=have, layers=layers, data_parallel=data_parallel)

