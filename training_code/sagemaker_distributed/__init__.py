"""Any PyTorch training script as a SageMaker distributed job, whatever launched its ranks.

Native DDP: one call in place of `torch.distributed.init_process_group(...)`:

    import sagemaker_distributed
    process = sagemaker_distributed.init_process_group()      # torchrun, mpirun (pytorchddp/smdistributed) or python
    model = DistributedDataParallel(model.to(process.device), device_ids=process.device_ids)
    ...
    sagemaker_distributed.shutdown()

Lightning: one argument, `L.Trainer(strategy=sagemaker_distributed.lightning.strategy())`.

Also here: the backend choice (smddp where the container ships it and mpirun started the ranks, else NCCL on GPU,
gloo on CPU: `backend`), how long a collective may wait for the other ranks (`collective_timeout`), SIGTERM for spot
interruptions (`spot`), the failure reason SageMaker shows (`failure`), the folders SageMaker reads and writes and how
its channels were spread over the hosts (`paths`), the containers jobs run in (`container_profiles`) and the
environment variables a job may set (`job_environment`). docs/bring-your-own.md walks through both changes. Names are
imported when first used, so `paths`, `container_profiles`, `job_environment`, `failure` and `detect_topology` load
without torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Topology": "topology", "detect_topology": "topology", "device_for": "topology",
    "resolve_backend": "backend", "smddp_available": "backend",
    "ProcessInfo": "process_group", "init_process_group": "process_group", "shutdown": "process_group",
    "barrier": "process_group", "all_reduce_sum": "process_group", "all_gather_objects": "process_group",
    "StopSignal": "spot", "failure_reported": "failure",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    if name in ("lightning", "paths", "container_profiles", "job_environment", "backend", "spot", "failure",
                "topology", "process_group", "collective_timeout"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
