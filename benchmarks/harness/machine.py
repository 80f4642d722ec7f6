"""The machine a benchmark runs on: what its section's `Machine:` line says of it, and what every process it launches
there is given.

`machine_description(device)` names the device and the CPU cores, for the benchmarks that launch the entry points
(their data path and threads follow the cores); `gpu_machine_description()` names the GPUs and the CUDA, NCCL and
Lightning versions, for the throughput tables (those set the rate).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from ranker.data.letor_parser import available_cores

# NVLink multicast stays off on shared machines (it can take a host's GPUs out of service).
SAFE_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def machine_description(device: str) -> str:
    cores = f"{available_cores()} CPU cores"
    if device == "cuda":
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}, {cores}; torch {torch.__version__}"
    return f"CPU only, {cores}; torch {torch.__version__}"


def gpu_machine_description() -> str:
    if not torch.cuda.is_available():
        return "CPU only (smoke run)"
    name = torch.cuda.get_device_name(0)
    nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
    import lightning

    return (
        f"{torch.cuda.device_count()} x {name}; torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"NCCL {nccl}, Lightning {lightning.__version__}"
    )


def scheduling() -> str:
    """How this process (and so every run it times) competes for the cores: its nice value, and on Linux with
    scheduler autogroups that of its session's group, which is what weighs it against other sessions' work."""
    try:
        autogroup = Path("/proc/self/autogroup").read_text().split()[-1]
    except (OSError, IndexError):
        return f"nice {os.nice(0)}"
    return f"nice {os.nice(0)}, scheduler autogroup nice {autogroup}"
